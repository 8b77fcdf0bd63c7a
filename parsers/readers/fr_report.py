"""Reads the text report of PyTorch's Flight Recorder analyzer (`fr_trace`, `torchfrtrace`,
`python -m torch.distributed.flight_recorder.fr_trace`), the block users paste into issues.

Why a reader of its own: the analyzer has already matched every rank's dump, so one block
says which collective of which group did not line up and who it blames. Its words need care
(read the judge, parsers/judges/logs/fr_report.py): 'missing ranks' are ranks whose dumps lack
the collective; 'Culprit rank' in `error msg` only means 'differs from the reference rank the
analyzer compared against', so when that reference rank is the odd one most ranks get listed.

Layout (torch 2.5 to 2.9, tools/flight_recorder and torch.distributed.flight_recorder):
a header line per finding, then `key: value` field lines, then `collective stack trace:` and
frames `name at file:line`. Headers seen across versions:

    Not all ranks joining collective 5 at entry 4
    Not all ranks joining collective, sequence number: 4      (also `collective: sequence number:`)
    Collective 39 at entry 38 errors
    Collective sequence number: 1487 has errors
    Input/output mismatch in the collective sequence number: 7
    Not all ranks joining collective for group 0:default_pg collective nccl:all_reduce Missing ranks are {1}

plus the lines `We cannot decide what's wrong with this collective entry because we missed FR
dumps from ranks ({..}) ...` and `No errors found for this collective entry, ...`.
Everything is bounded: a rank set or culprit list holds at most MAX_RANKS entries.
"""

from __future__ import annotations

import re

from parsers.model.events import ErrorEvent, ErrorKind, FrCulprit, FrFinding, Origin, normalise_op
from parsers.readers.c10d import group_key

MAX_RANKS = 4096  #: ranks kept from one set or list (a report of a huge job stays small)
MAX_FRAMES = 16  #: stack frames kept per finding
MAX_SET_CHARS = 64 * 1024  #: a rank set longer than this is not parsed (hostile or absurd input)

_HEADERS = (
    (re.compile(r"^Not all ranks joining collective (?P<seq>\d{1,12}) at entry (?P<rec>\d{1,12})\s*$"), "not-joined"),
    (re.compile(r"^Not all ranks joining collective(?:,|:)? sequence number: (?P<seq>\d{1,12})\s*$"), "not-joined"),
    (re.compile(r"^Collective (?P<seq>\d{1,12}) at entry (?P<rec>\d{1,12}) errors?\s*$"), "errors"),
    (re.compile(r"^Collective sequence number: (?P<seq>\d{1,12}) has errors\s*$"), "errors"),
    (re.compile(r"^Input/output mismatch in the collective sequence number: (?P<seq>\d{1,12})\s*$"), "io-mismatch"),
)
#: the oldest analyzer printed one line (a trailing size/state tail in some revisions)
_ONE_LINE = re.compile(r"^Not all ranks joining collective for group (?P<group>\S+) collective (?P<op>\S+)\s+"
                       r"Missing ranks are (?P<missing>\{[^}]{0,65536}\}|set\(\))")
_FIELD = re.compile(r"^(?P<key>internal record id|group info|collective|missing ranks|total input numel|"
                    r"total output numel|input sizes|output sizes|world size|expected ranks|collective state|"
                    r"error msg|collective stack trace|Collective stack traces)\s*:\s?(?P<value>.*)$")
_FRAME = re.compile(r"^\S.{0,400} at \S{1,1000}:\d+\s*$")
_MISSED_DUMPS = re.compile(r"We cannot decide what's wrong with this collective entry because we missed FR dumps "
                           r"from ranks \((?P<ranks>\{[^}]{0,65536}\}|set\(\))\)")
_NO_ERRORS = "No errors found for this collective entry"
#: how every line that opens or stands for a finding begins (_HEADERS, _ONE_LINE, _NO_ERRORS, _GAVE_UP), and the
#: words _MISSED_DUMPS searches for anywhere: a line with neither, outside a finding, is no report's
_OPENERS = ("Not all ranks joining collective", "Collective ", "Input/output mismatch", _NO_ERRORS,
            "Too many mismatches")
_MISSED_WORDS = "We cannot decide what's wrong"
#: the analyzer stops a group after its mismatch cap (`--mismatch_cap`, 10 by default)
_GAVE_UP = re.compile(r"^Too many mismatches for process_group (?P<pg>\S{1,200}): (?P<desc>\S{0,200}) aborting\s*$")
_CULPRIT = re.compile(r"Culprit rank (?P<rank>\d{1,9}); Error type: (?P<type>[A-Z_]{1,64})")
#: how the report's own lines begin: a new record for the rank log's re-joining of hard wraps (a report's
#: lines often share one length, which reads as a wrap width)
LINE_START = (r"Not all ranks joining|Collective \d|Collective sequence number|Input/output mismatch|We cannot decide"
              r"|No errors found|Too many mismatches|(?:internal record id|group info|collective|missing ranks"
              r"|expected ranks|world size|collective state|error msg|input sizes|output sizes)\s*:")
#: words only this report prints: a line with them that no pattern read is reported (textline.looks_known)
KNOWN_WORDS = re.compile(r"Not all ranks joining collective|at entry \d+ errors?\b|[Cc]ollective sequence number|"
                         r"Too many mismatches for process_group|"
                         r"Culprit rank \d+; Error type|missed FR dumps|No errors found for this collective entry|"
                         r"^\s*(?:internal record id|group info|missing ranks|expected ranks|collective state"
                         r"|error msg)\s*:")


def parse_ranks(text: str) -> list[int] | None:
    """'{0, 1, 3}' / 'set()' -> sorted ranks (at most MAX_RANKS); None when it is no such set."""
    text = text.strip()
    if text == "set()":
        return []
    if len(text) > MAX_SET_CHARS or not (text.startswith("{") and text.endswith("}")):
        return None
    body = text[1:-1].strip()
    if not body:
        return []
    out: list[int] = []
    for part in body.split(",", MAX_RANKS)[:MAX_RANKS]:
        part = part.strip()
        if not part.isdigit() or len(part) > 9:  # a rank of ten digits is no rank (and int() of a huge one fails)
            return None
        out.append(int(part))
    return sorted(set(out))


def parse_culprits(text: str) -> tuple[list[FrCulprit], bool]:
    """`error msg` -> ([FrCulprit], complete). `complete` is False when the list may be cut
    (MAX_RANKS reached, or the text stops inside an entry, as pasted copies often do)."""
    found: list[FrCulprit] = []
    ends = 0
    for m in _CULPRIT.finditer(text):
        if len(found) >= MAX_RANKS:
            return found, False
        found.append(FrCulprit(int(m.group("rank")), m.group("type")))
        ends = m.end()
    tail = text[ends:].rstrip()
    # each entry's details end in a quoted value ("found input sizes: '[[262144]]'"): a pasted copy cut
    # inside the last entry ends otherwise
    complete = bool(found) and "Culprit rank" not in tail and (not tail or tail.endswith("'"))
    return found, complete


def _group(value: str) -> tuple[str | None, str | None, str | None]:
    """'0:default_pg' -> (comm key, pg id, description); the key is the c10d reader's for the same group."""
    pg, _, desc = value.strip().partition(":")
    desc = desc or None
    return group_key(pg, desc), pg, desc


class FrReportBlock:
    """Line-fed reader of analyzer findings. `feed` returns (the line belonged to a report,
    events of findings it closed); `finish` closes the last one."""

    def __init__(self) -> None:
        self.cur: dict | None = None
        self.origin: Origin | None = None
        self.in_stack = False

    def feed(self, text: str, origin: Origin) -> tuple[bool, list]:
        line = text.strip()
        if not line:  # a finding ends at a blank line (the analyzer prints none inside one)
            return False, self._close()
        if self.cur is None and not line.startswith(_OPENERS) and _MISSED_WORDS not in line:
            return False, []  # the common case, a log line outside a report: no regex for it (runs on every line)
        for pattern, finding in _HEADERS:
            m = pattern.match(line)
            if m:
                done = self._close()
                rec = m.groupdict().get("rec")
                self.cur = {"finding": finding, "seq": int(m.group("seq")), "header": line,
                            "record_id": int(rec) if rec is not None else None}
                self.origin = origin
                return True, done
        m = _ONE_LINE.match(line)
        if m:
            done = self._close()
            self.cur = {"finding": "not-joined", "seq": None, "header": line, "record_id": None}
            self.origin = origin
            self._field("group info", m.group("group"))
            self._field("collective", m.group("op"))
            self._field("missing ranks", m.group("missing"))
            return True, done
        m = _MISSED_DUMPS.search(line)
        if m:
            return True, self._note(origin, "missed-dumps", line, parse_ranks(m.group("ranks")))
        if line.startswith(_NO_ERRORS):
            return True, self._note(origin, "no-errors", line, None)
        m = _GAVE_UP.match(line)
        if m:  # closes the finding above; the group named by its description, as the analyzer prints it
            return True, self._close() + [ErrorEvent(kind=ErrorKind.FR_ANALYSIS, message=line[:500], origin=origin,
                                                     source="fr-report", comm=group_key(None, m.group("desc") or None),
                                                     data=FrFinding("gave-up", pg_desc=m.group("desc") or None))]
        if self.cur is None:
            return False, []
        m = _FIELD.match(line)
        if m:
            self._field(m.group("key"), m.group("value"))
            return True, []
        if self.in_stack and _FRAME.match(line):
            frames = self.cur.setdefault("frames", [])
            if len(frames) < MAX_FRAMES:
                frames.append(line)
            return True, []
        return False, self._close()

    def finish(self) -> list:
        return self._close()

    def _field(self, key: str, value: str) -> None:
        cur, value = self.cur, value.strip()
        self.in_stack = key in ("collective stack trace", "Collective stack traces")
        if key == "group info":
            cur["comm"], cur["pg_id"], cur["pg_desc"] = _group(value)
        elif key == "collective":
            cur["op_name"] = value
        elif key in ("missing ranks", "expected ranks"):
            ranks = parse_ranks(value)
            name = key.replace(" ", "_")
            if ranks is not None:
                cur[name] = ranks
            elif key == "expected ranks" and value.isdigit() and len(value) <= 9:  # older output: the count only
                cur["expected_count"] = int(value)
        elif key == "world size" and value.isdigit() and len(value) <= 9:
            cur["world_size"] = int(value)
        elif key == "internal record id" and value.isdigit() and len(value) <= 12:
            cur["record_id"] = int(value)
        elif key == "collective state":
            cur["state"] = value
        elif key == "error msg":
            cur["culprits"], cur["culprits_complete"] = parse_culprits(value)
            cur["error_msg"] = value[:500]
        elif key in ("input sizes", "output sizes", "total input numel", "total output numel"):
            cur[key.replace(" ", "_")] = value[:200]

    def _note(self, origin: Origin, finding: str, line: str, ranks: list[int] | None) -> list:
        """The analyzer's verdict on the finding above it (or a standalone line): attach it, else emit it."""
        if self.cur is not None and "verdict_line" not in self.cur:
            self.cur["verdict_line"] = finding
            if ranks is not None:
                self.cur["no_dump_ranks"] = ranks
            return self._close()
        done = self._close()
        return done + [ErrorEvent(kind=ErrorKind.FR_ANALYSIS, message=line[:500], origin=origin, source="fr-report",
                                  data=FrFinding(finding, no_dump_ranks=ranks))]

    def _close(self) -> list:
        cur, self.cur, self.in_stack = self.cur, None, False
        if cur is None:
            return []
        data = {k: v for k, v in cur.items() if k not in ("header", "comm", "op_name", "seq")}
        expected = cur.get("expected_ranks")
        if "expected_count" not in data and expected is not None:
            data["expected_count"] = len(expected)
        message = cur["header"]
        for key in ("pg_desc", "op_name", "missing_ranks", "state"):
            if cur.get(key) is not None:
                message += f"; {key.replace('_', ' ')}: {cur[key]}"
        base = self.origin or Origin()
        return [ErrorEvent(kind=ErrorKind.FR_ANALYSIS, message=message[:500], origin=base, comm=cur.get("comm"),
                           seq=cur.get("seq"), op=normalise_op(cur.get("op_name")), source="fr-report",
                           data=FrFinding.from_dict(data))]


def _is_header(line: str) -> bool:
    return any(p.match(line) for p, _ in _HEADERS) or bool(_ONE_LINE.match(line) or _MISSED_DUMPS.search(line))


def looks_like(text: str) -> bool:
    """The head of a file is mostly an analyzer report: a finding header, and at least half of its
    non-empty lines are the report's own (headers, fields, frames). A job log with a report pasted
    into it stays a rank log (its reader reads the report's lines too)."""
    lines = [ln.strip() for ln in text.splitlines()[:400] if ln.strip()]
    if not any(_is_header(ln) for ln in lines):
        return False
    own = sum(1 for ln in lines if _is_header(ln) or _FIELD.match(ln) or _FRAME.match(ln) or ln.startswith(_NO_ERRORS))
    return own * 2 >= len(lines)

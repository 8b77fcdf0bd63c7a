"""Horovod's own lines: the stall inspector's reports, its log header, its timeline errors.

Why: a Horovod job that hangs says who it waits for in its own words, once a minute, from the
coordinator (rank 0): the stall inspector lists, per tensor that some ranks submitted and others
did not, either the ranks still missing or the ranks ready. Those ranks are the whole answer
to "who is the others' culprit", and no NCCL or c10d line carries them. Every generation
prints them differently (seen in public threads, horovod/horovod#334 to #3950):

- 0.13-0.15: `WARNING: One or more tensors were submitted ...` then `Stalled ops:` and
  `<tensor> [ready ranks: 5, 1, 4, 7, 2, 3],` entries (one per line or all on one line, wrapped
  anywhere), later `<tensor> [missing ranks: 1]`;
- 0.16-0.17: each entry its own log record, `[<time>: W horovod/common/operations.cc:588] <tensor>
  [missing ranks: 1]`;
- 0.18+: `[<time>: W horovod/common/stall_inspector.cc:105] One or more tensors ...`, then
  `Stalled ranks:` (0.28: `Missing ranks:`) and one `<rank>: [<tensor>, <tensor> ...]` line per
  missing rank.

A `<rank>: [` listing line looks like a Slurm `--label` prefix to the prefix stripper; the rank
log reader asks this block (`listed_rank`) before it counts the line as that rank's.
Each entry becomes an ErrorEvent `horovod-stall` with the ranks it names (`data`: tensor,
missing or ready, report); judges.logs.horovod decides what they add up to.
"""

from __future__ import annotations

import re

from parsers.model.events import ErrorEvent, ErrorKind, HorovodLine, HorovodStall, Origin, TimelinePath, normalise_op

#: Horovod's log header: `[2019-04-13 13:53:31.851506: W horovod/common/operations.cc:588] msg`, the same
#: without the time (`horovod W horovod/common/stall_inspector.cc:105] msg`); the path is the build's
_HEADER = re.compile(r"^(?:\[(?P<ts>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d{1,9})?): |horovod )?(?P<lvl>[TDIWEF]) "
                     r"(?P<file>[^\s\]:]{1,400}):(?P<ln>\d{1,6})\] ?(?P<msg>.*)$")
STALL_WORDS = "One or more tensors were submitted to be reduced, gathered or broadcasted by subset of ranks"
#: the warning's second sentence, quoted alone in some posts
_STALL_TAIL = "This may indicate that different ranks are trying to submit different tensors"
#: an entry is `<tensor> [missing ranks: ...]`: found by its bracket, its tensor name read backwards from there
#: (a regex that starts at every character of a long line would not be linear)
_LIST_OPEN = re.compile(r" \[(?P<kind>missing|ready) ranks:")
_LIST_BODY = re.compile(r"(?P<ranks>[\d,\s]{0,20000})(?P<close>\]?)")
_TENSOR_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_./:-")
MAX_TENSOR = 512
_LISTING_HEAD = re.compile(r"^(?:Stalled|Missing) ranks:\s*$")
_STALLED_OPS = re.compile(r"Stalled ops:\s*")
_TIMELINE = re.compile(r"Error opening the Horovod Timeline file (?P<path>\S{1,4096}), will not write a timeline")
#: tensor-name prefixes -> the collective (`HorovodBroadcast_...`, `allreduce.layer1...`, `broadcast.assign_...`)
_TENSOR_OP = re.compile(r"(?:^|/)(?:Horovod(?P<cls>Allreduce|Allgather|Broadcast|Alltoall|Reducescatter)_|"
                        r"(?P<low>allreduce|allgather|broadcast|alltoall|reducescatter)\.)")
#: a rank number above this is no rank of a job (a hostile or garbled line)
MAX_RANK = 1_000_000
MAX_LISTED = 100_000  #: ranks one entry may name
MAX_LINE = 1 << 20  #: characters of one line searched for entries (a report of 100k-rank lists stays well under)
_INFO_LEVELS = frozenset("TDI")


def op_of(tensor: str) -> str | None:
    """'HorovodBroadcast_dense_bias_0' / 'allreduce.conv1.weight' -> 'broadcast' / 'allreduce'; else None."""
    m = _TENSOR_OP.search(tensor)
    return normalise_op(m.group("cls") or m.group("low")) if m else None


def _ranks(text: str) -> list[int]:
    out = []
    for tok in text.replace(",", " ").split()[:MAX_LISTED]:
        if tok.isdigit() and len(tok) <= 7 and int(tok) <= MAX_RANK:
            out.append(int(tok))
    return out


class StallBlock:
    """Reads the stall inspector's reports line by line (see the module docstring for the layouts).

    `report` counts the reports seen (a warning line starts one), so a judge can tell one minute's
    report from the next. `feed` returns whether the line was Horovod's and the events it yields.
    """

    def __init__(self) -> None:
        self.report = 0
        self.listing = False  #: inside a `Stalled ranks:` / `Missing ranks:` block
        self.pending = ""  #: an entry wrapped inside its rank list, waiting for the rest
        self.warned = False
        self.entries = 0  #: entries read so far: each `<tensor> [.. ranks: ..]` is one, even two on a line

    def listed_rank(self, text: str, label: int | None) -> int | None:
        """The `<rank>: ` of a listing line that the prefix stripper took for a Slurm label, else None."""
        if self.listing and label is not None and text.startswith("["):
            return label
        return None

    def feed(self, text: str, origin: Origin, listed: int | None = None) -> tuple[bool, list]:
        line = text.strip().strip("*")
        if self.pending:
            line, self.pending = self.pending + line, ""
        if listed is not None:
            return True, [self._listed(listed, line, origin)]
        self.listing = False
        if not line:
            return False, []
        m = _HEADER.match(line)
        msg = m.group("msg") if m and "horovod" in m.group("file") else line
        if STALL_WORDS in msg or _STALL_TAIL in msg:
            self.report += 1
            self.warned = True
            events = [ErrorEvent(ErrorKind.HOROVOD_STALL_WARNING, msg[:500], origin, source="horovod",
                                 timestamp=m.group("ts") if m else None, data=HorovodStall(report=self.report))]
            rest = msg.split("Stalled ops:", 1)[1] if "Stalled ops:" in msg else ""
            return True, events + self._entries(rest, origin)
        if _LISTING_HEAD.match(msg):
            self.listing = True
            return True, []
        t = _TIMELINE.search(msg) if "Horovod Timeline" in msg else None
        if t:
            path = t.group("path")
            return True, [ErrorEvent(ErrorKind.HOROVOD_TIMELINE_ERROR, msg[:500], origin, source="horovod",
                                     data=TimelinePath(path, path.endswith("/")))]
        if " ranks:" in msg or msg.startswith("Stalled ops:"):  # no regex over the common line
            entries = self._entries(_STALLED_OPS.sub("", msg, count=1), origin)
            if entries or _STALLED_OPS.match(msg) or self.pending:
                return True, entries
        if m and "horovod" in m.group("file"):
            kind = ErrorKind.HOROVOD_LOG if m.group("lvl") in _INFO_LEVELS else ErrorKind.HOROVOD_ERROR
            return True, [ErrorEvent(kind, msg[:500], origin, source="horovod", timestamp=m.group("ts"),
                                     data=HorovodLine(m.group("lvl"), f"{m.group('file')}:{m.group('ln')}"))]
        return False, []

    def _entries(self, text: str, origin: Origin) -> list:
        out = []
        if " ranks:" not in text:
            return out
        text = text[:MAX_LINE]
        for m in _LIST_OPEN.finditer(text):
            start = m.start()
            while start > 0 and m.start() - start < MAX_TENSOR and text[start - 1] in _TENSOR_CHARS:
                start -= 1
            tensor = text[start:m.start()]
            body = _LIST_BODY.match(text, m.end())
            if not tensor:
                continue
            if not body.group("close"):  # the post wrapped the entry inside its rank list: read it with the next line
                if body.end() == len(text.rstrip()) or body.end() == len(text):
                    self.pending = text[start:]
                continue
            kind = m.group("kind")
            self.entries += 1
            out.append(ErrorEvent(ErrorKind.HOROVOD_STALL, text[start:body.end()][:500], origin, op=op_of(tensor),
                                  source="horovod", data=HorovodStall(tensor, **{kind: _ranks(body.group("ranks"))},
                                                                      report=self.report, entry=self.entries)))
        return out

    def _listed(self, rank: int, line: str, origin: Origin) -> ErrorEvent:
        """`[t1, t2, ...]` of a `<rank>: [...]` listing line: the tensors that rank has not submitted."""
        body = line[1:].split("]", 1)[0]
        tensors = [t.strip() for t in body.split(",") if t.strip() and t.strip() != "..."][:1000]
        tensors = [t[:-3].strip() if t.endswith("...") else t for t in tensors]
        first = tensors[0] if tensors else None
        return ErrorEvent(ErrorKind.HOROVOD_STALL, line[:500], origin, op=op_of(first) if first else None,
                          source="horovod",
                          data=HorovodStall(first, tensors, missing=[rank], report=self.report))

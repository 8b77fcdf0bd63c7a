"""NCCL RAS reports (STATUS / VERBOSE STATUS, text or `SET FORMAT json`).

Why: RAS is the live, job-wide view: it compares every rank's per-communicator
operation counts and lists the ranks that lag ("Rank 5 has launched up to operation
10 -- GPU 0 managed by process 436 on node 127.0.0.1") or did not answer
(INCOMPLETE, DEAD). Its ranks are communicator ranks and its comm hash is not the
commId of the NCCL log, so findings carry the pid and node: the correlation maps
them to global ranks through the processes other artifacts name.

Text format facts (NCCL 2.24-2.28 client output): per-communicator blocks start
`#<group>-<index> (<16 hex>) INCOMPLETE|MISMATCH|ERROR`; JSON has per communicator
`hash`, `size`, `ranks` [{rank, host, pid, status, collective_counts{AllReduce: n}}]
and `missing_ranks` [{rank, host, pid, status{unresponsive, considered_dead}}].
"""

from __future__ import annotations

import json
import re
from typing import Any, Iterable

from parsers.input import bounded_json
from parsers.model.events import Parsed, RasFinding, normalise_op

_COMM = re.compile(r"^#(?P<g>\d+)-(?P<i>\d+) \((?P<hash>[0-9a-f]+)\) (?P<what>INCOMPLETE|MISMATCH|ERROR)")
_RANK = re.compile(
    r"^\s*Rank (?P<r>\d+)(?: has (?:launched up to operation (?P<oc>\d+)|(?P<none>not launched any operations)"
    r"|status (?P<status>\w+)))? -- (?:GPU [^m]*managed by process (?P<pid>\d+) on node (?P<node>\S+)"
    r"|\[process information not found\])"
)
_GROUP = re.compile(r"^\s*(?P<n>\d+) ranks (?:have launched up to operation (?P<oc>\d+)|(?P<none>have "
                    r"not launched any))")
_DIFF = re.compile(r"^\s*Communicator ranks have different (?P<op>\w+) operation counts")
_PROC = re.compile(r"^\s*Process (?P<pid>\d+) on node (?P<node>\S+) managing GPU")
_TOP = re.compile(r"^(?P<what>INCOMPLETE|DEAD|TIMEOUT)\s*$")


def looks_like_text(text: str) -> bool:
    return ("SERVER PROTOCOL" in text or "Communicators" in text or "Errors\n======" in text
            or _COMM.search(text) is not None and "managed by process" in text)


def looks_like_json(obj: Any) -> bool:
    return isinstance(obj, dict) and _comm_list(obj) is not None


#: most 'other' lines a text report hands back to its caller (a report pasted above a long log)
MAX_OTHER_LINES = 200_000
MAX_RAS_OPS = 64  #: distinct operation names read per communicator of a RAS JSON report


def parse_text(lines: Iterable[str], others: dict[int, str] | None = None) -> Parsed:
    """Findings from a text report. Lines that are not findings (tables, headers) are 'other';
    with `others`, each such line is kept there by its number, so the caller can hand the lines
    a report does not explain (a job's log pasted under it) to the reader that does.

    A communicator block's rank lines are judged when the block ends: a rank is
    'behind' when some rank or group of the block launched more operations. Why not
    line by line: small communicators list every rank on its own line, the leader
    included (seen, NCCL 2.28.9, 2-rank groups: 'Rank 0 has launched up to operation 2',
    'Rank 1 ... operation 1'), and only the whole block says which one lags.
    """
    out = Parsed(kind="ras-text")
    block: _Block | None = None
    top = None
    other = 0
    for raw in lines:
        out.lines += 1
        line = raw.rstrip("\n")
        m = _COMM.match(line)
        if m:
            _flush(out, block)
            block, top = _Block(f"ras:0x{m.group('hash')}", m.group("what")), None
            continue
        m = _TOP.match(line)
        if m:
            _flush(out, block)
            block, top = None, m.group("what")
            continue
        m = _DIFF.match(line)
        if m and block:
            _flush(out, block)
            block = _Block(block.comm, block.section, normalise_op(m.group("op")))
            continue
        m = _GROUP.match(line)
        if m and block:
            block.counts.append(int(m.group("oc")) if m.group("oc") else 0)
            block.sizes.append(int(m.group("n")))
            continue
        m = _RANK.match(line)
        if m and block:
            block.ranks.append((m, line.strip()))
            continue
        m = _PROC.match(line)
        if m and top in ("INCOMPLETE", "DEAD"):
            out.events.append(RasFinding(comm="ras:job", kind="dead" if top == "DEAD" else "missing", comm_rank=None,
                                         pid=int(m.group("pid")), host=m.group("node"), text=line.strip()))
            continue
        if line.startswith("SERVER PROTOCOL"):
            out.facts["protocol"] = line.split()[-1]
        elif line.strip():
            other += 1
            if others is not None and len(others) < MAX_OTHER_LINES:
                others[out.lines] = raw
    _flush(out, block)
    out.facts["other_lines"] = other
    return out


class _Block:
    """One communicator block of a text report (or one operation's part of it), until it ends."""

    def __init__(self, comm: str, section: str, op: str | None = None) -> None:
        self.comm, self.section, self.op = comm, section, op
        self.counts: list[int] = []  #: 'N ranks have launched up to operation X' values
        self.sizes: list[int] = []  #: their N, in the same order
        self.ranks: list[tuple[re.Match, str]] = []

    def listed_count(self) -> int | None:
        """The operation count of the ranks listed without one ('Rank 12 -- GPU 4 managed by ...').

        Why by size: the report lists the ranks of one group only, and says how many each group
        holds (seen, NCCL 2.26.2, NVIDIA/nccl#1911: '30 ranks have launched up to operation 640',
        '2 ranks have launched up to operation 641', then two rank lines, which the reporter
        confirms are the two at 641). The group whose size is the number of such lines is theirs;
        when none or several fit, their count is not known (None), not guessed.
        """
        plain = sum(1 for m, _ in self.ranks if m.group("oc") is None and not m.group("none") and not m.group("status"))
        fits = [c for c, n in zip(self.counts, self.sizes) if n == plain]
        return fits[0] if len(fits) == 1 else None


def _flush(out: Parsed, block: _Block | None) -> None:
    if block is None:
        return
    counts = block.counts + [int(m.group("oc") or 0) for m, _ in block.ranks
                             if m.group("oc") is not None or m.group("none")]
    top = max(counts) if counts else None
    listed = block.listed_count()  # once per block: per rank line it made the reader quadratic
    for m, text in block.ranks:
        out.events.append(_rank_finding(m, block, top, text, listed))


def _rank_finding(m: re.Match, block: _Block, top: int | None, text: str, listed: int | None) -> RasFinding:
    pid = int(m.group("pid")) if m.group("pid") else None
    node = m.group("node")
    r = int(m.group("r"))
    comm, op = block.comm, block.op
    if block.section == "INCOMPLETE":
        return RasFinding(comm, "missing", r, pid, node, text=text)
    if m.group("oc") is not None or m.group("none"):
        value = int(m.group("oc") or 0)
        kind = "behind" if top is not None and value < top else "ahead"
        return RasFinding(comm, kind, r, pid, node, op_count=value, op=op, text=text)
    if m.group("status"):
        return RasFinding(comm, "status", r, pid, node, text=text)
    if block.section == "ERROR":  # a rank that reported an asynchronous error: a victim's view, not a lag
        return RasFinding(comm, "error", r, pid, node, text=text)
    # a plain member line under count groups: it sits at its group's count, which says whether it lags
    value = listed
    if value is not None and top is not None and len(set(block.counts)) > 1:
        return RasFinding(comm, "behind" if value < top else "ahead", r, pid, node, op_count=value, op=op, text=text)
    return RasFinding(comm, "member", r, pid, node, op_count=value, op=op, text=text)


def _comm_list(obj: dict) -> list | None:
    for value in obj.values():
        if isinstance(value, list) and value and isinstance(value[0], dict) and "ranks" in value[0]:
            return value
    return None


def parse_json(obj: Any) -> Parsed:
    """Findings from `SET FORMAT json` output: ranks behind the majority per op, missing/dead ranks."""
    out = Parsed(kind="ras-json")
    comms = _comm_list(obj) if isinstance(obj, dict) else None
    if comms is None:
        out.problems.append("no communicator list in RAS JSON")
        return out
    for c in comms:
        if not isinstance(c, dict):
            continue
        comm = f"ras:{c.get('hash', '?')}"
        ranks = [r for r in _list(c.get("ranks")) if isinstance(r, dict)]
        out.lines += len(ranks)
        per_rank = [_counts(r.get("collective_counts")) for r in ranks]
        ops = sorted({k for counts in per_rank for k in counts})
        if len(ops) > MAX_RAS_OPS:  # NCCL has about ten collective names: more is not a report of it
            out.problems.append(f"{comm}: {len(ops)} operation names, only the first {MAX_RAS_OPS} read")
            ops = ops[:MAX_RAS_OPS]
        for r, counts in zip(ranks, per_rank):  # each rank's total: two reads of a running job differ
            total = sum(counts.get(op, 0) for op in ops)
            out.events.append(RasFinding(comm, "count", _i(r.get("rank")), _i(r.get("pid")), r.get("host"),
                                         op_count=total, text=f"{total} collectives"))
        for op in ops:
            # Behind = below the highest count: the leaders wait on it. Not the most common count:
            # 2-rank groups tie (seen, NCCL 2.28.9: counts 2 and 1), and so can 4 ranks against 4.
            values = [counts.get(op, 0) for counts in per_rank]
            top = max(values) if values else 0
            n_top = values.count(top)
            for r, n in zip(ranks, values):
                if n < top:
                    out.events.append(RasFinding(comm, "behind", _i(r.get("rank")), _i(r.get("pid")), r.get("host"),
                                                 op_count=n, op=normalise_op(op),
                                                 text=f"{op} count {n}, {n_top} rank(s) at {top}"))
        for r in _list(c.get("missing_ranks")):
            if not isinstance(r, dict):
                continue
            st = r.get("status") if isinstance(r.get("status"), dict) else {}
            kind = "dead" if st.get("considered_dead") else "missing"
            out.events.append(RasFinding(comm, kind, _i(r.get("rank")), _i(r.get("pid")), r.get("host"),
                                         text=f"missing rank {r.get('rank')} "
                                              f"({'dead' if kind == 'dead' else 'no answer'})"))
    return out


def _i(v: Any) -> int | None:
    """A non-negative integer of the JSON, or None (a float infinity, a string, {} are no count)."""
    try:
        return int(v) if v is not None and not isinstance(v, bool) and int(v) >= 0 else None
    except (TypeError, ValueError, OverflowError):
        return None


def _list(v: Any) -> list:
    return v if isinstance(v, list) else []


def _counts(v: Any) -> dict[str, int]:
    """A rank's `collective_counts`, each a count or 0: a value given as {} or a string counts nothing."""
    if not isinstance(v, dict):
        return {}
    return {str(k): _i(n) or 0 for k, n in v.items()}


#: a value ending one line and a key or object starting the next, with no comma between
_MISSING_COMMA = re.compile(r'(?<=[0-9"el}\]])([ \t]*\r?\n\s*)(?=["{])')


def repair_json(text: str) -> str:
    """Insert the commas NCCL 2.28.9 leaves out of its RAS JSON.

    Seen: every `missing_ranks` entry prints `"nvml_dev": 0` with no comma before
    `"status": {...}`, so the report of a job with a missing rank (the very case it
    is wanted for) is not valid JSON. Only line breaks between a complete value and
    a following key or object get a comma; valid JSON is returned unchanged.
    """
    return _MISSING_COMMA.sub(r",\1", text)


def parse_json_text(text: str) -> Parsed:
    """RAS JSON may follow the protocol greeting: start at the first '{'. Known NCCL slips are repaired."""
    start = text.find("{")
    if start < 0:
        out = Parsed(kind="ras-json")
        out.problems.append("no JSON object in the RAS answer")
        return out
    body = text[start:]
    try:
        obj = bounded_json.loads(body)
        repaired = False
    except json.JSONDecodeError as err:
        try:
            obj = bounded_json.loads(repair_json(body))
            repaired = True
        except json.JSONDecodeError:
            out = Parsed(kind="ras-json")
            out.problems.append(f"bad RAS JSON: {err}")
            return out
    out = parse_json(obj)
    if repaired:
        out.facts["repaired"] = "added commas NCCL left out (NCCL 2.28.9 missing_ranks entries)"
    return out

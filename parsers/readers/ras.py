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
from collections import Counter
from typing import Any, Iterable

from parsers.events import Parsed, RasFinding, normalise_op

_COMM = re.compile(r"^#(?P<g>\d+)-(?P<i>\d+) \((?P<hash>[0-9a-f]+)\) (?P<what>INCOMPLETE|MISMATCH|ERROR)")
_RANK = re.compile(
    r"^\s*Rank (?P<r>\d+)(?: has (?:launched up to operation (?P<oc>\d+)|(?P<none>not launched any operations)"
    r"|status (?P<status>\w+)))? -- (?:GPU [^m]*managed by process (?P<pid>\d+) on node (?P<node>\S+)"
    r"|\[process information not found\])"
)
_GROUP = re.compile(r"^\s*(?P<n>\d+) ranks (?:have launched up to operation (?P<oc>\d+)|(?P<none>have not launched any))")
_DIFF = re.compile(r"^\s*Communicator ranks have different (?P<op>\w+) operation counts")
_PROC = re.compile(r"^\s*Process (?P<pid>\d+) on node (?P<node>\S+) managing GPU")
_TOP = re.compile(r"^(?P<what>INCOMPLETE|DEAD|TIMEOUT)\s*$")


def looks_like_text(text: str) -> bool:
    return ("SERVER PROTOCOL" in text or "Communicators" in text or "Errors\n======" in text
            or _COMM.search(text) is not None and "managed by process" in text)


def looks_like_json(obj: Any) -> bool:
    return isinstance(obj, dict) and _comm_list(obj) is not None


def parse_text(lines: Iterable[str]) -> Parsed:
    """Findings from a text report. Lines that are not findings (tables, headers) are 'other'."""
    out = Parsed(kind="ras-text")
    comm = None
    section = None
    op = None
    majority: int | None = None
    top = None
    other = 0
    for raw in lines:
        out.lines += 1
        line = raw.rstrip("\n")
        m = _COMM.match(line)
        if m:
            comm, section, op, majority, top = f"ras:0x{m.group('hash')}", m.group("what"), None, None, None
            continue
        m = _TOP.match(line)
        if m:
            top, comm = m.group("what"), None
            continue
        m = _DIFF.match(line)
        if m and comm:
            op, majority = normalise_op(m.group("op")), None
            continue
        m = _GROUP.match(line)
        if m and comm:
            value = int(m.group("oc")) if m.group("oc") else 0
            if majority is None:
                majority = value
            continue
        m = _RANK.match(line)
        if m and comm:
            out.events.append(_rank_finding(m, comm, section, op, majority, line.strip()))
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
    out.facts["other_lines"] = other
    return out


def _rank_finding(m: re.Match, comm: str, section: str | None, op: str | None, majority: int | None,
                  text: str) -> RasFinding:
    pid = int(m.group("pid")) if m.group("pid") else None
    node = m.group("node")
    r = int(m.group("r"))
    if section == "INCOMPLETE":
        return RasFinding(comm, "missing", r, pid, node, text=text)
    if m.group("oc") is not None or m.group("none"):
        value = int(m.group("oc") or 0)
        kind = "behind" if majority is None or value < majority else "ahead"
        return RasFinding(comm, kind, r, pid, node, op_count=value, op=op, text=text)
    if m.group("status"):
        return RasFinding(comm, "status", r, pid, node, text=text)
    # a plain member line under a count group: the rank sits at that group's count
    return RasFinding(comm, "member", r, pid, node, op_count=majority, op=op, text=text)


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
        ranks = [r for r in c.get("ranks") or [] if isinstance(r, dict)]
        out.lines += len(ranks)
        ops = sorted({k for r in ranks for k in (r.get("collective_counts") or {})})
        for op in ops:
            counts = [int((r.get("collective_counts") or {}).get(op, 0)) for r in ranks]
            common = Counter(counts).most_common(1)[0][0] if counts else 0
            for r, n in zip(ranks, counts):
                if n != common:
                    out.events.append(RasFinding(comm, "behind" if n < common else "ahead", _i(r.get("rank")),
                                                 _i(r.get("pid")), r.get("host"), op_count=n, op=normalise_op(op),
                                                 text=f"{op} count {n}, most ranks {common}"))
        for r in c.get("missing_ranks") or []:
            if not isinstance(r, dict):
                continue
            st = r.get("status") or {}
            kind = "dead" if st.get("considered_dead") else "missing"
            out.events.append(RasFinding(comm, kind, _i(r.get("rank")), _i(r.get("pid")), r.get("host"),
                                         text=f"missing rank {r.get('rank')} ({'dead' if kind == 'dead' else 'no answer'})"))
    return out


def _i(v: Any) -> int | None:
    try:
        return int(v) if v is not None and int(v) >= 0 else None
    except (TypeError, ValueError):
        return None


def parse_json_text(text: str) -> Parsed:
    """RAS JSON may follow the protocol greeting: start at the first '{'."""
    start = text.find("{")
    try:
        obj = json.loads(text[start:]) if start >= 0 else None
    except json.JSONDecodeError as err:
        out = Parsed(kind="ras-json")
        out.problems.append(f"bad RAS JSON: {err}")
        return out
    return parse_json(obj)

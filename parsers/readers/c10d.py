"""PyTorch c10d messages in rank stdout/stderr: watchdog, PG status, dump signals.

Why: the waiting ranks' watchdog lines say which collective (SeqNum, OpType) of which
process group timed out and how far each rank got (last enqueued / completed); the
culprit, asked to dump, often prints only its own smaller counters. Forms by era
(field notes): `[E ProcessGroupNCCL.cpp:737] [Rank r]` (before 2.0), NumelIn/NumelOut
(2.1), `[rankN]:[E ...]` (2.3), timestamped with 9-digit fractions (later). PG tags:
`[PG 1 Rank 0]`, `[PG 0 (default_pg) Rank 7]`, `[PG ID 11 PG GUID 119 Rank 1]`,
`[PG ID 4 PG GUID 20(mesh_tp) Rank 1]`. `[rankN]` is the global rank; `Rank r` is the
rank inside the group. Gloo errors are matched in parsers.readers.gloo.
"""

from __future__ import annotations

import re

from parsers.model.events import ErrorEvent, Origin, Progress, normalise_op

_GLOG = re.compile(r"^\[(?P<lvl>[EWIF])(?P<md>\d{3,4})? ?(?P<time>\d\d:\d\d:\d\d\.\d+)? ?(?P<src>[\w.]+:\d+)\] ")
_PG = re.compile(
    r"\[(?:PG (?:ID )?(?P<pg>\d+)(?: PG GUID (?P<guid>[\w:]+))?\s*(?:\((?P<name>[^)]*)\))?\s+)?Rank (?P<r>\d+)\]"
)
_WATCHDOG = re.compile(
    r"Watchdog caught collective operation timeout: Work\w*\((?:SeqNum=(?P<seq>\d+), )?OpType=(?P<op>\w+)"
    r"(?:, NumelIn=(?P<nin>\d+), NumelOut=(?P<nout>\d+))?.*?Timeout\(ms\)=(?P<tmo>\d+)\)"
    r"(?: ran for (?P<ran>\d+) milliseconds)?"
)
_FAILURE = re.compile(
    r"failure detected by watchdog at work sequence id: (?P<seq>\d+) PG status: last enqueued work: (?P<enq>-?\d+),"
    r" last completed work: (?P<done>-?\d+)"
)
_LAST = re.compile(r"Last enqueued NCCL work: (?P<enq>-?\d+), last completed NCCL work: (?P<done>-?\d+)")
_HEARTBEAT = re.compile(r"[Hh]eartbeat monitor timed out|monitoring thread.*(?:timed out|stuck)|watchdog got stuck")
_DUMP_SIGNAL = re.compile(
    r"Received a (?:dump signal|global timeout)|dump signal|Dumping (?:nccl|fr) trace|Flight Recorder|dump debug info"
)
_TIMEOUT_EXC = re.compile(r"(?:DistBackendError|RuntimeError).*?(?:Timeout|timed out|timeout)", re.I)


def _pg_key(m: re.Match | None) -> tuple[str | None, int | None, str | None]:
    """(comm key, rank in group, group name) from a PG tag; the key matches FR's pg names."""
    if m is None:
        return None, None, None
    pg = m.group("guid") or m.group("pg")
    name = m.group("name")
    if pg == "0" or name == "default_pg":
        return "pg:0", int(m.group("r")), name
    if name and name != "undefined":
        return f"pg:{name}", int(m.group("r")), name  # same key as FR's group description
    return (f"pg:{pg}" if pg is not None else None), int(m.group("r")), name


def match_line(text: str, origin: Origin) -> list:
    """Events in one prefix-stripped line; [] when it is no c10d message this reader knows."""
    if "ProcessGroup" not in text and "Rank " not in text and "NCCL work" not in text and "eartbeat" not in text:
        return []
    glog = _GLOG.match(text)
    ts = None
    if glog and glog.group("time"):
        ts = f"{glog.group('md') or ''} {glog.group('time')}".strip()
    pgm = _PG.search(text)
    comm, comm_rank, _ = _pg_key(pgm)
    events: list = []
    m = _WATCHDOG.search(text)
    if m:
        seq = int(m.group("seq")) if m.group("seq") else None  # before torch 1.13 there was no SeqNum
        events.append(ErrorEvent(kind="watchdog-timeout", message=text.strip(), origin=origin, comm=comm or "pg:0",
                                 seq=seq, op=normalise_op(m.group("op")), timestamp=ts, source="c10d"))
        if seq is not None:
            events.append(Progress(comm=comm or "pg:0", origin=origin, last_enqueued=seq, last_completed=seq - 1,
                                   comm_rank=comm_rank, source="c10d"))
        return events
    m = _FAILURE.search(text)
    if m:
        events.append(ErrorEvent(kind="failure-detected", message=text.strip(), origin=origin, comm=comm or "pg:0",
                                 seq=int(m.group("seq")), timestamp=ts, source="c10d"))
        events.append(Progress(comm=comm or "pg:0", origin=origin, last_enqueued=int(m.group("enq")),
                               last_completed=int(m.group("done")), comm_rank=comm_rank, source="c10d"))
        return events
    m = _LAST.search(text)
    if m:
        events.append(Progress(comm=comm or "pg:0", origin=origin, last_enqueued=int(m.group("enq")),
                               last_completed=int(m.group("done")), comm_rank=comm_rank, source="c10d"))
        if _DUMP_SIGNAL.search(text):
            events.append(ErrorEvent(kind="dump-signal", message=text.strip(), origin=origin, comm=comm,
                                     timestamp=ts, source="c10d"))
        return events
    if _HEARTBEAT.search(text):
        return [ErrorEvent(kind="heartbeat", message=text.strip(), origin=origin, comm=comm, timestamp=ts,
                           source="c10d")]
    if glog and glog.group("lvl") in "EF" and _DUMP_SIGNAL.search(text):
        return [ErrorEvent(kind="dump-signal", message=text.strip(), origin=origin, comm=comm, timestamp=ts,
                           source="c10d")]
    if glog and glog.group("lvl") in "EF" and "ProcessGroup" in (glog.group("src") or ""):
        return [ErrorEvent(kind="c10d-error", message=text.strip(), origin=origin, comm=comm, timestamp=ts,
                           source="c10d")]
    return []

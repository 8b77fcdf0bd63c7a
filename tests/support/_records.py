"""Turn reader output into the corpus' reader-independent records, and match them.

Why here and not in the readers: the .json files describe what an excerpt visibly
contains (tests/fixtures/realworld/README.md); this mapping is the only place that
knows how today's event model spells each of those things.
"""

from __future__ import annotations

from parsers.model.events import CommMember, ErrorEvent, OpEvent, Progress, RasFinding, TopoEdge

#: ErrorEvent kinds that are NCCL WARN lines whatever their finer class
_NCCL_WARN_KINDS = {"ib-completion", "connection-closed", "nccl-timeout", "nccl-warn", "size-mismatch"}
#: a teardown warning is a `[W ...]` line: the record says c10d-warning, this project reads it as information
_ERROR_KIND = {"ib-completion": "ib-error", "dump-signal": "dump", "desync-lagging": "desync-report",
               "c10d-teardown": "c10d-warning"}


def _origin(ev) -> dict:
    o = getattr(ev, "origin", None)
    if o is None:
        return {}
    return {"rank": o.rank, "host": o.host, "pid": o.pid, "device": getattr(o, "device", None)}


def records_of(parsed_list: list) -> list[dict]:
    """Every record the parsed output yields (one event may yield several, e.g. nccl-warn + ib-error)."""
    out: list[dict] = []
    for parsed in parsed_list:
        for ev in parsed.events:
            out.extend(_event_records(ev))
        for st in parsed.stacks:  # a pasted stack dump (py-spy, faulthandler): one record per thread; a dump
            # inside a log names its process on its own Process line (origin.pid)
            pid = st.origin.pid if st.origin is not None and st.origin.pid is not None else parsed.facts.get("pid")
            out.append({"kind": "stack", "pid": pid, "thread": st.thread_id, "main": st.is_main,
                        "frames": len(st.frames), "innermost": st.frames[0].function if st.frames else None,
                        "native_frames": sum(f.native for f in st.frames)})
        version = parsed.facts.get("nccl_version")
        if version:
            out.append({"kind": "nccl-version", "version": version})
    return out


def _event_records(ev) -> list[dict]:
    base = _origin(ev)
    if isinstance(ev, ErrorEvent):
        data = ev.data.to_dict() if hasattr(ev.data, "to_dict") else dict(ev.data or {})  # typed data (FrFinding)
        rec = {**base, **data, "kind": _ERROR_KIND.get(ev.kind, ev.kind), "op": ev.op, "seq": ev.seq,
               "peer": ev.peer_addr, "text": ev.message, "pg": _pg(ev.comm)}
        if ev.kind == "rank-identity":  # the rank a process says it is, not the line's origin
            rec.update(rank=data.get("rank"))
        if ev.kind == "collective-mismatch":  # both sides of ProcessGroupWrapper's check, flat
            sides = data.get("sides") or []
            rec.update(ranks=[x["rank"] for x in sides], ops=[x["op"] for x in sides], seqs=[x["seq"] for x in sides])
        recs = [rec]
        if ev.source == "nccl-log" and ev.kind in _NCCL_WARN_KINDS:
            recs.append({**rec, "kind": "nccl-warn"})
        return recs
    if isinstance(ev, Progress):
        return [{**base, "kind": "progress", "last_enqueued": ev.last_enqueued, "last_completed": ev.last_completed,
                 "group_rank": ev.comm_rank, "pg": _pg(ev.comm)}]
    if isinstance(ev, OpEvent):
        if ev.seq_kind == "call":  # NCCL's API trace: the n-th traced call on that comm, no opCount
            return [{**base, "kind": "nccl-call", "op": ev.op, "count": ev.count, "call": ev.seq,
                     "comm_rank": ev.comm_rank}]
        kind = "nccl-op" if ev.seq_kind == "opCount" else "op"
        return [{**base, "kind": kind, "op": ev.op, "op_count": ev.seq, "seq": ev.seq, "comm_rank": ev.comm_rank}]
    if isinstance(ev, CommMember):
        return [{**base, "kind": "nccl-init", "rank": ev.comm_rank, "nranks": ev.nranks,
                 "global_rank": base.get("rank")}]
    if isinstance(ev, RasFinding):  # its rank is the communicator's, its host the node RAS names
        return [{"kind": "ras-finding", "finding": ev.kind, "comm_rank": ev.comm_rank, "pid": ev.pid, "host": ev.host,
                 "op": ev.op, "op_count": ev.op_count, "pg": ev.comm}]
    if isinstance(ev, TopoEdge):
        return [{**base, "kind": "nccl-topo", "src": ev.src, "dst": ev.dst}]
    return []


def _pg(comm: str | None) -> str | None:
    return comm.split(":", 1)[1] if comm and comm.startswith("pg:") else comm


def matches(expected: dict, got: dict) -> bool:
    """Every field of `expected` holds in `got`; 'text' is a substring test."""
    for key, want in expected.items():
        have = got.get(key)
        if key == "text":
            if not isinstance(have, str) or want not in have:
                return False
        elif have != want:
            return False
    return True


def missing(expected: list[dict], got: list[dict]) -> list[dict]:
    """The expected records no yielded record matches."""
    return [e for e in expected if not any(matches(e, g) for g in got)]

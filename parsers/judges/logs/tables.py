"""Per-communicator progress, the missing-line table, and mismatch detection.

Why: "find the host that did not print the line every other host printed" is the
core of hang hunting. Per communicator we keep each rank's furthest operation
(from NCCL op lines, FR entries and counters, c10d watchdog lines), list which
ranks logged the last positions and which did not, and compare what each rank
called at the same position (type, size, dtype) to catch mismatched collectives.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import cast

from parsers.model.majority import odd_sides
from parsers.model.ranges import listable
from parsers.gather.evidence import Evidence
from parsers.judges.logs.identity import Identities
from parsers.model.events import ErrorEvent, ErrorKind, Fingerprint, normalise_op, OpEvent, Progress

P2P_OPS = {"send", "recv", "sendrecv"}


@dataclass
class RankProgress:
    """How far one rank got in one communicator. None = not known from this evidence.

    `completed` comes from counters (FR pg_status, c10d 'last completed work') when
    any source has them, else from per-entry states. Why counters win: a real NCCL
    dump (torch 2.11, a peer killed) held entry 1035 in state 'completed' while
    1033-1034 were 'scheduled' and pg_status said last completed 12; entry states
    are not in order, the counter is.
    """

    enqueued: int | None = None
    completed: int | None = None
    sources: set[str] = field(default_factory=set)
    counted: bool = False  #: `completed` is a counter's value

    def merge(self, enq: int | None, done: int | None, source: str, counter: bool = True) -> None:
        if enq is not None and (self.enqueued is None or enq > self.enqueued):
            self.enqueued = enq
        self.sources.add(source)
        if done is None or (self.counted and not counter):
            return
        if counter and not self.counted:
            self.completed, self.counted = done, True  # a counter replaces entry-state guesses
            return
        if done >= 0 and (self.completed is None or done > self.completed):
            self.completed = done
        elif self.completed is None:
            self.completed = done


@dataclass
class Tables:
    """Progress per comm and rank, op signatures per position, and what came of comparing them."""

    progress: dict[str, dict[int, RankProgress]] = field(default_factory=lambda: defaultdict(dict))
    has_completion: dict[str, bool] = field(default_factory=dict)
    signatures: dict[tuple[str, int], dict[int, list]] = field(default_factory=lambda: defaultdict(dict))
    comm_source: dict[str, str] = field(default_factory=dict)  #: comm -> the artifact kind that describes it
    last_comm: dict[int, str] = field(default_factory=dict)  #: rank -> comm of its latest recorded op
    missing_lines: list[dict] = field(default_factory=list)
    mismatches: list[dict] = field(default_factory=list)


def build(arts: Evidence, ids: Identities) -> Tables:
    """Collect progress and op signatures from every artifact, in global ranks."""
    t = Tables()
    for art in arts.artifacts:
        if not art.parsed:
            continue
        kind = art.kind
        for ev in art.parsed.events:
            cls = type(ev)
            if cls is OpEvent:
                _op(t, ids, ev, kind)
            elif cls is Progress:
                g = ids.resolve(ev.origin)
                comm = ids.canonical(ev.comm, g)
                if g is None:
                    g = ids.global_of(comm, ev.comm_rank)
                if g is None:
                    continue
                t.progress[comm].setdefault(g, RankProgress()).merge(ev.last_enqueued, ev.last_completed,
                                                                    ev.source)
                if ev.last_completed is not None:
                    t.has_completion[comm] = True
                _source(t, comm, art.kind)
                ids.comm_members.setdefault(comm, set()).add(g)
            elif (cls is ErrorEvent and ev.kind == ErrorKind.WATCHDOG_TIMEOUT and ev.op and ev.seq is not None
                  and ev.comm):
                _timed_out_op(t, ids, ev)
            elif cls is ErrorEvent and ev.kind in (ErrorKind.C10D_FINGERPRINT,
                                                   ErrorKind.COLLECTIVE_MISMATCH) and ev.comm:
                _checked_ops(t, ids, ev)
    return t


#: ProcessGroupWrapper numbers a group's collectives itself: its positions are kept apart from
#: c10d's SeqNum and NCCL's opCount (same comm, this prefix), so the two numberings never meet
WRAPPER = "wrapper:"


def _checked_ops(t: Tables, ids: Identities, ev: ErrorEvent) -> None:
    """What ProcessGroupWrapper (TORCH_DISTRIBUTED_DEBUG=DETAIL) says ranks ran, as signatures at its
    positions: 'Running collective: CollectiveFingerPrint(SequenceNumber=18, OpType=ALLREDUCE,
    TensorShape=[])' is the line's own rank; a 'Detected mismatch ... Rank 1 is running ..., but Rank 2
    is running ...' names both sides (group ranks). Sides printed without a SequenceNumber (torch 1.12)
    have no position and are left to the error itself."""
    g = ids.resolve(ev.origin)
    if ev.comm is None:  # the caller passes only events of a group
        return
    comm = ids.canonical(ev.comm, g)
    if ev.kind == ErrorKind.C10D_FINGERPRINT:
        sides = [(g, ev.op, ev.seq, cast(Fingerprint, ev.data).numel)]
    else:
        sides = [(ids.global_of(comm, s.rank) if comm != "pg:0" else s.rank, s.op, s.seq, s.numel)
                 for s in cast(Fingerprint, ev.data).sides or ()]
    for rank, op, seq, numel in sides:
        if rank is None or op is None or seq is None:
            continue
        sig = t.signatures[(WRAPPER + comm, seq)]
        calls = sig.setdefault(rank, [])
        if (op, numel, None) not in calls:
            calls.append((op, numel, None))


def _timed_out_op(t: Tables, ids: Identities, ev: ErrorEvent) -> None:
    """A watchdog line names the op a rank timed out in ('WorkNCCL(SeqNum=80078, OpType=BROADCAST'): its
    signature at that position, where the rank's own dumps or op lines gave none (count unknown)."""
    g = ids.resolve(ev.origin)
    if g is None or ev.comm is None or ev.seq is None:  # the caller passes only events of a group's position
        return
    comm = ids.canonical(ev.comm, g)
    sig = t.signatures[(comm, ev.seq)]
    if g not in sig:
        sig[g] = [(normalise_op(ev.op), None, None)]


#: which artifact kind best describes a comm's progress: a per-rank dump beats per-rank logs
_SOURCE_RANK = {"fr-dump": 0, "nccl-log": 1, "rank-log": 2}


def _source(t: Tables, comm: str, kind: str) -> None:
    """Remember the most telling kind of evidence for `comm`, whatever order files were read in.

    Why: 'rank N left no <kind>' is judged against this kind; a rank whose stderr holds
    no watchdog line has still left a rank log, so the log kind would hide it.
    """
    old = t.comm_source.get(comm)
    if old is None or _SOURCE_RANK.get(kind, 9) < _SOURCE_RANK.get(old, 9):
        t.comm_source[comm] = kind


def _op(t: Tables, ids: Identities, ev: OpEvent, kind: str) -> None:
    o = ev.origin
    g = o.rank
    if g is None:
        g = ids.resolve(o)
        if g is None:
            g = ids.global_of(ev.comm, ev.comm_rank)
            if g is None:
                return
    if ev.seq_kind == "p2p-seq":
        return
    comm = ids.canonical(ev.comm, g) if ev.comm.startswith("pg:") else ev.comm
    per_comm = t.progress[comm]
    rp = per_comm.get(g)
    if rp is None:
        rp = per_comm[g] = RankProgress()
        ids.comm_members.setdefault(comm, set()).add(g)
    _source(t, comm, kind)
    t.last_comm[g] = comm
    seq = ev.seq
    if rp.enqueued is None or seq > rp.enqueued:
        rp.enqueued = seq
    rp.sources.add(ev.source)
    if ev.state == "completed":
        rp.merge(None, seq, ev.source, counter=False)
        t.has_completion[comm] = True
    if ev.op not in P2P_OPS:
        sig = t.signatures[(comm, seq)]
        calls = sig.get(g)
        if calls is None:
            sig[g] = [(ev.op, ev.count, ev.dtype)]
        else:
            calls.append((ev.op, ev.count, ev.dtype))


def compress(ranks) -> str:
    """[0,1,2,5,7,8] -> '0-2,5,7-8': readable for 100k ranks."""
    vals = sorted(set(ranks))
    if not vals:
        return ""
    parts, start, prev = [], vals[0], vals[0]
    for v in vals[1:]:
        if v == prev + 1:
            prev = v
            continue
        parts.append(f"{start}-{prev}" if prev != start else str(start))
        start = prev = v
    parts.append(f"{start}-{prev}" if prev != start else str(start))
    return ",".join(parts)


def members_of(comm: str, ids: Identities) -> set[int]:
    """Global ranks of a communicator: those seen in it; for the default group every rank that
    left files of its own (every process of a job is in it) and, where a size is stated, the
    whole world; and a complete comm-rank table when the init lines or pg_config gave one."""
    members = set(ids.comm_members.get(comm, ()))
    if comm == "pg:0":
        members |= set(ids.ranks)
        members.update(listable(ids.world_size, len(ids.ranks)))  # a size the evidence does not meet: no loop
    size = ids.comm_size.get(comm)
    table = ids.comm_ranks.get(comm)
    if size and table and len(table) == size:
        members |= set(table.values())
    return members


def missing_line_table(t: Tables, ids: Identities, rows_per_comm: int = 3) -> list[dict]:
    """For each comm, the last positions and which ranks did / did not log them."""
    rows = []
    for comm, per_rank in t.progress.items():
        members = members_of(comm, ids)
        values = {g: p.enqueued for g, p in per_rank.items() if p.enqueued is not None}
        if not values:
            continue
        top = max(values.values())
        low = min(values.values())
        silent = sorted(m for m in members if m not in values)
        if low == top and not silent:
            continue
        start = max(low + 1, top - rows_per_comm + 1) if low < top else top
        for seq in range(start, top + 1):
            logged = [g for g, v in values.items() if v >= seq]
            missing = [g for g, v in values.items() if v < seq] + silent
            rows.append({"comm": comm, "seq": seq, "source": t.comm_source.get(comm), "logged": compress(logged),
                         "n_logged": len(logged), "missing": compress(missing), "n_missing": len(missing)})
    t.missing_lines = rows
    return rows


def find_mismatches(t: Tables, ids: Identities | None = None) -> list[dict]:
    """Positions where ranks called different things: each odd side, its reference and how sure it is, by the one
    rule the recorder judge also decides by (`odd_sides`); what a rank called there is this judge's own evidence.

    Where the largest groups tie (rank 7 BROADCAST against rank 3 ALLREDUCE at SeqNum 80078, seen in a
    real excerpt of two ranks) there is no minority: every side is listed as a lead, so neither is named alone.
    `ids` gives the groups' sizes (the ranks not seen at a position); without it their number is not known.
    """
    found: list[dict] = []
    for (comm, seq), per_rank in t.signatures.items():
        if len(per_rank) < 2:
            continue
        sigs = {g: (calls[0],) if len(calls) == 1 else tuple(sorted(set(calls), key=repr))
                for g, calls in per_rank.items()}
        if any(c[1] is None for calls in sigs.values() for c in calls):  # a watchdog line: compare op names only
            sigs = {g: tuple(sorted({(c[0], None, None) for c in calls})) for g, calls in sigs.items()}
        unseen = unseen_at(t, ids, comm, seq) if ids is not None else None
        sides = odd_sides(sigs, unseen)
        found.extend({"comm": comm, "seq": seq, "ranks": list(side.ranks), "called": _label(side.called),
                      "n": len(side.ranks), "majority_called": _label(side.reference), "n_majority": side.n_reference,
                      "n_seen": side.n_seen, "unseen": unseen, "tie": side.tie, "confidence": side.confidence,
                      "settled": side.settled} for side in sides)
    t.mismatches = found
    return found


def unseen_at(t: Tables, ids: Identities, comm: str, seq: int) -> int | None:
    """Ranks of `comm` whose call at `seq` no file shows, or None when the comm's size is not known.

    Why: a minority is only a minority if the unseen ranks cannot outnumber the majority. In a
    pasted excerpt (pytorch/pytorch#20630: ranks 1-2 ALLREDUCE, rank 3 BROADCAST at SeqNum 4084 of
    a 4-rank job, rank 0 silent) one unseen rank could make it two against two."""
    base = comm.removeprefix(WRAPPER)
    size = ids.comm_size.get(base) or (ids.world_size if base == "pg:0" else None)
    if not size:
        return None
    return max(0, size - len(t.signatures.get((comm, seq), {})))


def _label(sig: tuple) -> str:
    """(('allgather', 1048576, 'float32'),) -> 'allgather(count=1048576, float32)'."""
    parts = []
    for op, count, dtype in sig:
        args = ", ".join(x for x in (f"count={count}" if count is not None else "", dtype or "") if x)
        parts.append(f"{op}({args})")
    return "; ".join(parts)

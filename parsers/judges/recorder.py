"""Turn decoded recorder states of several ranks into wait-for edges and a stall finding.

The judge stage of the recorder (collectors/recorder.py copies, readers/recorder.py decodes).

Op counts say who has not *entered* a collective. The recorder also shows who
entered it and then stopped moving: its proxy ops sit on a step, its heartbeat may
have stopped (the process is frozen), and its peers' receives wait on it. This
module draws those facts as `WaitEdge`s ("rank A waits on peer B on channel c of
communicator X") and names, per communicator, the rank the others wait on.

Times: a state read live carries `observed_ns` (when it was read); states from a
bundle carry their copy time when the collector recorded it. The reference "now"
defaults to the newest heartbeat seen, which is close to collection time because
live ranks keep beating.
"""

from __future__ import annotations

import time

from collections import defaultdict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from parsers.model.ranges import listable
from parsers.model import Suspect, WaitEdge
from parsers.model.findings import Findings, JudgeContext, ReasonClass, cite
from parsers.model.ranges import fold
from parsers.model.majority import ahead_confidence, bars, minority_ahead
from parsers.model.ranksets import of_ranks, ranks_of
from parsers.model.waits import silent_members, wait_ends
from parsers.judges.recorder_order import order_mismatch
from parsers.readers.recorder import ProxyOpRecord, RecorderState

if TYPE_CHECKING:  # an annotation: the host digest's module imports this one (a gateway, which reads no file)
    from parsers.gather.evidence import Evidence

#: Step states in which a proxy op waits on its peer (data, buffer space or the network).
PEER_WAITS = {"RecvWait": "waits for data from", "SendPeerWait": "waits for buffer space at",
              "SendWait": "waits for the network to deliver to"}
#: Step states in which a proxy op waits on its own GPU or a local flush.
LOCAL_WAITS = {"SendGPUWait", "RecvGPUWait", "RecvFlushWait"}


def reference_ns(states: list[RecorderState], now_ns: int | None = None) -> int:
    """The time ages are measured against: `now_ns`, else the newest heartbeat or collector's copy time.

    A state read here (not a copy) carries the time of this read; that is not counted, or the
    ages of files copied by hand grew each time they were read ('no progress for 223414.9 s').
    While a job runs, its newest heartbeat is within a beat of now anyway."""
    if now_ns is not None:
        return now_ns
    seen = [s.heartbeat_ns for s in states] + [s.observed_ns for s in states if s.observed_ns and s.observed_is_copy]
    return max(seen) if seen else 0


def moment_words(states: list[RecorderState], ns: int, collected_unix: float | None = None) -> str:
    """Which moment `ns` is, in words with its time of day, for age sentences ('no progress for 7.9 s
    before the collection at 09:17:03 UTC'): an age never reads as measured from when it is read. Where the
    collection time is known (`collected_unix`, the manifest's, said once under the verdict), a copy time
    is said as an offset from it ('the recorder copy, 1 s after the collection time'): two clock times a
    second apart on adjacent lines read as two collections."""
    clock = time.strftime("%H:%M:%S UTC", time.gmtime(ns / 1e9))
    if any(s.heartbeat_ns == ns for s in states):  # first: `forensics recorder read` dates copies by it too
        return f"the newest recorder heartbeat at {clock}"
    if any(s.observed_is_copy and s.observed_ns == ns for s in states):
        if collected_unix is None:
            return f"the collection at {clock}"
        offset = ns / 1e9 - collected_unix
        if abs(offset) < 0.5:
            return "the collection time"
        return f"the recorder copy, {abs(offset):.0f} s {'after' if offset > 0 else 'before'} the collection time"
    return f"this read at {clock}"


def _p2p(op: ProxyOpRecord) -> bool:
    """Whether a proxy op belongs to a point-to-point Send or Recv, not a collective."""
    return (op.func or "").lower() in ("send", "recv", "sendrecv")


def _op_label(op: ProxyOpRecord) -> str | None:
    if op.func:
        return f"{op.func} seq {op.coll_seq}" if op.coll_seq is not None else op.func
    return None


def comm_rank_table(states: list[RecorderState]) -> dict[str, dict[int, int]]:
    """{comm id: {comm rank: global rank}} from the recorder files themselves (each
    carries its communicator rank and the process's RANK), to map WaitEdge ranks."""
    table: dict[str, dict[int, int]] = defaultdict(dict)
    for st in states:
        if st.env_rank is not None and st.rank >= 0:
            table[st.comm_hex][st.rank] = st.env_rank
    return dict(table)


def recorder_hosts(states: list[RecorderState]) -> dict[int, str]:
    """job rank -> host, as the recorder files name it (the host name, else NCCL's host id)."""
    return {st.job_rank: (st.host or st.hostid) for st in states}


def wait_edges(states: list[RecorderState], now_ns: int | None = None,
               collected_unix: float | None = None) -> list[WaitEdge]:
    """One edge per in-flight proxy op that waits on its peer, from every state (`collected_unix`: moment_words)."""
    ref = reference_ns(states, now_ns)
    when = moment_words(states, ref, collected_unix) if ref else ""
    edges = []
    for st in states:
        if st.comm_state != "active":
            continue
        for op in st.in_flight_ops:
            if op.last_state not in PEER_WAITS or op.peer == op.rank:
                continue
            idle = max(0.0, (ref - op.last_progress_ns) / 1e9) if ref else 0.0
            edges.append(
                WaitEdge(
                    comm_id=st.comm_hex,
                    waiter=op.rank,
                    peer=op.peer,
                    source="recorder",
                    op=_op_label(op),
                    channel=op.channel,
                    state=op.last_state,
                    waiter_pid=st.pid,
                    waiter_host=st.hostid or st.host,
                    # NCCL's Send/Recv are point-to-point: their sequence is between two peers, not a collective's
                    # position
                    seq=None if _p2p(op) else op.coll_seq,
                    p2p_peer=op.peer if _p2p(op) else None,
                    p2p_seq=op.coll_seq if _p2p(op) else None,
                    since_s=idle if ref else None,
                    detail=(
                        f"{op.direction} step {op.last_step} ({op.steps_done}/{op.n_steps} steps done), "
                        f"{PEER_WAITS[op.last_state]} rank {op.peer}, no progress for {idle:.1f} s"
                        + (f" before {when}" if when else "")
                    ),
                )
            )
    return edges


@dataclass
class RankInStall:
    """What one rank of a communicator was doing in the stuck operation."""

    rank: int
    pid: int | None = None
    host: str | None = None
    global_rank: int | None = None
    has_state: bool = False
    entered: bool = False  #: has a record of the stuck operation
    complete: bool = False  #: ... and it completed here
    frozen: bool = False  #: heartbeat stopped: the process is not running (SIGSTOP, D state)
    heartbeat_age_s: float | None = None
    last_progress_ns: int | None = None
    waits_on: list[int] = field(default_factory=list)  #: peers it waits on
    waited_on_by: list[int] = field(default_factory=list)
    local_wait: str | None = None  #: waits on its own GPU / flush
    latest: str | None = None  #: latest op of the same function it recorded
    kernel_started: int | None = None  #: channels of the stuck op whose kernel started on this rank's GPU
    enqueued_s: float | None = None  #: how long ago it enqueued the stuck op


@dataclass
class CommStall:
    """The stuck operation of one communicator and what each rank did in it."""

    comm_id: str
    op: str | None  #: e.g. 'AllReduce seq 11'
    nranks: int
    ranks: dict[int, RankInStall]
    edges: list[WaitEdge]
    suspects: list[Suspect]


def _stuck_op(states: list[RecorderState]) -> tuple[str, int] | None:
    """(func, seq) of the oldest operation some rank has not completed."""
    pending = [(c.start_ns, c.func, c.seq) for st in states for c in st.colls
               if c.kind == "coll" and c.state != "complete"]
    if not pending:
        pending = [(c.start_ns, c.func, c.seq) for st in states for c in st.colls if c.state != "complete"]
    if not pending:
        return None
    # the lowest seq of the most common pending function: what the ranks disagree on first
    counts: dict[str, int] = defaultdict(int)
    for _, func, _seq in pending:
        counts[func] += 1
    func = max(counts, key=lambda f: counts[f])
    return func, min(seq for _, f, seq in pending if f == func)


def analyse_comm(states: list[RecorderState], now_ns: int | None = None, frozen_after_s: float | None = None,
                 collected_unix: float | None = None) -> CommStall:
    """Find who the ranks of ONE communicator wait on (all states share comm_id; `collected_unix`: moment_words)."""
    ref = reference_ns(states, now_ns)
    nranks = max(s.nranks for s in states)
    comm = states[0].comm_hex
    edges = wait_edges(states, ref, collected_unix)
    stuck = _stuck_op(states)
    # the header's nranks sets the range a rank may be missing from; ranks are listed only where the states meet it
    ranks = {r: RankInStall(rank=r) for r in listable(nranks, len(states))}
    by_rank = {s.rank: s for s in states}
    beat_ref = _heartbeat_reference(states, ref, frozen_after_s)
    for r, st in by_rank.items():
        rp = ranks.setdefault(r, RankInStall(rank=r))
        rp.has_state, rp.pid, rp.host, rp.global_rank = True, st.pid, st.hostid or st.host, st.env_rank
        rp.heartbeat_age_s = max(0.0, (beat_ref - st.heartbeat_ns) / 1e9)
        rp.frozen = (st.comm_state == "active" and not st.death_copy  # a copy made as it died: it ran then
                     and rp.heartbeat_age_s > _frozen_limit(st, frozen_after_s))
        if stuck:
            same = [c for c in st.colls if c.func == stuck[0]]
            if same:
                rp.latest = same[-1].label
            mine = [c for c in same if c.seq == stuck[1]]
            rp.entered = bool(mine)
            rp.complete = bool(mine) and mine[-1].state == "complete"
            if mine:
                rp.last_progress_ns = mine[-1].last_progress_ns
                rp.kernel_started = mine[-1].kernel_started
                if mine[-1].enqueued_ns:
                    rp.enqueued_s = max(0.0, (ref - mine[-1].enqueued_ns) / 1e9)
        ops = st.in_flight_ops
        if ops:
            rp.last_progress_ns = max(o.last_progress_ns for o in ops)
            local = [o.last_state for o in ops if o.last_state in LOCAL_WAITS]
            rp.local_wait = local[0] if local else None
    identity = identity_mapped(states)
    for e in edges:  # a waiter or peer past a changed header's nranks is still a rank of the edge, never a KeyError
        peer = e.peer
        if peer is None:  # never from a recorder op, whose peer is always a rank
            continue
        for r in (e.waiter, peer):
            if r not in ranks:
                ranks[r] = RankInStall(rank=r)
        if peer not in ranks[e.waiter].waits_on:
            ranks[e.waiter].waits_on.append(peer)
        if e.waiter not in ranks[peer].waited_on_by:
            ranks[peer].waited_on_by.append(e.waiter)
    for rp in ranks.values():  # no RANK of its own: its comm rank is its job rank only where no state says otherwise
        if rp.global_rank is None and identity:
            rp.global_rank = rp.rank
    op = f"{stuck[0]} seq {stuck[1]}" if stuck else None
    when = ((moment_words(states, ref, collected_unix), moment_words(states, beat_ref, collected_unix)) if ref
            else ("", ""))
    # a rank that called another collective where the others wait: the cause, listed first; what the rest of the
    # stall shows stays (the merge makes it the mismatch's consequence: ops queued behind it, ranks waiting on it)
    suspects = order_mismatch(comm, states) + _suspects(comm, op, ranks, ref, when)
    return CommStall(comm, op, nranks, ranks, edges, suspects)


def _frozen_limit(st: RecorderState, frozen_after_s: float | None) -> float:
    """Seconds without a heartbeat after which the process counts as not running."""
    return frozen_after_s if frozen_after_s is not None else max(0.5, 10 * st.heartbeat_ms / 1000)


def _heartbeat_reference(states: list[RecorderState], ref: int, frozen_after_s: float | None) -> int:
    """Time heartbeats are judged against. When every process has stopped beating
    (all gone or stopped before collection), 'frozen' says nothing at `ref`; judge
    them against the newest beat instead, so the one that stopped first stands out."""
    active = [s for s in states if s.comm_state == "active"]
    if active and all((ref - s.heartbeat_ns) / 1e9 > _frozen_limit(s, frozen_after_s) for s in active):
        return max(s.heartbeat_ns for s in active)
    return ref


def _went_ahead(comm: str, op: str | None, ranks: dict[int, RankInStall]) -> list[Suspect]:
    """The odd one out (issue 26 item 2.5): a minority entered `op` and waits in it while every other rank,
    none frozen and none waiting on a peer, recorded the same latest op before it: the ranks that went ahead
    are the suspects, not the many that 'never entered' it (they agree with each other)."""
    stated = [rp for rp in ranks.values() if rp.has_state]
    inside = [rp for rp in stated if rp.entered and not rp.complete]
    before = [rp for rp in stated if not rp.entered]
    if (op is None or len(stated) != len(ranks) or len(inside) + len(before) != len(stated)
            or any(rp.frozen or rp.waits_on for rp in before)
            or not minority_ahead({op: of_ranks(rp.rank for rp in inside)},
                                  bars((rp.latest, rp.rank) for rp in before))):
        return []
    behind = fold(rp.global_rank if rp.global_rank is not None else rp.rank for rp in before)
    conf = ahead_confidence(of_ranks(rp.rank for rp in inside), of_ranks(rp.rank for rp in before))
    return [_suspect(rp, rp.global_rank, ReasonClass.WENT_AHEAD, conf,
                     f"went ahead: it entered {op}, which ranks {behind} did not reach (their latest: "
                     f"{before[0].latest or 'none'}): it calls what they skip, or skips what they do",
                     [cite(f"communicator {comm}: {op} entered by comm rank {rp.rank} only; ranks {behind} never "
                           "entered it and wait on no peer", tool="recorder")]) for rp in inside]


def _suspects(comm: str, op: str | None, ranks: dict[int, RankInStall], ref: int,
              when: tuple[str, str] = ("", "")) -> list[Suspect]:
    """Rank the ranks the others wait on, strongest evidence first. `when`: the words for the moments
    ages are measured against (`ref`, and the one heartbeats are judged against)."""
    before = f" before {when[0]}" if when[0] else " ago"
    beat = f"last recorder heartbeat {{:.1f}} s before {when[1]}" if when[1] else "recorder heartbeat {:.1f} s old"
    found: list[Suspect] = _went_ahead(comm, op, ranks)
    if found:
        return found
    where = f"communicator {comm}" + (f", {op}" if op else "")
    entered_progress = [rp.last_progress_ns for rp in ranks.values() if rp.entered and rp.last_progress_ns]
    first_stall = min(entered_progress) if entered_progress else None
    any_edges = any(rp.waits_on for rp in ranks.values())
    others_entered = any(rp.entered for rp in ranks.values())
    # where the waits end (the rule the scale path reads raw files by): waited on, waiting on none
    waited, waiting = of_ranks(r for r, rp in ranks.items() if rp.waited_on_by), \
        of_ranks(r for r, rp in ranks.items() if rp.waits_on)
    ends = set(ranks_of(wait_ends(waited, waiting)))
    # the ends that left no recorder state: silent members (the scale path reads ranks without state by it)
    silent = set(ranks_of(silent_members(waited, waiting, of_ranks(r for r, rp in ranks.items() if rp.has_state))))
    for rp in ranks.values():
        waiters = sorted(rp.waited_on_by)
        ev: list[str] = ([cite(f"comm ranks {fold(waiters)} wait on it ({where})", tool="recorder")] if waiters
                         else [])
        if rp.has_state and rp.heartbeat_age_s is not None:
            ev.append(cite(beat.format(rp.heartbeat_age_s), tool="recorder"))
        who = rp.global_rank
        if rp.has_state and rp.frozen and rp.entered and not rp.complete:
            found.append(_suspect(rp, who, ReasonClass.FROZEN_IN_OP, 0.95,
                                  f"entered {op} and stopped progressing: its process no longer runs "
                                  f"({beat.format(rp.heartbeat_age_s)})", ev))
        elif rp.has_state and rp.frozen:
            found.append(_suspect(rp, who, ReasonClass.FROZEN, 0.9,
                                  f"its process no longer runs ({beat.format(rp.heartbeat_age_s)}); "
                                  f"latest op {rp.latest}", ev))
        elif rp.has_state and op and not rp.entered and waiters:
            found.append(_suspect(rp, who, ReasonClass.OUTSIDE, 0.85,
                                  f"never entered {op} (latest: {rp.latest}) while its peers wait on it", ev))
        elif rp.has_state and op and not rp.entered and not any_edges and others_entered:
            # No proxy detail (LD_PRELOAD shim, or no network ops): op counts are the evidence.
            found.append(_suspect(rp, who, ReasonClass.OUTSIDE, 0.8,
                                  f"never entered {op} (latest: {rp.latest}) while other ranks did", ev))
        elif rp.rank in silent:  # whose job rank it is, no state says in a subgroup: a lead then, not a name
            unknown = "" if who is not None else " (its job rank unknown: no state maps this communicator's ranks)"
            found.append(_suspect(rp, who, ReasonClass.NO_RECORDER_STATE, 0.7 if who is not None else 0.4,
                                  f"no recorder state{unknown}, and comm ranks {fold(waiters)} wait on it in {where}",
                                  ev))
        elif (rp.has_state and rp.entered and not rp.complete and waiters and rp.kernel_started == 0
              and any((o.kernel_started or 0) > 0 for o in ranks.values() if o is not rp)):
            # Enqueued on the host, never started on the GPU, while the peers' kernels run: the stream
            # is busy with earlier work (a long kernel, a GPU-side loop). Its proxy waits on its own GPU.
            ago = f" {rp.enqueued_s:.1f} s{before}" if rp.enqueued_s is not None else ""
            found.append(_suspect(rp, who, ReasonClass.GPU_QUEUED, 0.85,
                                  f"enqueued {op}{ago} but it never started on its GPU (no kernel channel "
                                  f"started; proxy {rp.local_wait or 'idle'}), while its peers' kernels run: "
                                  f"work queued ahead of it keeps the GPU stream busy", ev))
        elif rp.has_state and rp.entered and not rp.complete and rp.rank in ends:
            found.append(_suspect(rp, who, ReasonClass.STALLED, 0.75,
                                  f"entered {op}, waits on no peer ({rp.local_wait or 'no step in flight'}), "
                                  f"and its peers wait on it", ev))
    if not found:
        # No frozen, absent or idle rank: the weakest hint is who stopped moving first.
        for rp in ranks.values():
            if (rp.has_state and rp.entered and not rp.complete and rp.waited_on_by and first_stall is not None
                    and rp.last_progress_ns == first_stall):
                idle = (ref - first_stall) / 1e9
                ev = [cite(f"comm ranks {fold(rp.waited_on_by)} wait on it ({where})", tool="recorder")]
                found.append(_suspect(rp, rp.global_rank, ReasonClass.STALLED_FIRST, 0.5,
                                      f"entered {op} and was the first to stop progressing ({idle:.1f} s{before})", ev))
    # equal confidence: the longer a process has been silent, the likelier it came first
    age: dict[int | None, float] = {rp.pid: rp.heartbeat_age_s or 0.0 for rp in ranks.values()
                                    if rp.pid is not None}
    found.sort(key=lambda s: (-s.confidence, -age.get(s.pid, 0.0)))
    return found


def identity_mapped(states: list[RecorderState]) -> bool:
    """Whether this communicator's comm ranks may stand for the job's ranks: no state that knows its process's RANK
    has it differ from its comm rank. Why: a rank that left no state (or no RANK) has only its comm rank; in a
    subgroup (ranks 4-7 of 8: comm rank 0 is job rank 4) reading that as the job rank names a healthy rank of another
    group (device seed 43, subgroup: job rank 0, which had finished, was named for the stalled rank 4)."""
    return all(st.env_rank == st.rank for st in states if st.env_rank is not None and st.rank >= 0)


def _suspect(rp: RankInStall, global_rank: int | None, kind: ReasonClass, conf: float, reason: str,
             ev: list[str]) -> Suspect:
    """A recorder finding of one comm rank; its job rank is `global_rank` (its own state's RANK, or its comm rank
    where the communicator maps comm ranks to themselves), else unknown: named by comm rank in the words only."""
    label = f"comm rank {rp.rank}" + (f" (global rank {global_rank})" if global_rank is not None else "")
    return Suspect(
        rank=global_rank,
        host=rp.host,
        pid=rp.pid,
        reason_class=kind,
        reason=f"{label} {reason}",
        confidence=conf,
        evidence=ev,
    )


def analyse(states: list[RecorderState], now_ns: int | None = None,
            collected_unix: float | None = None) -> list[CommStall]:
    """Group states by communicator and analyse each one that has something in flight (`collected_unix`:
    moment_words)."""
    groups: dict[int, list[RecorderState]] = defaultdict(list)
    for st in states:
        groups[st.comm_id].append(st)
    ref = reference_ns(states, now_ns)
    out = []
    for comm_states in groups.values():
        # one state per rank: keep the newest if a rank appears twice
        latest: dict[int, RecorderState] = {}
        for st in comm_states:
            if st.rank not in latest or st.start_ns > latest[st.rank].start_ns:
                latest[st.rank] = st
        out.append(analyse_comm(list(latest.values()), ref, collected_unix=collected_unix))
    return out


def stalled_ranks(states: list[RecorderState], now_ns: int | None = None) -> list[Suspect]:
    """Every suspect of every communicator, strongest first: 'who entered but stopped'."""
    suspects = [s for stall in analyse(states, now_ns) for s in stall.suspects]
    return sorted(suspects, key=lambda s: -s.confidence)  # stable: keeps each comm's own order


def judge(ev: Evidence, ctx: JudgeContext | None = None) -> Findings:
    """The recorder judge (the one protocol): wait edges per channel and peer (communicator ranks, mapped to
    global ranks by the recorder files' own table) and stall suspects, where there are state files."""
    states = ev.recorder
    if not states:
        return Findings("recorder", judge="recorder")
    collected = getattr(ev, "collected_unix", None)  # the manifest's time: copy times are said against it
    edges = wait_edges(states, collected_unix=collected)
    stalls = analyse(states, collected_unix=collected)
    section = {
        "state_files": len(states),
        "stalls": [{"comm_id": st.comm_id, "op": st.op, "nranks": st.nranks, "edges": len(st.edges)} for st in stalls],
        "wait_edges": [e.__dict__ for e in edges],
    }
    return Findings("recorder", [s for st in stalls for s in st.suspects], edges, judge="recorder",
                    sections={"recorder": section}, comm_ranks=comm_rank_table(states))

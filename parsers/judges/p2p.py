"""Point-to-point waits: who waits on whom through send/recv, by matching each side's posted ops.

Why a judge of its own: PyTorch numbers a group's send/recv by a p2p sequence of their own, apart
from its collectives' positions; comparing the two (a RECV at p2p seq 7 against an ALLREDUCE at 11)
makes every rank of a pipeline look 'behind'. Nor do two ranks' p2p numbers compare with each other:
each counts its own ops with every peer. So each pending send or receive (Flight Recorder dumps:
'send2->3', 'recv4<-3') is matched against its peer's posted ops, per pair and direction
(judges/p2p_match.py): a matched op waits on no one's posting and makes no edge; an unmatched one is a
wait on its peer. Where those waits end, a rank whose own ops all completed or were matched, is where a
pipeline stalls (it never posted the send the next stage waits for). A rank that waits on a peer which
never posts to it at all, while another rank's op to it goes unanswered, named the wrong peer: the wait
ends there, not at the peer (which is not behind: it will never come).

Only the default group (pg:0), whose ranks are global ranks: a subgroup's dump names group ranks.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from parsers.judges import p2p_match, p2p_stacks
from parsers.judges.p2p_match import History, Pending
from parsers.model.events import ErrorEvent, ErrorKind, OpEvent, Origin
from parsers.model.findings import Findings, JudgeContext, ReasonClass, Suspect, WaitEdge, cite, of_rank
from parsers.model.ranges import fold
from parsers.model.ranksets import Intervals, count, difference, holds, joined, of_ranks
from parsers.model.ranksets import fold as fold_iv
from parsers.model.stacks import P2P_CALLS, P2P_NATIVE_FRAMES, is_p2p, p2p_side
from parsers.stacks.classify import WAITING_KINDS, p2p_call

if TYPE_CHECKING:  # an annotation: the class judgement (parsers.scale.classes) imports this module on a gateway,
    from parsers.gather.evidence import Evidence  # which reads no file

DEFAULT_GROUP = "pg:0"
#: an edge's source -> the kind of evidence a suspect from it rests on (SOURCES): agreement counts kinds
_KIND = {"fr-dump": "dumps", "recorder": "recorder", "stacks": "stacks"}


def judge(ev: Evidence, ctx: JudgeContext | None = None) -> Findings:
    """Typed p2p wait edges and, for each rank where they end, a suspect (source: the dumps, or the recorder's
    records where no dump holds a send/recv); every scope's ranks are global ranks, so its edges are global."""
    hist, seen = _histories(ev)
    scopes = [(DEFAULT_GROUP, "fr-dump", hist)] if any(h.ops for h in hist.values()) else []
    scopes += [] if scopes else recorder_scopes(getattr(ev, "recorder", None) or [])
    pending: list[Pending] = []
    edges: list[WaitEdge] = []
    suspects: list[Suspect] = []
    for comm, source, h in scopes:
        mine = p2p_match.pending_ops(h)
        wrong = {p: qs for p in mine if (qs := p2p_match.wrong_peer(p, h))}
        edges += [_edge(p, seen, comm, source) for p in mine
                  if p.match != "matched" and p not in wrong and not _sent(p)]
        suspects += [_wrong_peer(p, qs, seen, source) for p, qs in wrong.items()]
        pending += mine
        taken: set[int | None] = {s.rank for s in suspects}
        taken |= {p.op.rank for p in mine if p.op.kind == "recv"}
        suspects += _blocked_in(ev, h, source, taken, "recv")
        taken |= {s.rank for s in suspects}
        suspects += _blocked_in(ev, h, source, taken, "send")
    # no record of a send or recv in flight (gloo; or NCCL still connecting a new peer, before it records the op):
    # the stacks' calls, where py-spy --locals kept their peers
    in_flight = any(not _sent(p) and p.match != "matched" for p in pending)
    stacked = {} if in_flight else p2p_stacks.stack_ops(getattr(ev, "ranks", None), getattr(ev, "world_size", None))
    if stacked:
        more_edges, more = p2p_stacks.judge_stacks(stacked)
        edges, suspects = edges + more_edges, suspects + more
    elif not in_flight:
        suspects += unanswered_sends(ev, {s.rank for s in suspects})
    named = {s.rank for s in suspects}
    suspects += [s for s in _sinks(edges, {r for _, _, h in scopes for r in h}, seen, hist) if s.rank not in named]
    waiting = {p.op.rank: f"a {p.op.kind} {_to_from(p.op.kind)} rank {p.op.peer} (p2p seq {p.op.seq})" for p in pending
               if not _sent(p)}
    for op in stacked.values():
        waiting.setdefault(op.rank, f"a {op.kind} {_to_from(op.kind)} rank {op.peer} (its stack; the peer from py-spy "
                                    "--locals)")
    for rank, frame in _traceback_p2p(ev).items():
        waiting.setdefault(rank, f"{frame} (its traceback; the peer is not recorded)")
    return Findings("dumps", suspects, edges, judge="p2p", p2p_waits=P2PWaits(waiting))


@dataclass(frozen=True)
class P2PWaits:
    """Ranks that wait in a point-to-point op, whatever its peer did: never 'stopped before' a collective the
    others reached, nor where a wait ends on a collective comparison. rank -> the op, in words."""

    ranks: dict[int, str]


def _traceback_p2p(ev: Evidence) -> dict[int, str]:
    """Ranks whose traceback's innermost torch.distributed frame is a send or receive (gloo's timeouts name no
    peer, and its Flight Recorder lists no send/recv: the frame is all a post-mortem holds of the op)."""
    last: dict[int, str] = {}
    for art in ev.artifacts:
        for e in art.parsed.events if art.parsed else ():
            if type(e) is ErrorEvent and e.kind == ErrorKind.PYTHON_FRAME and e.origin.rank is not None:
                last[e.origin.rank] = e.message or ""
    return {r: f for r, f in last.items() if f in P2P_CALLS}


def _histories(ev: Evidence) -> tuple[dict[int, History], dict[int, OpEvent]]:
    """Each rank's default-group p2p history from its dumps, and one event of each rank (its origin, for
    citations); a rank whose dump lost nothing has a complete history even with no p2p op."""
    records: dict[int, list[tuple[int, str, int, str, Origin | None]]] = {}
    whole: set[int] = set()
    seen: dict[int, OpEvent] = {}
    for art in ev.artifacts:
        parsed = art.parsed
        if parsed is None:
            continue
        for e in parsed.events:
            if type(e) is not OpEvent or e.comm != DEFAULT_GROUP or e.origin.rank is None:
                continue
            rank = e.origin.rank
            seen.setdefault(rank, e)
            named = p2p_match.parse_name(e.op) if e.seq_kind == "p2p-seq" else None
            if named is None or named[1] != rank or named[2] == rank:
                continue
            records.setdefault(rank, []).append((e.seq, named[0], named[2], e.state, e.origin))
            seen[rank] = e
        if parsed.kind == "fr-dump" and parsed.facts.get("fr_whole") and parsed.events:
            whole |= {e.origin.rank for e in parsed.events if type(e) is OpEvent and e.origin.rank is not None}
    return p2p_match.histories(records, whole), seen


#: what a send or receive stuck before its op reached NCCL's queue shows on its stack: the connection to its peer
#: being set up (NCCL connects point-to-point peers at their first op)
_CONNECTING = ("ncclTransportP2pSetup", "ncclP2PPreconnectFunc")


def _blocked_in(ev: Evidence, hist: dict[int, History], source: str, known: set[int | None],
                kind: str) -> list[Suspect]:
    """Live, where no record holds the op itself (seen, NCCL 2.28.9: a send or receive to a peer it never used
    before waits in ncclGroupEnd, setting up its connection to that peer, before the recorder sees an op): a rank
    whose stack is in a `kind` op while another rank's pairing op toward it goes unanswered posts it to someone
    else. Its own history counts the op the other waits for as never posted. Which call its stack is in is
    `p2p_call`'s answer (its activity's op; c10d's C++ names only for a stack with no Python frame), the one the
    stacks judge reads too, so py-spy's, gdb's and a merged stack of one process say the same."""
    pairing = "recv" if kind == "send" else "send"
    out = []
    for r in getattr(ev, "ranks", None) or ():
        rank = r.rank
        if rank is None or rank in known or rank not in hist \
                or (frame := p2p_call(r.main_stack, r.activity, kind)) is None:
            continue
        waiting = p2p_match.unmatched_toward(rank, pairing, hist)
        if not waiting:
            continue
        counts = "; ".join(f"rank {q} posted {hist[q].posted(pairing, rank)} {pairing}s {_to_from(pairing)} it, it "
                           f"posted {hist[rank].posted(kind, q)} {kind}s {_to_from(kind)} it" for q in waiting[:3])
        names = {f.function for f in r.main_stack.frames[:P2P_NATIVE_FRAMES]} if r.main_stack else set()
        setup = next((c for c in _CONNECTING if c in names), None)
        plural = len(waiting) > 1
        still = (f"; NCCL is still connecting it to its peer ({setup}): a peer it has not used before, so not "
                 f"rank{'s' if plural else ''} {fold(waiting)}") if setup else ""
        theirs = f"{'receive' if kind == 'send' else 'send'}{'' if plural else 's'} {_to_from(pairing)} it"
        rec = r.record
        out.append(Suspect(
            rank=rank, host=rec.host, pid=rec.pid, reason_class=ReasonClass.WRONG_PEER, source=_KIND[source],
            reason=of_rank(rank, f"waits in a {'send' if kind == 'send' else 'receive'} ({frame}) while rank"
                           f"{'s' if plural else ''} {fold(waiting)} {theirs} unanswered: it "
                           f"{'sends to' if kind == 'send' else 'receives from'} another peer{still}"),
            confidence=0.8,
            evidence=[cite(f"{counts} [NCCL recorder]", tool=source),
                      cite(f"main thread in {frame}{f' under {setup}' if setup else ''} [stack]", tool="stack-frame")]))
    return out


#: a class of ranks as the unanswered-send rule reads it: what its main threads do (an activity's kind and op,
#: parsers/stacks/classify.py) and its ranks; one rank's own activity and a digest's stack class both give one
Row = tuple[str | None, str | None, Intervals]


def activity_rows(ev: Evidence) -> list[Row]:
    """Each rank read here by its own activity, and the ranks judged elsewhere by their digests' stack classes
    (a focused read at scale: parsers.scale.focus), each rank once."""
    read = {r.rank: r.activity for r in getattr(ev, "ranks", None) or () if r.rank is not None}
    rows: list[Row] = [(a.kind, a.op, [[q, q]]) for q, a in read.items()]
    mine = of_ranks(read)
    for c in getattr(ev, "elsewhere_classes", ()) or ():
        rest = difference(c.ranks, mine)
        if rest:
            rows.append((c.kind, c.op, rest))
    return rows


def unanswered(rows: list[Row], world: int | None) -> tuple[Intervals, str, Intervals] | None:
    """The rule, over classes of ranks (a single rank is a class of one): where every rank of the job is in a row,
    each waits, none in a receive, some in a send and all the rest in one and the same collective (not a wait on
    the GPU, which may be a kernel of anything): (the senders, that collective, the rest); None otherwise."""
    if not world or sum(count(iv) for *_, iv in rows) != world or any(k not in WAITING_KINDS for k, _, _ in rows):
        return None
    senders = joined(p for _, op, iv in rows if p2p_side(op) == "send" for p in iv)
    rest = {(kind, op or "") for kind, op, _ in rows if p2p_side(op) != "send"}
    if not senders or len(rest) != 1:
        return None
    ((kind, op),) = rest
    if kind != "collective" or is_p2p(op) or op in ("wait", ""):
        return None
    return senders, op, difference(joined(p for *_, iv in rows for p in iv), senders)


def unanswered_sends(ev: Evidence, taken: set[int | None]) -> list[Suspect]:
    """Ranks in a send that no rank answers, where nothing names their peers (NCCL records a send only once the
    connection to a new peer is set up; py-spy --locals did not run). It holds only where every rank of the job
    shows its main thread, none is in a receive, and every rank not in a send waits in one and the same
    collective (`unanswered`). Each send then waits for a receiver that is not receiving: another of the senders
    (a pair that both send first) or a rank in the collective, which receives only after the senders join it.
    Either way the job's waits end at the senders, a deadlock of sends posted first; which peer, the stacks do not
    say. Only senders read here are named (a focused read at scale reads the minority class)."""
    found = unanswered(activity_rows(ev), getattr(ev, "world_size", None))
    if found is None:
        return []
    senders, op, others = found
    several = count(senders) > 1
    pair = "the other of the pair (both send first)" if count(senders) == 2 else "another of them (each sends first)"
    out = []
    for r in getattr(ev, "ranks", None) or ():
        if r.rank is None or r.rank in taken or not holds(r.rank, senders):
            continue
        rec, call = r.record, r.activity.op
        said = (f"waits in {call}, and no rank of the job is in a receive: its send goes unanswered "
                f"(ranks {fold_iv(senders)} wait in a send; ranks {fold_iv(others)} wait in {op}, which "
                f"{'they have' if several else 'it has'} not joined). Its receiver is "
                f"{pair + ' or ' if several else ''}a rank in {op}, which receives only after the "
                f"collective: a deadlock either way; the stacks name no peer (py-spy --locals did not keep one)")
        out.append(Suspect(
            rank=rec.rank, host=rec.host, pid=rec.pid, reason_class=ReasonClass.UNANSWERED, source="stacks",
            reason=of_rank(rec.rank, said), confidence=ReasonClass.UNANSWERED.default_confidence,
            evidence=[cite(f"main threads: ranks {fold_iv(senders)} in {call}; ranks {fold_iv(others)} in {op}; "
                           f"no rank in recv (every rank of {ev.world_size})", tool="stacks")]))
    return out


def recorder_scopes(states: list) -> list[tuple[str, str, dict[int, History]]]:
    """Per communicator, each rank's Send/Recv records from the recorder's state files (their peers are
    communicator ranks, mapped to job ranks by the files' own table): the same matching as the dumps'.
    A rank's history is whole where its ring still holds the communicator's first record."""
    by_comm: dict[str, list] = {}
    for st in states:
        by_comm.setdefault(st.comm_hex, []).append(st)
    out = []
    for comm, group in by_comm.items():
        table = {st.rank: st.job_rank for st in group if st.rank >= 0}
        records: dict[int, list[tuple[int, str, int, str, Origin | None]]] = {}
        whole = {st.job_rank for st in group if not st.colls or st.colls[0].index == 0}
        for st in group:
            for c in st.colls:
                peer = table.get(c.root_or_peer)
                if c.kind != "p2p" or c.func.lower() not in ("send", "recv") or peer is None:
                    continue
                state = "completed" if c.state == "complete" else "enqueued"
                records.setdefault(st.job_rank, []).append((c.seq + 1, c.func.lower(), peer, state, None))
        if records:
            out.append((comm, "recorder", p2p_match.histories(records, whole)))
    return out


def _sent(p: Pending) -> bool:
    """A completed send: its rank waits in it no longer (kept by p2p_match for the wrong-peer reading only)."""
    return p.op.kind == "send" and p.op.state == "completed"


def _to_from(kind: str) -> str:
    return "to" if kind == "send" else "from"


def _edge(p: Pending, seen: dict[int, OpEvent], comm: str = DEFAULT_GROUP, source: str = "fr-dump") -> WaitEdge:
    """The wait of a pending op its peer has not answered (or whose answer no history can count)."""
    op, own = p.op, seen.get(p.op.rank)
    b = p.behind
    if p.match == "queued" and b is not None:  # a queued op always has the op it waits behind
        said = (f"its {op.kind} {_to_from(op.kind)} rank {op.peer} (p2p seq {op.seq}) is {op.state}; rank {op.peer} "
                f"posted the {op.pairing} that answers it behind its own {b.kind} {_to_from(b.kind)} rank {b.peer} "
                f"(p2p seq {b.seq}), still {b.state}")
    elif p.match == "unmatched":
        said = (f"its {op.kind} {_to_from(op.kind)} rank {op.peer} (p2p seq {op.seq}, its #{op.nth} "
                f"{_to_from(op.kind)} that rank) is {op.state}; rank {op.peer} posted {p.peer_posted} {op.pairing}(s) "
                f"{_to_from(op.pairing)} it")
    else:
        said = (f"its {op.kind} {_to_from(op.kind)} rank {op.peer} (p2p seq {op.seq}) is {op.state}; no whole history "
                f"of both says whether rank {op.peer} posted the matching {op.pairing}")
    return WaitEdge(comm_id=comm, waiter=op.rank, peer=op.peer, source=source, op=op.kind,
                    scope="group" if comm == DEFAULT_GROUP else "communicator",
                    p2p_peer=op.peer, p2p_seq=op.seq, waiter_pid=own.origin.pid if own else None,
                    waiter_host=own.origin.host if own else None, detail=said, global_ranks=True, p2p_match=p.match)


def _wrong_peer(p: Pending, others: list[int], seen: dict[int, OpEvent], source: str = "fr-dump") -> Suspect:
    """'rank 4 posts recv from 2, which never sends to it, while rank 3's send to it goes unanswered'; the send side
    alike: 'rank 3 posts send to 5, which never receives from it, while rank 4 receives from it unanswered' (a
    completed send waits on no one: it sent to the wrong peer)."""
    op, own = p.op, seen.get(p.op.rank)
    where = ("[Flight Recorder dumps, the default group]" if source == "fr-dump"
             else "[NCCL recorder, its communicator's records]")
    never = "sends to it" if op.kind == "recv" else "receives from it"
    theirs = f"{'receive' if op.kind == 'send' else 'send'}{'s' if len(others) == 1 else ''} {_to_from(op.pairing)} it"
    ends = "it sent to the wrong peer" if _sent(p) else "it waits on the wrong peer"
    return Suspect(
        rank=op.rank, host=own.origin.host if own else None, pid=own.origin.pid if own else None,
        reason_class=ReasonClass.WRONG_PEER, source=_KIND[source],
        reason=of_rank(op.rank, f"posts {op.kind} {_to_from(op.kind)} {op.peer}, which never {never}, while rank"
                       f"{'s' if len(others) > 1 else ''} {fold(others)} {theirs} unanswered: {ends}"),
        confidence=ReasonClass.WRONG_PEER.default_confidence,
        evidence=[cite(f"its {op.kind} {_to_from(op.kind)} rank {op.peer} (p2p seq {op.seq}) is {op.state}; rank "
                       f"{op.peer}'s whole history has no {op.pairing} {_to_from(op.pairing)} rank {op.rank} {where}",
                       tool=source, file=op.origin.file if op.origin else None,
                       line=op.origin.line if op.origin else None, tagged=True)])


def _sinks(edges: list[WaitEdge], known: set[int], seen: dict[int, OpEvent], hist: dict[int, History]) -> list[Suspect]:
    """A rank where point-to-point waits end: waited on, waiting on no one, with a history of its own (`known`);
    `seen` and `hist` (the dumps') say its host, pid and last op where a dump holds them."""
    import networkx as nx  # here, not at the top: a gateway imports the class judgement and never builds a graph

    g = nx.DiGraph()
    for e in edges:
        g.add_edge(e.waiter, e.peer, edge=e)
    out = []
    for r in g.nodes:
        if g.out_degree(r) or r not in known:  # it waits itself, or no record of it says its own p2p ops
            continue
        waiters = sorted(nx.ancestors(g, r))
        direct = [g.edges[w, r]["edge"] for w in g.predecessors(r)]
        own = seen.get(r)
        last = hist[r].ops[-1] if r in hist and hist[r].ops else None
        said = "; ".join(f"rank {e.waiter} in {e.op} {_to_from(e.op)} it (p2p seq {e.p2p_seq})" for e in direct[:3])
        mine = (f"its own point-to-point ops all completed or were matched (last: {last.kind} {_to_from(last.kind)} "
                f"{last.peer}, p2p seq {last.seq}): it never posted the next one") if last else \
            "its own point-to-point ops all completed or were matched: it never posted the one they wait for"
        source = direct[0].source
        where = "[Flight Recorder dumps, the default group]" if source == "fr-dump" else "[NCCL recorder]"
        out.append(Suspect(
            rank=r, host=own.origin.host if own else None, pid=own.origin.pid if own else None,
            reason_class=ReasonClass.WAIT_ROOT, source=_KIND[source],
            reason=of_rank(r, f"is where the point-to-point waits end: ranks {fold(waiters)} wait on it through "
                           f"send/recv, and {mine}"),
            confidence=round(min(0.9, 0.6 + 0.35 * len(waiters) / max(1, len(known) - 1)), 3),
            evidence=[cite(f"{said} {where}", tool=source, file=own.origin.file if own else None,
                           line=own.origin.line if own else None, tagged=True)]))
    return out

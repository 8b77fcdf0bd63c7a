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
from typing import Any

import networkx as nx

from parsers.judges import p2p_match
from parsers.judges.p2p_match import History, Pending
from parsers.model.events import ErrorEvent, OpEvent
from parsers.model.findings import Findings, JudgeContext, ReasonClass, Suspect, WaitEdge, cite, of_rank
from parsers.ranges import fold

DEFAULT_GROUP = "pg:0"


def judge(ev: Any, ctx: JudgeContext | None = None) -> Findings:
    """Typed p2p wait edges and, for each rank where they end, a suspect (source: the dumps); the default
    group's ranks are global ranks, so its edges are global."""
    hist, seen = _histories(ev)
    pending = p2p_match.pending_ops(hist)
    wrong = {p: p2p_match.wrong_peer(p, hist) for p in pending}
    wrong = {p: qs for p, qs in wrong.items() if qs}
    edges = [_edge(p, seen) for p in pending if p.match != "matched" and p not in wrong]
    suspects = [_wrong_peer(p, qs, seen) for p, qs in wrong.items()]
    named = {s.rank for s in suspects}
    suspects += [s for s in _sinks(edges, hist, seen) if s.rank not in named]
    waiting = {p.op.rank: f"a {p.op.kind} {_to_from(p.op.kind)} rank {p.op.peer} (p2p seq {p.op.seq})" for p in pending}
    for rank, frame in _traceback_p2p(ev).items():
        waiting.setdefault(rank, f"{frame} (its traceback; the peer is not recorded)")
    return Findings("dumps", suspects, edges, judge="p2p", result=P2PWaits(waiting))


@dataclass(frozen=True)
class P2PWaits:
    """Ranks that wait in a point-to-point op, whatever its peer did: never 'stopped before' a collective the
    others reached, nor where a wait ends on a collective comparison. rank -> the op, in words."""

    ranks: dict[int, str]


#: torch.distributed's point-to-point calls, as a traceback's innermost frame names them
P2P_CALLS = frozenset({"send", "recv", "isend", "irecv", "batch_isend_irecv"})


def _traceback_p2p(ev: Any) -> dict[int, str]:
    """Ranks whose traceback's innermost torch.distributed frame is a send or receive (gloo's timeouts name no
    peer, and its Flight Recorder lists no send/recv: the frame is all a post-mortem holds of the op)."""
    last: dict[int, str] = {}
    for art in ev.artifacts:
        for e in art.parsed.events if art.parsed else ():
            if type(e) is ErrorEvent and e.kind == "python-frame" and e.origin.rank is not None:
                last[e.origin.rank] = e.message or ""
    return {r: f for r, f in last.items() if f in P2P_CALLS}


def _histories(ev: Any) -> tuple[dict[int, History], dict[int, OpEvent]]:
    """Each rank's default-group p2p history from its dumps, and one event of each rank (its origin, for
    citations); a rank whose dump lost nothing has a complete history even with no p2p op."""
    records: dict[int, list] = {}
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


def _to_from(kind: str) -> str:
    return "to" if kind == "send" else "from"


def _edge(p: Pending, seen: dict[int, OpEvent]) -> WaitEdge:
    """The wait of a pending op its peer has not answered (or whose answer no history can count)."""
    op, own = p.op, seen.get(p.op.rank)
    if p.match == "unmatched":
        said = (f"its {op.kind} {_to_from(op.kind)} rank {op.peer} (p2p seq {op.seq}, its #{op.nth} {_to_from(op.kind)} "
                f"that rank) is {op.state}; rank {op.peer} posted {p.peer_posted} {op.pairing}(s) {_to_from(op.pairing)} it")
    else:
        said = f"its {op.kind} {_to_from(op.kind)} rank {op.peer} (p2p seq {op.seq}) is {op.state}; no whole history of both says whether rank {op.peer} posted the matching {op.pairing}"
    return WaitEdge(comm_id=DEFAULT_GROUP, waiter=op.rank, peer=op.peer, source="fr-dump", op=op.kind, scope="group",
                    p2p_peer=op.peer, p2p_seq=op.seq, waiter_pid=own.origin.pid if own else None,
                    waiter_host=own.origin.host if own else None, detail=said, global_ranks=True, p2p_match=p.match)


def _wrong_peer(p: Pending, others: list[int], seen: dict[int, OpEvent]) -> Suspect:
    """'rank 4 posts recv from 2, which never sends to it, while rank 3's send to it goes unanswered'."""
    op, own = p.op, seen[p.op.rank]
    never = "sends to it" if op.kind == "recv" else "receives from it"
    theirs = f"{op.pairing}{'s' if len(others) == 1 else ''} {_to_from(op.pairing)} it"
    return Suspect(
        rank=op.rank, host=own.origin.host, pid=own.origin.pid, reason_class=ReasonClass.WRONG_PEER,
        reason=of_rank(op.rank, f"posts {op.kind} {_to_from(op.kind)} {op.peer}, which never {never}, while rank"
                       f"{'s' if len(others) > 1 else ''} {fold(others)} {theirs} unanswered: it waits on the wrong peer"),
        confidence=ReasonClass.WRONG_PEER.default_confidence,
        evidence=[cite(f"its {op.kind} {_to_from(op.kind)} rank {op.peer} (p2p seq {op.seq}) is {op.state}; rank {op.peer}'s "
                       f"whole history has no {op.pairing} {_to_from(op.pairing)} rank {op.rank} [Flight Recorder dumps, the default group]",
                       tool="fr-dump", file=op.origin.file if op.origin else None,
                       line=op.origin.line if op.origin else None, tagged=True)])


def _sinks(edges: list[WaitEdge], hist: dict[int, History], seen: dict[int, OpEvent]) -> list[Suspect]:
    """A rank where point-to-point waits end: waited on, waiting on no one, with a history of its own."""
    g = nx.DiGraph()
    for e in edges:
        g.add_edge(e.waiter, e.peer, edge=e)
    out = []
    for r in g.nodes:
        if g.out_degree(r) or r not in hist or r not in seen:  # it waits itself, or no dump of it says its own p2p ops
            continue
        waiters = sorted(nx.ancestors(g, r))
        direct = [g.edges[w, r]["edge"] for w in g.predecessors(r)]
        own = seen[r]
        last = hist[r].ops[-1] if hist[r].ops else None
        said = "; ".join(f"rank {e.waiter} in {e.op} {_to_from(e.op)} it (p2p seq {e.p2p_seq})" for e in direct[:3])
        mine = (f"its own point-to-point ops all completed or were matched (last: {last.kind} {_to_from(last.kind)} "
                f"{last.peer}, p2p seq {last.seq}): it never posted the next one") if last else "it posted no point-to-point op"
        out.append(Suspect(
            rank=r, host=own.origin.host, pid=own.origin.pid, reason_class=ReasonClass.WAIT_ROOT,
            reason=of_rank(r, f"is where the point-to-point waits end: ranks {fold(waiters)} wait on it through "
                           f"send/recv, and {mine}"),
            confidence=round(min(0.9, 0.6 + 0.35 * len(waiters) / max(1, len(hist) - 1)), 3),
            evidence=[cite(f"{said} [Flight Recorder dumps, the default group]", tool="fr-dump", file=own.origin.file,
                           line=own.origin.line, tagged=True)]))
    return out

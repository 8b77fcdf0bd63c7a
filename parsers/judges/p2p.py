"""Point-to-point waits: who waits on whom through send/recv, by peer and p2p sequence.

Why a judge of its own: PyTorch numbers a group's send/recv by a p2p sequence of their own, apart
from its collectives' positions; comparing the two (a RECV at p2p seq 7 against an ALLREDUCE at 11)
makes every rank of a pipeline look 'behind'. Here a rank's last point-to-point op that did not
complete (Flight Recorder dumps: 'recv4<-3', 'send2->3') is a wait on its peer; the rank where those
waits end, whose own point-to-point ops all completed, is where a pipeline stalls (it never posted
the send the next stage waits for).

Only the default group (pg:0), whose ranks are global ranks: a subgroup's dump names group ranks.
"""

from __future__ import annotations

import re
from typing import Any

import networkx as nx

from parsers.model.events import OpEvent
from parsers.model.findings import Findings, JudgeContext, ReasonClass, Suspect, WaitEdge, cite, of_rank
from parsers.ranges import fold

_P2P = re.compile(r"^(send|recv)(\d+)(->|<-)(\d+)$")
DEFAULT_GROUP = "pg:0"


def judge(ev: Any, ctx: JudgeContext | None = None) -> Findings:
    """Typed p2p wait edges and, for each rank where they end, a suspect (source: the dumps); the default
    group's ranks are global ranks, so its edges are global."""
    last: dict[int, OpEvent] = {}
    for art in ev.artifacts:
        for e in art.parsed.events if art.parsed else ():
            if type(e) is not OpEvent or e.seq_kind != "p2p-seq" or e.comm != DEFAULT_GROUP or e.origin.rank is None:
                continue
            seen = last.get(e.origin.rank)
            if seen is None or e.seq > seen.seq or (e.seq == seen.seq and seen.state == "completed"):
                last[e.origin.rank] = e
    edges = []
    for rank, e in sorted(last.items()):
        m = _P2P.match(e.op or "")
        if e.state == "completed" or m is None or int(m.group(2)) != rank or int(m.group(4)) == rank:
            continue
        peer = int(m.group(4))
        edges.append(WaitEdge(comm_id=e.comm, waiter=rank, peer=peer, source="fr-dump", op=m.group(1), scope="group",
                              p2p_peer=peer, p2p_seq=e.seq, waiter_pid=e.origin.pid, waiter_host=e.origin.host,
                              detail=f"its {e.op} (p2p seq {e.seq}) is {e.state}", global_ranks=True))
    return Findings("dumps", _sinks(edges, last), edges, judge="p2p")


def _sinks(edges: list[WaitEdge], last: dict[int, OpEvent]) -> list[Suspect]:
    g = nx.DiGraph()
    for e in edges:
        g.add_edge(e.waiter, e.peer, edge=e)
    out = []
    for r in g.nodes:
        if g.out_degree(r) or r not in last:  # it waits itself, or no dump of it says its own p2p ops
            continue
        waiters = sorted(nx.ancestors(g, r))
        direct = [g.edges[w, r]["edge"] for w in g.predecessors(r)]
        own = last[r]
        said = "; ".join(f"rank {e.waiter} in {e.op} {'to' if e.op == 'send' else 'from'} it (p2p seq {e.p2p_seq})"
                         for e in direct[:3])
        out.append(Suspect(
            rank=r, host=own.origin.host, pid=own.origin.pid, reason_class=ReasonClass.WAIT_ROOT,
            reason=(of_rank(r, f"is where the point-to-point waits end: ranks {fold(waiters)} wait on it through "
                    f"send/recv, and its own last point-to-point op ({own.op}, p2p seq {own.seq}) completed: it never "
                    f"posted the next one")),
            confidence=round(min(0.9, 0.6 + 0.35 * len(waiters) / max(1, len(last) - 1)), 3),
            evidence=[cite(f"{said} [Flight Recorder dumps, the default group]", tool="fr-dump", file=own.origin.file,
                           line=own.origin.line, tagged=True)]))
    return out

"""Demotes 'root' claims about a rank that is itself waiting on someone else.

Each source judges one communicator at a time: "rank 1 never entered op 1 of PG A
while rank 0 waits on it" is true, yet rank 1 may be blocked in PG B waiting on
rank 2, whose own wait ends at the real root (seen on the device: a wait chain
over three process groups). A claim that a rank is the one others wait for only
stands if that rank is not waiting itself: its main thread is not blocked in a
collective or on the GPU, and no wait edge leaves it.
"""

from __future__ import annotations

from typing import Iterable

import networkx as nx

from parsers.model import Suspect
from parsers.stacks.classify import Activity

#: Claims that mean "the others wait for this rank" rather than a fact about its process.
ROOT_CLAIMS = {
    "outside-collective", "wait-root", "wait-cycle", "missing-line", "behind", "ras-behind", "silent",
    "stalled-in-collective", "stalled-first",
}
DEMOTE_FACTOR = 0.5


def wait_graph(edges: Iterable[tuple[int, int, str]]) -> nx.DiGraph:
    """Global-rank graph: waiter -> rank it waits on, labelled with where (comm/op)."""
    g = nx.DiGraph()
    for waiter, peer, where in edges:
        if waiter is not None and peer is not None and waiter != peer:
            g.add_edge(int(waiter), int(peer), where=where)
    return g


def demote_waiters(suspects: list[Suspect], activities: dict[int, Activity], graph: nx.DiGraph,
                   frozen: set[int] = frozenset()) -> list[Suspect]:
    """Lower the confidence of root claims about ranks that wait themselves; re-sort.

    `frozen` ranks (stopped, zombie, in the kernel) are never demoted: a process that
    cannot run is where a wait ends, whatever its last stack or proxy step says.
    """
    for s in suspects:
        if s.reason_class not in ROOT_CLAIMS or s.rank is None or s.rank in frozen:
            continue
        why = _waits(s.rank, activities.get(s.rank), graph)
        if why:
            s.confidence = round(s.confidence * DEMOTE_FACTOR, 3)
            s.evidence = s.evidence + [f"demoted: it waits itself ({why}), so it is not where the wait ends"]
    return sorted(suspects, key=Suspect.sort_key)


def _waits(rank: int, activity: Activity | None, graph: nx.DiGraph) -> str | None:
    if rank in graph and graph.out_degree(rank):
        peer = next(iter(graph.successors(rank)))
        return f"on rank {peer} in {graph.edges[rank, peer].get('where') or 'another communicator'}"
    if activity is not None and activity.waiting:
        return f"its main thread is blocked: {activity.text}"
    return None

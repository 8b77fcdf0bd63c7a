"""The arbiter's step 4, last clause: independent sinks of the wait-for graph are several culprits.

Why: two groups can hang at once, each on its own rank (two pipeline chains, two subgroups), and naming
the first alone sends the on-call engineer to one machine while the other group stays hung. A further
suspect is a culprit of its own only where the graph shows it: it waits on nobody (or a fact about its own
process says it cannot run), ranks wait on it, and its waiters and the other culprits' waiters are
disjoint, with no path between the two. One sink that explains the other (a waiter they share, or one
waiting on the other through any chain) leaves one culprit and the other its consequence or a lead.
"""

from __future__ import annotations

import networkx as nx

from parsers.model.findings import CULPRIT_MIN_CONFIDENCE, Suspect, Verdict


def independent_culprits(verdict: Verdict, graph: nx.DiGraph) -> None:
    """Move each independent sink among the named suspects into `verdict.independent` (kept in `suspects`,
    right after the head), with the findings about its own waiters as its consequences."""
    head = verdict.culprit
    if head is None or head.rank is None or verdict.deadlock is not None or head.rank not in graph:
        return
    taken = nx.ancestors(graph, head.rank) | {head.rank}
    hung = set(verdict.hung_ranks)
    found: list[Suspect] = []
    for s in verdict.suspects[1:]:
        if s.confidence < CULPRIT_MIN_CONFIDENCE or s.rank is None or s.demotion is not None or s.rank not in graph:
            continue
        waiters = nx.ancestors(graph, s.rank)
        sink = not graph.out_degree(s.rank) or s.reason_class.observed
        if not sink or not waiters or (hung and not waiters & hung) or (waiters | {s.rank}) & taken:
            continue
        found.append(s)
        taken |= waiters | {s.rank}
    if not found:
        return
    rest = []
    for s in verdict.suspects[1:]:
        owner = next((c for c in found if s.rank in nx.ancestors(graph, c.rank)), None) if s not in found else None
        if owner is not None and not s.reason_class.observed:
            owner.consequences.append(s)
        elif s not in found:
            rest.append(s)
    verdict.independent = found
    verdict.suspects = [head, *found, *rest]

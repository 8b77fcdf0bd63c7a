"""The wait-for graph of ranks: an edge waiter -> waited-on, as a networkx DiGraph.

The log/recorder correlation (`parsers.judges.logs`) builds this graph from what
ranks say about each other (`correlated_graph`). Where it found no edge, the graph is
derived from the verdict alone by `waitfor_from_verdict`: every rank that waits
in a collective waits on the suspects. Everything that draws or tabulates the graph takes any DiGraph
whose nodes are global ranks, with optional node attributes:

  host, pid, state, activity, op, where   what the rank was doing
  suspect (bool), culprit (bool)          what the verdict says of it
  reason_class, reason, confidence        why, for suspects
"""

from __future__ import annotations

from typing import Any, Iterable

import networkx as nx

from parsers.model import Verdict


def correlated_graph(verdict: Verdict, rows: list[dict[str, Any]] | None = None) -> nx.DiGraph | None:
    """The wait-for graph of the log correlation (global ranks), or None when it found no edge.

    `forensics analyze` keeps that graph on the verdict; only rank-to-rank edges are
    drawn (edges to 'unknown' placeholders are dropped), nodes carry the ranks table's
    facts (`rows`, the view's rows with logs-only ranks, else the verdict's), and the verdict's
    suspects are marked on it. With None, the view draws the stand-in from `waitfor_from_verdict`.
    """
    source = getattr(verdict, "graph", None)
    if source is None:
        return None
    graph = nx.DiGraph()
    for row in rows if rows is not None else verdict.sections.get("ranks") or []:
        if row.get("rank") is not None:
            graph.add_node(int(row["rank"]), **_node_attrs(row))
    for u, v, data in source.edges(data=True):
        if isinstance(u, int) and isinstance(v, int) and u != v:
            graph.add_edge(u, v, **data)
    if graph.number_of_edges() == 0:
        return None
    mark_suspects(graph, verdict)
    graph.graph["source"] = "logs"
    return graph


def waitfor_from_verdict(verdict: Verdict, rows: list[dict[str, Any]] | None = None) -> nx.DiGraph:
    """Stand-in wait-for graph: each waiting rank -> each suspect, weighted by confidence."""
    graph = nx.DiGraph()
    rows = rows if rows is not None else verdict.sections.get("ranks") or []
    for row in rows:
        if row.get("rank") is None:
            continue
        graph.add_node(int(row["rank"]), **_node_attrs(row))
    for suspect in verdict.suspects:
        if suspect.rank is None:
            continue
        attrs = graph.nodes[suspect.rank] if suspect.rank in graph else {}
        attrs = dict(attrs, host=suspect.host or attrs.get("host"), pid=suspect.pid or attrs.get("pid"))
        graph.add_node(suspect.rank, **attrs)
    mark_suspects(graph, verdict)
    targets = [s for s in verdict.suspects if s.rank is not None]
    for node, data in graph.nodes(data=True):
        if data.get("suspect") or not data.get("waiting"):
            continue
        for suspect in targets:
            graph.add_edge(node, suspect.rank, source="verdict", confidence=suspect.confidence, op=data.get("op"))
    graph.graph["source"] = "verdict"
    return graph


def mark_suspects(graph: nx.DiGraph, verdict: Verdict) -> nx.DiGraph:
    """Copy the verdict's suspects onto the nodes (suspect, culprit, reason...); works on any graph."""
    culprit = verdict.culprit
    for suspect in verdict.suspects:
        if suspect.rank is None:
            continue
        if suspect.rank not in graph:
            graph.add_node(suspect.rank, host=suspect.host, pid=suspect.pid)
        node = graph.nodes[suspect.rank]
        if node.get("suspect") and node.get("confidence", 0) >= suspect.confidence:
            continue
        node.update(
            suspect=True,
            culprit=culprit is not None and suspect.rank == culprit.rank,
            reason_class=suspect.reason_class,
            reason=suspect.reason,
            confidence=suspect.confidence,
        )
    return graph


def _node_attrs(row: dict[str, Any]) -> dict[str, Any]:
    kind = row.get("activity")
    return {
        "host": row.get("host"),
        "pid": row.get("pid"),
        "state": row.get("state"),
        "activity": kind,
        "op": row.get("op"),
        "where": row.get("where"),
        "waiting": kind in ("collective", "gpu-sync"),
        "label": row.get("label"),  #: a logs-only rank: where its logs stop
        "suspect": False,
        "culprit": False,
    }


def culprits(graph: nx.DiGraph) -> list[int]:
    """Nodes marked culprit, else sinks that many ranks wait on (most waited-on first)."""
    marked = [n for n, d in graph.nodes(data=True) if d.get("culprit")]
    if marked:
        return marked
    sinks = [n for n in graph.nodes if graph.out_degree(n) == 0 and graph.in_degree(n) > 0]
    return sorted(sinks, key=lambda n: -graph.in_degree(n))


def edges_table(graph: nx.DiGraph) -> list[dict[str, Any]]:
    """One row per edge, for notebooks: waiter, waited_on and the edge's attributes."""
    return [{"waiter": u, "waited_on": v, **d} for u, v, d in graph.edges(data=True)]


def nodes_with(graph: nx.DiGraph, ranks: Iterable[int]) -> nx.DiGraph:
    """The subgraph around `ranks`: them, who they wait on, and who waits on them."""
    keep = set()
    for r in ranks:
        if r in graph:
            keep |= {r, *graph.successors(r), *graph.predecessors(r)}
    return graph.subgraph(keep).copy()

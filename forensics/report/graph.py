"""Picture of the wait-for graph, the culprit in red, readable from 8 ranks to 4,096.

Small graphs are drawn rank by rank. Larger ones are collapsed first: suspects
keep a node each (they are the point of the picture), every other rank joins an
equivalence class of ranks that do the same thing and wait on the same nodes,
drawn as one node labelled with its folded rank range and count. Edges between
classes carry how many rank-level edges they stand for.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Hashable

import networkx as nx

from forensics.report import style
from parsers.ranges import fold

MAX_RANK_NODES = 16  #: up to this many ranks, one node per rank


@dataclass
class ClassNode:
    """One node of the collapsed graph: a suspect rank or a class of like ranks."""

    key: Hashable
    ranks: list[int]
    label: str  #: what the ranks do
    suspect: bool = False
    culprit: bool = False
    attrs: dict[str, Any] = field(default_factory=dict)

    @property
    def title(self) -> str:
        if len(self.ranks) == 1:
            return f"rank {self.ranks[0]}"
        return f"ranks {style.clip(fold(self.ranks), 48)} ({len(self.ranks)})"


def node_label(data: dict[str, Any]) -> str:
    """What a rank does, in a few words, from its node attributes."""
    if data.get("suspect") and data.get("reason_class"):
        return str(data["reason_class"])
    kind = data.get("activity")
    if kind in ("collective", "gpu-sync") and data.get("op"):
        return f"waits in {data['op']}"
    if kind == "missing":
        return "no process"
    if kind == "elsewhere":
        return "outside collectives"
    return str(data.get("label") or kind or "")


def collapse(graph: nx.DiGraph, max_nodes: int = MAX_RANK_NODES) -> nx.DiGraph:
    """Quotient graph whose nodes are ClassNode keys (attr 'node': ClassNode, edge attr 'count')."""
    if graph.number_of_nodes() <= max_nodes:
        return _quotient(graph, {n: ("rank", n) for n in graph.nodes})
    key = _class_keys(graph, True, max_nodes)
    if len(set(key.values())) > max_nodes:
        key = _class_keys(graph, False, max_nodes)
    return _quotient(graph, key)


def keys_of_targets(graph: nx.DiGraph, node: Any, many: bool) -> set[Hashable]:
    """What a rank waits on, as class keys: suspect ranks (or their kinds when there are many)."""
    out: set[Hashable] = set()
    for v in graph.successors(node):
        d = graph.nodes[v]
        if d.get("suspect"):
            out.add(("suspects", d.get("reason_class")) if many and not d.get("culprit") else ("rank", v))
    return out


def _class_keys(graph: nx.DiGraph, with_targets: bool, max_nodes: int = MAX_RANK_NODES) -> dict[Any, Hashable]:
    keys: dict[Any, Hashable] = {}
    suspects = [n for n, d in graph.nodes(data=True) if d.get("suspect")]
    many = len(suspects) > max_nodes // 2  # then suspects, too, fold by kind (the culprit stays alone)
    for n, data in graph.nodes(data=True):
        if data.get("suspect"):
            keys[n] = ("suspects", data.get("reason_class")) if many and not data.get("culprit") else ("rank", n)
            continue
        targets = frozenset(keys_of_targets(graph, n, many)) if with_targets else frozenset()
        keys[n] = ("class", node_label(data), data.get("state"), targets)
    return keys


def _quotient(graph: nx.DiGraph, key: dict[Any, Hashable]) -> nx.DiGraph:
    members: dict[Hashable, list[int]] = {}
    for n in graph.nodes:
        members.setdefault(key[n], []).append(n)
    out = nx.DiGraph()
    for k, ranks in members.items():
        first = graph.nodes[ranks[0]]
        out.add_node(
            k,
            node=ClassNode(
                key=k, ranks=sorted(ranks), label=node_label(first),
                suspect=bool(first.get("suspect")), culprit=any(graph.nodes[r].get("culprit") for r in ranks),
                attrs=dict(first),
            ),
        )
    for u, v in graph.edges:
        ku, kv = key[u], key[v]
        if out.has_edge(ku, kv):
            out.edges[ku, kv]["count"] += 1
        else:
            out.add_edge(ku, kv, count=1)
    return out


def layout(collapsed: nx.DiGraph) -> dict[Hashable, tuple[float, float]]:
    """Where each node goes.

    One suspect: a star, the culprit in the middle and every waiter on a ring
    around it. Several suspects: two rows, waiters on top and suspects below with
    the culprit in the middle, so arrows run downwards and never cross a node.
    """
    nodes = [collapsed.nodes[k]["node"] for k in collapsed.nodes]
    inner = sorted((n for n in nodes if n.suspect), key=lambda n: n.ranks[0])
    outer = sorted((n for n in nodes if not n.suspect), key=lambda n: n.ranks[0])
    pos: dict[Hashable, tuple[float, float]] = {}
    if len(inner) <= 1:
        for n in inner:
            pos[n.key] = (0.0, 0.0)
        radius = 1.0 if inner else 0.8
        for i, n in enumerate(outer):
            angle = math.pi / 2 - 2 * math.pi * i / max(1, len(outer))
            pos[n.key] = (radius * math.cos(angle), radius * math.sin(angle))
        return pos
    culprit = next((n for n in inner if n.culprit), None)
    if culprit:  # culprit in the middle of the bottom row
        rest = [n for n in inner if n is not culprit]
        inner = rest[: len(rest) // 2] + [culprit] + rest[len(rest) // 2:]
    for row, y in ((outer, 0.75), (inner, -0.55)):
        for i, n in enumerate(row):
            x = 0.0 if len(row) == 1 else -1.3 + 2.6 * i / (len(row) - 1)
            pos[n.key] = (x, y)
    return pos


def draw_waitfor(graph: nx.DiGraph, max_nodes: int = MAX_RANK_NODES, title: str | None = None):
    """Matplotlib figure of the (collapsed) wait-for graph."""
    collapsed = collapse(graph, max_nodes)
    pos = layout(collapsed)
    low = min((xy[1] for xy in pos.values()), default=0.0) - 0.42  # room for the lowest caption
    fig, ax = style.new_figure(9, 2.6 * (1.75 - low))
    ax.set_axis_off()
    ax.set_xlim(-1.55, 1.55)
    ax.set_ylim(low, 1.7)
    ax.set_aspect("equal")
    for u, v, data in collapsed.edges(data=True):
        _edge(ax, pos[u], pos[v], data.get("count", 1), collapsed.nodes[v]["node"].culprit, u == v)
    for k in collapsed.nodes:
        _node(ax, pos[k], collapsed.nodes[k]["node"])
    ranks = graph.number_of_nodes()
    head = title or "wait-for graph: arrows point from a waiting rank to the rank it waits on"
    sub = f"{ranks} ranks" + (f", shown as {collapsed.number_of_nodes()} classes" if collapsed.number_of_nodes() < ranks else "")
    source = graph.graph.get("source")
    if source == "verdict":
        sub += "; edges derived from the verdict (each waiting rank -> each suspect)"
    elif source:
        sub += f"; edges from {source}"
    style.text(ax, 0, 1.68, head, ha="center", va="top", fontsize=11, weight="bold")
    style.text(ax, 0, 1.58, sub, ha="center", va="top", fontsize=9, color="#444444")
    if not graph.number_of_nodes():
        style.text(ax, 0, 0, "no ranks in this bundle", ha="center", va="center", fontsize=12)
    return fig


def _node(ax, xy: tuple[float, float], node: ClassNode) -> None:
    color = style.CULPRIT if node.culprit else style.SUSPECT if node.suspect else style.WAITER
    if not node.suspect and node.label in ("no process", "", "unknown", "show no stack"):
        color = style.OTHER
    size = 0.1 + 0.03 * math.log10(max(1, len(node.ranks)))
    from matplotlib.patches import Circle

    ax.add_patch(Circle(xy, size, facecolor=color, edgecolor="black" if node.culprit else "white", linewidth=2.5 if node.culprit else 1, zorder=3))
    inside = str(node.ranks[0]) if len(node.ranks) == 1 else str(len(node.ranks))
    style.text(ax, xy[0], xy[1], inside, ha="center", va="center", fontsize=11 if len(inside) < 4 else 8, color="white", weight="bold", zorder=4)
    caption = node.title + "\n" + style.clip(node.label, 34)
    if node.culprit:
        caption = "CULPRIT " + caption
    above = xy[1] > 0.6  # top row: caption above, out of the way of the arrows leaving downwards
    at = xy[1] + size + 0.03 if above else xy[1] - size - 0.03
    style.text(ax, xy[0], at, caption, ha="center", va="bottom" if above else "top", fontsize=8.5,
               color=style.CULPRIT if node.culprit else "#222222", weight="bold" if node.suspect else "normal", zorder=5,
               bbox=dict(boxstyle="round,pad=0.2", facecolor="white", edgecolor="none", alpha=0.85))


def _edge(ax, a: tuple[float, float], b: tuple[float, float], count: int, to_culprit: bool, loop: bool) -> None:
    if loop:
        style.text(ax, a[0], a[1] + 0.17, f"↻ {count} inside", ha="center", fontsize=7, color=style.EDGE)
        return
    width = 1.0 + 1.5 * math.log10(max(1, count))
    ax.annotate(
        "", xy=b, xytext=a,
        arrowprops=dict(arrowstyle="-|>", color=style.CULPRIT if to_culprit else style.EDGE, lw=width, alpha=0.75,
                        shrinkA=16, shrinkB=18, mutation_scale=14),
        zorder=2,
    )
    if count > 1:
        mid = ((a[0] + b[0]) / 2, (a[1] + b[1]) / 2)
        style.text(ax, mid[0], mid[1], f"×{count}", fontsize=7.5, ha="center", va="center", color=style.EDGE, zorder=2,
                   bbox=dict(boxstyle="round,pad=0.1", facecolor="white", edgecolor="none", alpha=0.8))

"""Picture of the wait-for graph, the culprit in red, readable from 8 ranks to 4,096.

Small graphs are drawn rank by rank. Larger ones are collapsed first: suspects
keep a node each (they are the point of the picture), every other rank joins an
equivalence class of ranks that do the same thing and wait on the same nodes,
drawn as one node labelled with its folded rank range and count. Edges between
classes carry how many rank-level edges they stand for.

Layout is in rows, each node in a column as wide as its caption: waiting classes on
top, suspects below with the culprit in the middle, so arrows run downwards and no
caption can meet another. Edge counts are placed along their arrow only where they
cover no other label (otherwise the count is in the arrow's tooltip and the caption).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Hashable

import networkx as nx

from forensics.report import style
from forensics.report.svg import Canvas, Rect, text_box, text_width
from parsers.model.ranges import fold

MAX_RANK_NODES = 16  #: up to this many ranks, one node per rank
PER_ROW = 6  #: nodes per row before a row wraps
CAPTION = 10.5  #: px, caption font size
ROW_GAP = 70.0  #: px between the bottom of one row's captions and the next row's nodes
COL_GAP = 18.0


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


def node_radius(node: ClassNode) -> float:
    return 14 + 4 * math.log10(max(1, len(node.ranks)))


def caption_lines(node: ClassNode, loops: int = 0) -> list[str]:
    """What is written under a node: who, what they do, and waits inside the class."""
    lines = [("CULPRIT " if node.culprit else "") + node.title, style.clip(node.label, 34)]
    if loops:
        lines.append(f"↻ {loops} inside (waits within the class)")
    return lines


def _rows(nodes: list[ClassNode]) -> list[list[ClassNode]]:
    """Waiting classes first (top), then suspects with the culprit in the middle of its row."""
    inner = sorted((n for n in nodes if n.suspect), key=lambda n: n.ranks[0])
    outer = sorted((n for n in nodes if not n.suspect), key=lambda n: n.ranks[0])
    culprit = next((n for n in inner if n.culprit), None)
    if culprit:
        rest = [n for n in inner if n is not culprit]
        inner = rest[: len(rest) // 2] + [culprit] + rest[len(rest) // 2:]
    rows = [outer[i: i + PER_ROW] for i in range(0, len(outer), PER_ROW)]
    rows += [inner[i: i + PER_ROW] for i in range(0, len(inner), PER_ROW)]
    return [r for r in rows if r]


def layout(collapsed: nx.DiGraph) -> dict[Hashable, tuple[float, float]]:
    """Centre of each node, in px: rows of columns, each column as wide as its widest caption."""
    nodes = [collapsed.nodes[k]["node"] for k in collapsed.nodes]
    loops = {u: d.get("count", 1) for u, v, d in collapsed.edges(data=True) if u == v}
    rows = _rows(nodes)
    widths = {n.key: max(2 * node_radius(n), max(text_width(t, CAPTION) for t in caption_lines(n, loops.get(n.key, 0))))
              for n in nodes}
    spans = [sum(widths[n.key] for n in row) + COL_GAP * (len(row) - 1) for row in rows]
    full = max(spans, default=0.0)
    pos: dict[Hashable, tuple[float, float]] = {}
    y = 0.0
    for row, span in zip(rows, spans):
        x = (full - span) / 2
        r = max(node_radius(n) for n in row)
        for n in row:
            pos[n.key] = (x + widths[n.key] / 2, y + r)
            x += widths[n.key] + COL_GAP
        y += 2 * r + 3 * (CAPTION + 3) + ROW_GAP
    return pos


def draw_waitfor(graph: nx.DiGraph, max_nodes: int = MAX_RANK_NODES, title: str | None = None) -> Canvas:
    """SVG picture of the (collapsed) wait-for graph."""
    collapsed = collapse(graph, max_nodes)
    pos = layout(collapsed)
    canvas = Canvas(title="wait-for graph")
    ranks = graph.number_of_nodes()
    head = title or "wait-for graph: arrows point from a waiting rank to the rank it waits on"
    shown = collapsed.number_of_nodes()
    sub = f"{ranks} ranks" + (f", shown as {shown} classes" if shown < ranks else "")
    source = graph.graph.get("source")
    if ranks and not graph.number_of_edges():
        sub += "; no wait edges: no rank's evidence says whom it waits on"
    elif source == "verdict":
        sub += "; edges derived from the verdict (each waiting rank -> each suspect)"
    elif source:
        sub += f"; edges from {source}"
    top = -62.0
    canvas.text(0, top + 14, head, size=13, bold=True)
    canvas.text(0, top + 32, sub, size=11, color="#444444")
    loops = {u: d.get("count", 1) for u, v, d in collapsed.edges(data=True) if u == v}
    nodes = {k: collapsed.nodes[k]["node"] for k in collapsed.nodes}
    for k, n in nodes.items():  # captions first: they are what must stay readable
        _caption(canvas, pos[k], n, loops.get(k, 0))
    edges = [(u, v, data.get("count", 1)) for u, v, data in collapsed.edges(data=True) if u != v]
    for u, v, count in edges:
        _edge(canvas, pos[u], pos[v], nodes[u], nodes[v], count)
    for k, n in nodes.items():
        _node(canvas, pos[k], n)
    for u, v, count in edges:  # last: a count goes only where it covers no caption and no node
        _edge_count(canvas, pos[u], pos[v], count, [(pos[k], node_radius(n)) for k, n in nodes.items()])
    if not ranks:
        canvas.text(0, 10, "no ranks in this bundle", size=12)
    return canvas


def _node(canvas: Canvas, xy: tuple[float, float], node: ClassNode) -> None:
    color = style.CULPRIT if node.culprit else style.SUSPECT if node.suspect else style.WAITER
    if not node.suspect and node.label in ("no process", "", "unknown", "show no stack"):
        color = style.OTHER
    r = node_radius(node)
    canvas.circle(xy[0], xy[1], r, color, stroke="black" if node.culprit else "white", width=2.5 if node.culprit else 1,
                  tip=f"{node.title}: {node.label}", cls="node culprit" if node.culprit else "node")
    inside = str(node.ranks[0]) if len(node.ranks) == 1 else str(len(node.ranks))
    size = 12.0 if len(inside) < 4 else 9.0
    canvas.text(xy[0], xy[1] + size * 0.35, inside, size=size, anchor="middle", color="white", bold=True, group="node")


def _caption(canvas: Canvas, xy: tuple[float, float], node: ClassNode, loops: int) -> None:
    r = node_radius(node)
    for i, line in enumerate(caption_lines(node, loops)):
        canvas.text(xy[0], xy[1] + r + 4 + CAPTION + i * (CAPTION + 3), line, size=CAPTION, anchor="middle",
                    color=style.CULPRIT if node.culprit else "#222222", bold=node.suspect and i == 0, group="caption",
                    backdrop=True)


def _edge(canvas: Canvas, a: tuple[float, float], b: tuple[float, float], na: ClassNode, nb: ClassNode,
          count: int) -> None:
    width = 1.0 + 1.5 * math.log10(max(1, count))
    ra, rb = node_radius(na), node_radius(nb)
    if abs(a[1] - b[1]) < 1e-6:  # same row: leave from below the caption band, not through it
        canvas.arrow_between(a, b, ra, rb, style.CULPRIT if nb.culprit else style.EDGE, width, 0.6)
    else:
        start = (a[0], a[1]) if b[1] < a[1] else (a[0], a[1] + ra + 3 * (CAPTION + 3))
        canvas.arrow_between(start, b, ra if start == a else 2, rb, style.CULPRIT if nb.culprit else style.EDGE, width,
                             0.75)


def _edge_count(canvas: Canvas, a: tuple[float, float], b: tuple[float, float], count: int,
                circles: list[tuple[tuple[float, float], float]]) -> None:
    """'×N' at the first spot along the arrow that covers no label and no node."""
    if count <= 1:
        return
    label = f"×{count}"
    for t in (0.5, 0.4, 0.6, 0.3, 0.7, 0.25, 0.75):
        x, y = a[0] + (b[0] - a[0]) * t, a[1] + (b[1] - a[1]) * t
        box = text_box(x, y, label, 9.5, "middle")
        clear = all(not box.overlaps(Rect(c[0] - r, c[1] - r, c[0] + r, c[1] + r), 2) for c, r in circles)
        if clear and canvas.fits(box, pad=2):
            canvas.text(x, y, label, size=9.5, anchor="middle", color=style.EDGE, group="edge", backdrop=True)
            return

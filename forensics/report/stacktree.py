"""The merged stack tree presented: as indented text lines (`render_tree`) and as a picture, one box
per branch, rank counts on every branch.

The prefix tree from parsers.stacks has one node per frame. Chains of frames that
the same ranks share are folded into one box (outermost frame on top), so the
picture has one box per place where ranks part ways, however deep the stacks and
however many ranks: 4,096 ranks in two places give three boxes. Boxes that hold
only suspect ranks are red.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from forensics.report import style
from forensics.report.svg import CHAR_EM, Canvas
from parsers.model.ranges import fold
from parsers.stacks.labels import short_label
from parsers.stacks.tree import StackNode

MAX_FRAMES_PER_BOX = 8
_PY_FRAME = re.compile(r"\(.+:\d+\)$")
MAX_CHARS = 58
FONT = 11.0  #: px, monospaced
CHAR_W = FONT * CHAR_EM  #: px per character
LINE_H = 15.0  #: px per text line
PAD = 8.0  #: px inside a box
GAP = 24.0  #: px between sibling boxes
VGAP = 40.0  #: px between levels (room for the rank count above each box)


@dataclass
class Box:
    """A run of frames shared by the same ranks, and the boxes below it."""

    frames: list[str]
    ranks: list[int]
    children: list["Box"] = field(default_factory=list)
    x: float = 0.0
    y: float = 0.0
    level: int = 0

    @property
    def lines(self) -> list[str]:
        frames = [style.clip(style.shorten_path(short_label(f)), MAX_CHARS) for f in self.frames]
        head = f"[{style.clip(fold(self.ranks), 40)}]  {len(self.ranks)} rank{'s' if len(self.ranks) != 1 else ''}"
        return [head] + elide(frames)

    @property
    def width(self) -> float:
        return max(len(s) for s in self.lines) * CHAR_W + 2 * PAD

    @property
    def height(self) -> float:
        return len(self.lines) * LINE_H + PAD


def elide(frames: list[str], limit: int = MAX_FRAMES_PER_BOX) -> list[str]:
    """At most `limit` frames, in order, with '… n frames …' where some were left out.

    Kept first: the outermost and the two innermost frames, then Python frames (they
    carry file:line, the user's code), then the innermost of the rest.
    """
    if len(frames) <= limit:
        return frames
    n = len(frames)
    keep = {0, n - 1, n - 2}
    python = [i for i in range(n) if _PY_FRAME.search(frames[i])]
    for i in reversed(python):
        if len(keep) >= limit:
            break
        keep.add(i)
    for i in reversed(range(n)):
        if len(keep) >= limit:
            break
        keep.add(i)
    out, last = [], -1
    for i in sorted(keep):
        if i > last + 1:
            out.append(f"… {i - last - 1} frame{'s' if i - last - 1 > 1 else ''} …")
        out.append(frames[i])
        last = i
    return out


def boxes(tree: dict[str, Any]) -> list[Box]:
    """Top-level boxes of a stack_tree dict (children of the '<all>' root)."""
    return [_fold(child) for child in tree.get("children") or []]


def _fold(node: dict[str, Any]) -> Box:
    frames = [str(node.get("frame"))]
    ranks = list(node.get("ranks") or [])
    kids = node.get("children") or []
    while len(kids) == 1 and list(kids[0].get("ranks") or []) == ranks:
        frames.append(str(kids[0].get("frame")))
        kids = kids[0].get("children") or []
    return Box(frames=frames, ranks=ranks, children=[_fold(k) for k in kids])


def _place(box: Box, left: float, level: int, gap: float) -> float:
    """Tidy layout: leaves left to right, a parent centred over its children; returns span width."""
    box.level = level
    if not box.children:
        box.x = left + box.width / 2
        return box.width
    span = 0.0
    for child in box.children:
        span += _place(child, left + span, level + 1, gap) + gap
    span -= gap
    if span < box.width:
        shift = (box.width - span) / 2
        for child in box.children:
            _shift(child, shift)
        span = box.width
    box.x = left + span / 2
    return span


def _shift(box: Box, dx: float) -> None:
    box.x += dx
    for child in box.children:
        _shift(child, dx)


def _all(top: list[Box]) -> list[Box]:
    out, todo = [], list(top)
    while todo:
        b = todo.pop()
        out.append(b)
        todo.extend(b.children)
    return out


def draw_stack_tree(tree: dict[str, Any], suspects: set[int] | None = None, culprit: int | None = None,
                    title: str | None = None, note: str | None = None) -> Canvas:
    """SVG picture of the folded stack tree (a stack_tree dict from the verdict).

    Boxes are laid out tidy-tree style in pixels from their text, so no two boxes (and
    no two labels) can meet; each box's rank count sits in the gap just above it.
    `note` is printed under the title, e.g. which ranks have no stack at all.
    """
    suspects = suspects or set()
    canvas = Canvas(title="merged stack tree")
    top = boxes(tree)
    left = 0.0
    for b in top:  # top-level boxes side by side
        left += _place(b, left, 0, GAP) + GAP
    every = _all(top)
    levels = max((b.level for b in every), default=0) + 1
    level_h = [max((b.height for b in every if b.level == lv), default=0) for lv in range(levels)]
    head = title or "merged main-thread stacks, outermost frame first; numbers are ranks per branch"
    canvas.text(0, 14, head, size=13, bold=True)
    y = 30.0
    if note:
        canvas.text(0, y + 4, note, size=11, color=style.CULPRIT)
        y += 18
    y += VGAP - 10
    level_y = []
    for h in level_h:
        level_y.append(y)
        y += h + VGAP
    for b in every:
        b.y = level_y[b.level]
    for b in every:
        for child in b.children:
            canvas.line(b.x, b.y + b.height, child.x, child.y - 4, style.EDGE, 1.2, arrow=True)
    for b in every:
        _draw_box(canvas, b, suspects, culprit)
    if not every:
        canvas.text(0, y + 10, "no stacks in this bundle", size=12)
    return canvas


def _draw_box(canvas: Canvas, b: Box, suspects: set[int], culprit: int | None) -> None:
    only_suspects = bool(b.ranks) and set(b.ranks) <= suspects
    has_culprit = culprit in b.ranks
    face = "#fde0e0" if only_suspects else "#eaf0f8"
    edge = style.CULPRIT if only_suspects else style.WAITER
    x0 = b.x - b.width / 2
    count = str(len(b.ranks))
    canvas.text(b.x, b.y - 8, count, size=10, anchor="middle", color="#222222", bold=True, group="count")
    canvas.rect(x0, b.y, b.width, b.height, fill=face, stroke=edge, width=2.2 if only_suspects and has_culprit else 1.0,
                rx=5, tip=f"ranks {fold(b.ranks)}")
    for i, line in enumerate(b.lines):
        canvas.text(x0 + PAD, b.y + PAD / 2 + FONT + i * LINE_H, line, size=FONT, bold=i == 0, group="frame",
                    color=style.CULPRIT if (i == 0 and only_suspects) else "#222222")


def render_tree(root: StackNode, max_depth: int = 60) -> list[str]:
    """Indented lines '[0-3] func (file:line)'; a single-child chain keeps its indentation.

    A run of identical frames on one chain (recursion, or unresolved frames of one
    library) prints once with '×n'.
    """
    lines: list[str] = []

    def walk(node: StackNode, depth: int, indent: int) -> None:
        if depth > max_depth:
            return
        kids = list(node.children.values())
        for child in kids:
            repeat, last = 1, child
            while (len(last.children) == 1 and len(kids) == 1 and repeat < max_depth):
                nxt = next(iter(last.children.values()))
                if nxt.label != child.label or nxt.ranks != child.ranks:
                    break
                repeat, last = repeat + 1, nxt
            times = f" ×{repeat}" if repeat > 1 else ""
            lines.append(f"{'  ' * indent}[{fold(child.ranks)}] {child.label}{times}")
            walk(last, depth + repeat, indent + (1 if len(kids) > 1 or len(last.children) > 1 else 0))

    walk(root, 0, 0)
    return lines

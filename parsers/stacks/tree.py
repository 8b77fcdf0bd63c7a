"""Merges per-rank stacks into a prefix tree, as LLNL's STAT does, for Python and native frames.

Ranks that share a path from the outermost frame share a node, so 4,000 stacks fold
into a handful of branches and the odd rank out stands alone.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from parsers.model import ThreadStack
from parsers.ranges import fold


@dataclass
class StackNode:
    label: str
    ranks: set[int] = field(default_factory=set)
    children: dict[str, "StackNode"] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "frame": self.label,
            "ranks": sorted(self.ranks),
            "children": [c.to_dict() for c in self.children.values()],
        }


def build_tree(stacks: dict[int, ThreadStack]) -> StackNode:
    """Root node over rank -> stack (frames innermost first, as tools print them)."""
    root = StackNode("<all>")
    for rank, stack in sorted(stacks.items()):
        node = root
        node.ranks.add(rank)
        for frame in reversed(stack.frames):
            node = node.children.setdefault(frame.label, StackNode(frame.label))
            node.ranks.add(rank)
    return root


def render_tree(root: StackNode, max_depth: int = 60) -> list[str]:
    """Indented lines '[0-3] func (file:line)'; a single-child chain keeps its indentation."""
    lines: list[str] = []

    def walk(node: StackNode, depth: int, indent: int) -> None:
        if depth > max_depth:
            return
        kids = list(node.children.values())
        for child in kids:
            lines.append(f"{'  ' * indent}[{fold(child.ranks)}] {child.label}")
            walk(child, depth + 1, indent + (1 if len(kids) > 1 or len(child.children) > 1 else 0))

    walk(root, 0, 0)
    return lines

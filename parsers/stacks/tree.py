"""Merges per-rank stacks into a prefix tree, as LLNL's STAT does, for Python and native frames.

Ranks that share a path from the outermost frame share a node, so 4,000 stacks fold
into a handful of branches and the odd rank out stands alone. Frames are merged on
their short label (`parsers.stacks.labels`): load addresses and C++ template
arguments differ between processes that are in the same place, and would otherwise
give every rank a branch of its own.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from parsers.model import ThreadStack
from parsers.stacks.labels import short_label

MAX_FULL = 400  #: characters of the first full label kept beside a shortened one (JSON stays small)
#: frames of one stack in the tree: the outermost and innermost halves are kept, the middle is one node
#: that says how many were cut (a 1,500-frame recursion once overflowed every recursive reader of the tree)
MAX_TREE_DEPTH = 256


@dataclass
class StackNode:
    label: str  #: the short label: the grouping key and what is shown
    ranks: set[int] = field(default_factory=set)
    children: dict[str, "StackNode"] = field(default_factory=dict)
    full: str | None = None  #: the first rank's full label, when the short one differs

    def to_dict(self) -> dict[str, Any]:
        """The tree as nested dicts, built with a queue of nodes (no Python frame per level)."""
        root = self._one_dict()
        todo = [(self, root)]
        while todo:
            node, out = todo.pop()
            for child in node.children.values():
                made = child._one_dict()
                out["children"].append(made)
                todo.append((child, made))
        return root

    def _one_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"frame": self.label, "ranks": sorted(self.ranks)}
        if self.full:
            out["full"] = self.full
        out["children"] = []
        return out


def bounded_labels(stack: ThreadStack) -> list[str]:
    """The stack's labels, outermost first, at most MAX_TREE_DEPTH: a longer stack keeps its outer and
    inner ends, and a node between them says how many frames were cut."""
    labels = [frame.label for frame in reversed(stack.frames)]
    if len(labels) <= MAX_TREE_DEPTH:
        return labels
    keep = MAX_TREE_DEPTH // 2
    cut = len(labels) - 2 * keep
    cut_line = f"... {cut} frames cut (a stack is drawn {MAX_TREE_DEPTH} frames deep at most)"
    return labels[:keep] + [cut_line] + labels[-keep:]


def build_tree(stacks: dict[int, ThreadStack]) -> StackNode:
    """Root node over rank -> stack (frames innermost first, as tools print them).

    Each distinct frame label is shortened once (`short_label` is a function of the label alone): a fleet's ranks
    share their frames (a 511-rank fleet of C++ stacks, nccl/sigstop's: 515 ms -> 13 ms for the tree)."""
    root = StackNode("<all>")
    shorts: dict[str, str] = {}
    for rank, stack in sorted(stacks.items()):
        node = root
        node.ranks.add(rank)
        for raw in bounded_labels(stack):
            key = shorts.get(raw)
            if key is None:
                key = shorts[raw] = short_label(raw)
            child = node.children.get(key)
            if child is None:
                child = node.children[key] = StackNode(key)
                if key != raw and not key.startswith("??"):
                    child.full = raw[:MAX_FULL]
            child.ranks.add(rank)
            node = child
    return root

"""Where most ranks stand, and who is not there: the tallest bars of a count, ties included, stated once.

Why one place: the judges and the scale path each compare ranks by where they stand (a communicator's last
position, the call a position holds, the collective the main threads wait in) and call the ranks elsewhere the odd
ones out. Each broke a tie of the largest groups its own way: the class judgement read no tied bar, the merged
digest's outliers (said to people) kept the bar of the larger key as the most common and listed the other tied bar as
an outlier, the logs judge listed every tied side, the recorder judge kept the first seen. A tie is one fact, stated
here: every bar as tall as the tallest is where most stand (`tallest`), and a minority is a bar shorter than it
(`minorities`). A caller that must pick one bar of a tie (the one the others are compared with) says by what, over
this list. A rank set (a class of any size) and a count of single ranks decide alike: the rule reads sizes.
"""

from __future__ import annotations

from typing import Hashable, Mapping, TypeVar

from parsers.model.ranksets import Intervals, count, joined

K = TypeVar("K", bound=Hashable)


def tallest(sizes: Mapping[K, int]) -> list[K]:
    """The keys of the largest size, in the mapping's order: one where a majority stands, every tied one in a tie
    (none for an empty mapping)."""
    if not sizes:
        return []
    top = max(sizes.values())
    return [k for k, n in sizes.items() if n == top]


def minorities(hist: Mapping[K, Intervals]) -> Intervals:
    """The ranks of every bar of a histogram shorter than its tallest: not where most are (none where one bar holds
    every rank, or every bar ties)."""
    sizes = {k: count(iv) for k, iv in hist.items()}
    top = set(tallest(sizes))
    return joined([p for k, iv in hist.items() if k not in top for p in iv])

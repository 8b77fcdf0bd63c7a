"""Rank sets as sorted, disjoint, inclusive [lo, hi] pairs: how a class of ranks says which ranks it holds.

Why here, in the model: a class of identical ranks (`parsers.model.summaries.ClassSummary`) holds its members
as ranges ('0-4095,4097-8191'), whose size follows how scattered they are, not how many; every stage that
reads a class (the judges over classes, the focus, the fleet's tree) asks the same few questions of them.
"""

from __future__ import annotations

from typing import Iterable, Iterator

#: most ranges one rank set keeps (a set more scattered than this is cut, and its summary marked lossy)
MAX_RANGES = 4096

Intervals = list[list[int]]  #: sorted, disjoint, inclusive [lo, hi] pairs


def union(a: Intervals, b: Intervals) -> Intervals:
    """Two rank sets as intervals, joined (adjacent intervals merge); capped at MAX_RANGES intervals."""
    return joined([*a, *b])[:MAX_RANGES]


def joined(pairs: Iterable[list[int]]) -> Intervals:
    """Any [lo, hi] pairs as one rank set (sorted, overlapping and adjacent pairs joined), uncapped."""
    out: Intervals = []
    for lo, hi in sorted(pairs):
        if out and lo <= out[-1][1] + 1:
            out[-1][1] = max(out[-1][1], hi)
        else:
            out.append([lo, hi])
    return out


def of_ranks(ranks: Iterable[int]) -> Intervals:
    """Single ranks as a rank set."""
    return joined([r, r] for r in ranks)


def count(iv: Intervals) -> int:
    return sum(hi - lo + 1 for lo, hi in iv)


def fold(iv: Intervals) -> str:
    """'0-4095,4097' for people."""
    return ",".join(str(lo) if lo == hi else f"{lo}-{hi}" for lo, hi in iv)


def difference(a: Intervals, b: Intervals) -> Intervals:
    """Ranks in `a` and not in `b` (both sorted, disjoint)."""
    out: Intervals = []
    j = 0
    for lo, hi in a:
        cur = lo
        while j < len(b) and b[j][1] < cur:
            j += 1
        k = j
        while k < len(b) and b[k][0] <= hi:
            if b[k][0] > cur:
                out.append([cur, b[k][0] - 1])
            cur = max(cur, b[k][1] + 1)
            k += 1
        if cur <= hi:
            out.append([cur, hi])
    return out


def intersection(a: Intervals, b: Intervals) -> Intervals:
    """Ranks in both `a` and `b` (both sorted, disjoint)."""
    out: Intervals = []
    i = j = 0
    while i < len(a) and j < len(b):
        lo, hi = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if lo <= hi:
            out.append([lo, hi])
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return out


def ranks_of(iv: Intervals) -> Iterator[int]:
    """Each rank of a rank set, in order."""
    for lo, hi in iv:
        yield from range(lo, hi + 1)


def meets(a: Intervals, b: Intervals) -> bool:
    """Whether two rank sets share a rank (both sorted, disjoint)."""
    return bool(intersection(a, b))


def holds(rank: int | None, ranges: Intervals) -> bool:
    """Whether a rank is in a rank set."""
    return rank is not None and any(lo <= rank <= hi for lo, hi in ranges)


def is_rank(v: object) -> bool:
    """A non-negative int below 2^31 (not a bool, a float, a string or a container): a rank, a pid, a count."""
    return type(v) is int and 0 <= v < 1 << 31  # type: ignore[operator]


def well_formed(iv: object) -> bool:
    """Whether a value from outside is a rank set: at most MAX_RANGES sorted, disjoint [lo, hi] pairs of ranks."""
    if not isinstance(iv, list) or len(iv) > MAX_RANGES:
        return False
    prev = -2
    for p in iv:
        if not (isinstance(p, list) and len(p) == 2 and is_rank(p[0]) and is_rank(p[1]) and prev + 1 < p[0] <= p[1]):
            return False
        prev = p[1]
    return True

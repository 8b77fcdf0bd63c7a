"""Where most ranks stand, and who is not there: the tallest bars of a count, ties included, stated once.

Why one place: the judges and the scale path each compare ranks by where they stand (a communicator's last
position, the call a position holds, the collective the main threads wait in) and call the ranks elsewhere the odd
ones out. Each broke a tie of the largest groups its own way: the class judgement read no tied bar, the merged
digest's outliers (said to people) kept the bar of the larger key as the most common and listed the other tied bar as
an outlier, the logs judge listed every tied side, the recorder judge kept the first seen. A tie is one fact, stated
here: every bar as tall as the tallest is where most stand (`tallest`), and a minority is a bar shorter than it
(`minorities`). A caller that must pick one bar of a tie (the one the others are compared with) says by what, over
this list. A rank set (a class of any size) and a count of single ranks decide alike: the rule reads sizes.

The odd one out that went ahead (issue 26 item 2.5) is the same kind of fact, stated here once for the three judges
that compare places (the logs' positions, the main threads' stacks, the recorder's entered ops), each of which had its
own copy of the shape and of the confidence: `minority_ahead` and `ahead_confidence`. What says a majority waits on
no one (a wait-for graph, a stack outside every collective, the recorder's edges) is each judge's own evidence.
So is how sure a call mismatch's minority is (`mismatch_confidence`: the logs judge's positions, the recorder
judge's order), where the two judges each wrote the formula and the test of a count nobody could tip (`settled`),
and who the odd sides of a position are, the tie and the reference (`odd_sides`), which each also decided its own way.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, Hashable, Iterable, Mapping, TypeVar

from parsers.model.ranksets import Intervals, count, joined, of_ranks

K = TypeVar("K", bound=Hashable)
P = TypeVar("P", bound=Hashable)  #: the other side's places, of their own type (an op ahead, the many's latest or none)


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


def bars(placed: Iterable[tuple[K, int]]) -> dict[K, Intervals]:
    """(place, rank) pairs as a histogram: each place's ranks as a rank set, places in first-seen order (how a judge
    that reads ranks one by one gives the rules above their view)."""
    out: dict[K, list[int]] = {}
    for place, rank in placed:
        out.setdefault(place, []).append(rank)
    return {place: of_ranks(ranks) for place, ranks in out.items()}


def minority_ahead(ahead: Mapping[K, Intervals], behind: Mapping[P, Intervals]) -> bool:
    """The odd one out of a comparison (issue 26 item 2.5): the ranks further on (`ahead`, by place) stand at one
    place, every other rank compared (`behind`, by place) at one other place, at least two of them and more than the
    ranks ahead. Then the few went ahead (they call what the many did not reach, or the many skip what they call), and
    the many agree with each other: they are no suspects. The places are the caller's (a position, a stack class, a
    recorded op); a rank set of one rank or of 100,000 decides alike."""
    if len(ahead) != 1 or len(behind) != 1:
        return False
    n_ahead, n_behind = count(next(iter(ahead.values()))), count(next(iter(behind.values())))
    return 1 <= n_ahead < n_behind and n_behind >= 2


def ahead_confidence(ahead: Intervals, behind: Intervals) -> float:
    """How sure a claim that `ahead` went ahead of `behind` is: from 0.6, more the larger the share that agrees."""
    n_ahead, n_behind = count(ahead), count(behind)
    return round(0.6 + 0.2 * n_behind / (n_behind + n_ahead), 3)


def settled(n_major: int, n_odd: int, unseen: int | None) -> bool:
    """Whether `n_major` ranks that agree outnumber `n_odd` that differ even if every `unseen` rank (not seen at that
    place; None: not known) sided with the odd ones: a count nobody could tip."""
    return unseen is not None and n_major > n_odd + unseen


def mismatch_confidence(n_major: int, n_odd: int, unseen: int | None) -> float:
    """How sure naming `n_odd` ranks that called something else than the `n_major` that agree is: settled (from 0.6,
    more the larger the majority's share) only where the `unseen` ranks (not seen at that position; None: not known)
    could not tip the count even if all sided with the odd ones; else a lead (0.45). A tie is never settled."""
    if not settled(n_major, n_odd, unseen):
        return 0.45
    return round(0.6 + 0.35 * n_major / (n_major + n_odd), 3)


def strict_minority(n: int, size: int) -> bool:
    """Whether `n` ranks (at least one) are fewer than the rest of the `size` ranks a report saw: the reports that name
    the ranks behind (PyTorch's desync report's lagging ranks, the Flight Recorder analyzer's missing ones) are
    believed only then; where most lag, the few ahead may be the odd ones (pytorch/pytorch#152623)."""
    return 0 < n and 2 * n < size


@dataclass(frozen=True)
class OddSide(Generic[K]):
    """One side of a call mismatch at one position: the ranks that called `called`, compared with `reference` (the
    majority's call, or in a tie another tied side's), which `n_reference` ranks called. `tie`: the largest sides
    tie, so no side is the majority; `confidence` is `mismatch_confidence`'s, a lead (below the naming bar) unless
    the reference outnumbers every rank that differs even with the unseen ranks on their side."""

    called: K
    ranks: tuple[int, ...]
    reference: K
    n_reference: int
    n_seen: int  #: the ranks seen at the position, every side together
    tie: bool
    confidence: float
    settled: bool  #: `settled`: the reference outnumbers every rank that differs, the unseen ones on their side


def odd_sides(calls: Mapping[int, K], unseen: int | None) -> list[OddSide[K]]:
    """Who called something else at one position (issue 43 item 2), from each rank's call there (`calls`: rank ->
    signature) and the ranks of the group not seen there (`unseen`; None: not known). Why one rule: the logs judge
    (positions of NCCL/c10d logs) and the recorder judge (positions of its rings) each decided the sides, the tie and
    the reference their own way (the logs listed a tie, the recorder named nobody in one, and counted the odd ones
    per side or all together). Stated here: the reference is the tallest side; the odd ones are every other side,
    each as sure as a majority over all of them together is (`mismatch_confidence`); where the tallest sides tie
    there is no majority and every side is listed as a lead, each compared with another tied side, so a tie never
    names a culprit but keeps the lead. Larger sides first; none where every rank called the same."""
    groups: dict[K, list[int]] = {}
    for rank, sig in calls.items():
        groups.setdefault(sig, []).append(rank)
    if len(groups) < 2:
        return []
    sizes = {sig: len(ranks) for sig, ranks in groups.items()}
    tied = tallest(sizes)
    major, n_major, tie = tied[0], sizes[tied[0]], len(tied) > 1
    n_odd = len(calls) - n_major
    conf, sure = mismatch_confidence(n_major, n_odd, unseen), settled(n_major, n_odd, unseen)
    out = []
    for sig in sorted(sizes, key=lambda s: -sizes[s]):  # larger sides first, first seen first among equals
        if sig == major and not tie:
            continue  # the one majority is the reference, not a side
        ref = major if sig != major else tied[1]
        out.append(OddSide(sig, tuple(sorted(groups[sig])), ref, n_major, len(calls), tie, conf, sure))
    return out

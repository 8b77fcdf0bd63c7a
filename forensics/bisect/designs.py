"""Designs: how to split candidate machines into groups, round after round.

A *round* is a partition of (some of) the units under test into groups that run at
the same time; a unit sits in at most one group per round. A *unit* is what the
bisection can convict: one host, or, with a "together" topology constraint, a whole
switch/rail whose hosts must always be tested side by side.

Every design is stateless: it plans the next round from the history of rounds and the
current posterior alone. That keeps a resumed bisection on exactly the plan an
uninterrupted one would have followed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Protocol, Sequence
from parsers.input.errors import UsageError


class DesignError(UsageError):
    """A design cannot produce a valid round (e.g. too few known-good hosts to pad)."""


@dataclass(frozen=True)
class Unit:
    """The smallest thing a bisection convicts or clears: usually one host."""

    name: str
    hosts: tuple[str, ...]


@dataclass
class Group:
    """One job of a round: the units under test, plus known-good padding hosts."""

    units: list[int]  #: indices into the bisection's unit list
    padding: list[str] = field(default_factory=list)


@dataclass
class RoundPlan:
    """The groups of one round and why they were chosen (kind)."""

    kind: str
    groups: list[Group]


@dataclass
class SizeRule:
    """Which group sizes (in hosts) a test job accepts, e.g. a multiple of 8 GPUs' hosts."""

    min_size: int = 1
    multiple: int = 1
    max_size: int | None = None

    def valid(self, size: int) -> bool:
        """True when a job of `size` hosts may run."""
        if size < self.min_size or size % self.multiple:
            return False
        return self.max_size is None or size <= self.max_size

    def smallest_valid(self, size: int) -> int:
        """The smallest valid size >= `size`; padding fills the difference."""
        target = max(size, self.min_size)
        target = -(-target // self.multiple) * self.multiple
        if self.max_size is not None and target > self.max_size:
            raise DesignError(f"a group of {size} host(s) cannot be padded to a valid size "
                              f"(min {self.min_size}, multiple of {self.multiple}, max {self.max_size})")
        return target


@dataclass
class Tested:
    """A finished job as a design sees it: which units, and whether it failed."""

    units: list[int]
    failed: bool


@dataclass
class PlanContext:
    """Everything a design may look at to plan the next round."""

    units: list[Unit]
    rounds_done: int
    history: list[list[Tested]]  #: per round, its finished jobs
    posterior: list[float]
    undecided: list[int]
    good: list[int]  #: units decided good (usable as padding)
    bad: list[int] = field(default_factory=list)  #: units decided bad
    size_rule: SizeRule = field(default_factory=SizeRule)
    spare_good_hosts: list[str] = field(default_factory=list)  #: known-good hosts outside the bisection
    max_parallel: int | None = None
    first_round: RoundPlan | None = None  #: a forced first round (e.g. suspects from bundles)


class Design(Protocol):
    """Plans rounds; returns None when it has nothing more to test."""

    name: str

    def next_round(self, ctx: PlanContext) -> RoundPlan | None: ...


# ---------------------------------------------------------------- grid geometry


def grid_shape(n: int) -> tuple[int, int]:
    """Rows r and columns c with r <= c, r*c >= n and both near sqrt(n): 48 -> (6, 8)."""
    if n < 1:
        raise DesignError("no hosts to test")
    r = max(1, math.isqrt(n))
    c = math.ceil(n / r)
    return r, c


def grid_partitions(n: int, rows: int | None = None,
                    cols: int | None = None) -> tuple[list[list[int]], list[list[int]]]:
    """The hand method's two partitions of positions 0..n-1, row-major in an r x c grid.

    Round one is r groups of c (the rows), round two c groups of at most r (the
    columns); a unit is identified by the pair (row, column) it failed in.
    """
    if rows is None and cols is None:
        rows, cols = grid_shape(n)
    elif rows is None:
        rows = math.ceil(n / cols)
    elif cols is None:
        cols = math.ceil(n / rows)
    if rows * cols < n:
        raise DesignError(f"a {rows} x {cols} grid holds {rows * cols} hosts, fewer than {n}")
    row_groups = [list(range(i * cols, min(n, (i + 1) * cols))) for i in range(rows)]
    col_groups = [list(range(j, n, cols)) for j in range(cols)]
    return [g for g in row_groups if g], [g for g in col_groups if g]


def coprime_modulus(n: int, cols: int, rows: int) -> int:
    """Smallest m coprime to both grid sides with m*cols >= n, so (col, residue) is unique."""
    m = max(2, math.ceil(n / cols))
    while math.gcd(m, cols) != 1 or math.gcd(m, rows) != 1:
        m += 1
    return m


def residue_partition(n: int, modulus: int) -> list[list[int]]:
    """Positions grouped by index mod `modulus`: the co-prime third partition."""
    groups = [list(range(res, n, modulus)) for res in range(modulus)]
    return [g for g in groups if g]


# ---------------------------------------------------------------- padding


def pad_round(plan: RoundPlan, units: Sequence[Unit], ctx: PlanContext) -> RoundPlan:
    """Pad every group to a valid size with known-good hosts not used elsewhere in the round.

    Padding comes first from hosts the user vouched for, then from units this
    bisection has already cleared; a padding host never runs in two groups at once.
    """
    rule = ctx.size_rule
    used = {h for g in plan.groups for u in g.units for h in units[u].hosts}
    pool = [h for h in ctx.spare_good_hosts if h not in used]
    pool += [h for u in ctx.good for h in units[u].hosts if h not in used and h not in pool]
    for group in plan.groups:
        size = sum(len(units[u].hosts) for u in group.units) + len(group.padding)
        need = rule.smallest_valid(size) - size
        if need > len(pool):
            raise DesignError(
                f"round '{plan.kind}': a group of {size} host(s) needs {need} known-good padding "
                f"host(s) to reach a valid size, only {len(pool)} available (give --good-hosts)")
        group.padding += pool[:need]
        del pool[:need]
    return plan


def padding_per_singleton(units: Sequence[Unit], idx: int, rule: SizeRule) -> int:
    """How many padding hosts unit `idx` needs to run alone."""
    size = len(units[idx].hosts)
    return rule.smallest_valid(size) - size


def isolation_round(ctx: PlanContext, kind: str = "isolate", pack_mass: float = 0.2) -> RoundPlan:
    """Test every suspect unit alone, and clear the barely-suspect ones in packs.

    This is what beats the hand method: after two grid rounds the suspects are few,
    and one parallel round of single-unit jobs separates the bad from their
    row/column companions (and re-tests them when a test may be flaky). Units whose
    P(bad) is small share packs whose summed P(bad) stays under `pack_mass`, so one
    passing job clears many of them at once.
    """
    todo = sorted(ctx.undecided, key=lambda u: -ctx.posterior[u])
    alone_units = [u for u in todo if ctx.posterior[u] >= pack_mass / 2]
    packs: list[list[int]] = []
    mass = 0.0
    for u in todo[len(alone_units):]:
        if not packs or mass + ctx.posterior[u] > pack_mass:
            packs.append([])
            mass = 0.0
        packs[-1].append(u)
        mass += ctx.posterior[u]
    pool = len(ctx.spare_good_hosts) + sum(len(ctx.units[u].hosts) for u in ctx.good)
    per = max((padding_per_singleton(ctx.units, u, ctx.size_rule) for u in alone_units), default=0)
    capacity = len(alone_units) if per == 0 else pool // per
    if ctx.max_parallel:
        capacity = min(capacity, max(1, ctx.max_parallel - len(packs)))
    if capacity >= len(alone_units):
        groups = [Group([u]) for u in alone_units]
    else:
        # Too few jobs or padding hosts to run all alone: the likeliest run alone, the
        # rest share packs (a pack holds its own hosts, so it needs less padding).
        alone = max(0, capacity - 1)
        groups = [Group([u]) for u in alone_units[:alone]]
        rest = alone_units[alone:]
        size = math.ceil(len(rest) / max(1, capacity - alone))
        groups += [Group(rest[i:i + size]) for i in range(0, len(rest), size)]
    groups += [Group(p) for p in packs]
    if ctx.max_parallel and len(groups) > ctx.max_parallel:
        groups = groups[: ctx.max_parallel]  # the rest wait for the next round
    return pad_round(RoundPlan(kind, groups), ctx.units, ctx)


# ---------------------------------------------------------------- designs


@dataclass
class HandGrid:
    """The hand method: r x c then c x r, and nothing more (decoded by intersection)."""

    rows: int | None = None
    cols: int | None = None
    name: str = "hand"

    def next_round(self, ctx: PlanContext) -> RoundPlan | None:
        if ctx.rounds_done >= 2:
            return None
        row_groups, col_groups = grid_partitions(len(ctx.units), self.rows, self.cols)
        chosen = row_groups if ctx.rounds_done == 0 else col_groups
        kind = "rows" if ctx.rounds_done == 0 else "columns"
        return pad_round(RoundPlan(kind, [Group(g) for g in chosen]), ctx.units, ctx)


@dataclass
class GridDesign:
    """Grid rounds, then (if many candidates remain) a co-prime residue round, then isolation.

    Rounds 1 and 2 are the hand method's. A third round partitions all units by index
    mod m (m coprime to both grid sides) when the candidates outnumber the single-unit
    jobs one round can hold, or always when `third='residue'`. After that every
    undecided unit is tested alone (padded) and re-tested until decided.
    """

    rows: int | None = None
    cols: int | None = None
    third: str = "auto"  #: 'auto' | 'residue' | 'none'
    name: str = "grid"

    def next_round(self, ctx: PlanContext) -> RoundPlan | None:
        done = ctx.rounds_done
        if done < 2:
            return HandGrid(self.rows, self.cols).next_round(ctx)
        if not ctx.undecided:
            return None
        if done == 2 and self._want_residue(ctx):
            n = len(ctx.units)
            rows, cols = self.rows, self.cols
            if rows is None or cols is None:
                row_groups, col_groups = grid_partitions(n, rows, cols)
                rows, cols = len(row_groups), len(col_groups)
            m = coprime_modulus(n, cols, rows)
            plan = RoundPlan(f"residues mod {m}", [Group(g) for g in residue_partition(n, m)])
            return pad_round(plan, ctx.units, ctx)
        return isolation_round(ctx)

    def _want_residue(self, ctx: PlanContext) -> bool:
        if self.third == "residue":
            return True
        if self.third == "none":
            return False
        limit = ctx.max_parallel or len(ctx.units)
        return len(ctx.undecided) > max(limit, 1) or len(ctx.undecided) > len(ctx.units) // 2


@dataclass
class AdaptiveSplit:
    """Binary splitting for clusters that run one (or a few) group jobs at a time.

    Each step takes the most recent failed job that no convicted unit explains and that
    still holds undecided units, and tests the first half of them (a single undecided
    unit is re-tested alone); with no such job it tests all undecided units together,
    which clears them at once when the bad ones are already found. The posterior, not the last
    answer, decides, so a flaky failure only costs a few extra jobs.
    """

    parallel: int = 1
    name: str = "adaptive"

    def next_round(self, ctx: PlanContext) -> RoundPlan | None:
        undecided = set(ctx.undecided)
        if not undecided:
            return None
        convicted = set(ctx.bad)
        groups: list[Group] = []
        taken: set[int] = set()
        for round_jobs in reversed(ctx.history):
            for job in round_jobs:
                if not job.failed or convicted.intersection(job.units):
                    continue
                open_units = [u for u in job.units if u in undecided and u not in taken]
                if not open_units:
                    continue
                half = open_units if len(open_units) == 1 else open_units[: len(open_units) // 2]
                groups.append(Group(half))
                taken.update(open_units)
                if len(groups) >= self.parallel:
                    break
            if len(groups) >= self.parallel:
                break
        if not groups:
            groups = [Group(sorted(undecided))]
        return pad_round(RoundPlan("split", groups), ctx.units, ctx)


@dataclass
class ForcedFirst:
    """Wraps a design so that a given round (e.g. bundle suspects alone) runs first."""

    inner: Design
    name: str = ""

    def __post_init__(self) -> None:
        self.name = self.name or self.inner.name

    def next_round(self, ctx: PlanContext) -> RoundPlan | None:
        if ctx.first_round is None:
            return self.inner.next_round(ctx)
        if ctx.rounds_done == 0:
            return pad_round(ctx.first_round, ctx.units, ctx)
        shifted = PlanContext(**{**ctx.__dict__, "rounds_done": ctx.rounds_done - 1,
                                 "history": ctx.history[1:], "first_round": None})
        return self.inner.next_round(shifted)


DESIGNS = {
    "grid": lambda **kw: GridDesign(**kw),
    "grid3": lambda **kw: GridDesign(third="residue", name="grid3", **kw),
    "hand": lambda **kw: HandGrid(**kw),
    "adaptive": lambda **kw: AdaptiveSplit(**{k: v for k, v in kw.items() if k == "parallel"}),
}


def make_design(name: str, rows: int | None = None, cols: int | None = None, parallel: int = 1) -> Design:
    """A design by name: grid (default), grid3 (always a residue round), hand, adaptive."""
    if name not in DESIGNS:
        raise DesignError(f"unknown design {name!r}; choose from {', '.join(sorted(DESIGNS))}")
    if name == "adaptive":
        return AdaptiveSplit(parallel=parallel)
    return DESIGNS[name](rows=rows, cols=cols)


# ---------------------------------------------------------------- topology


def units_for_topology(hosts: Sequence[str], labels: dict[str, str] | None, mode: str | None) -> list[Unit]:
    """Turn hosts into units, honouring a topology constraint.

    together: every label (switch, rail) becomes one unit, so no job ever splits it and
    the verdict names whole switches. apart: hosts stay units but are ordered round-robin
    across labels, so consecutive positions (a grid row, an adaptive half) mix labels
    rather than filling a group from one switch.
    """
    if not labels or not mode:
        return [Unit(h, (h,)) for h in hosts]
    if mode == "together":
        order: dict[str, list[str]] = {}
        for h in hosts:
            order.setdefault(labels.get(h, h), []).append(h)
        return [Unit(lab, tuple(hs)) for lab, hs in order.items()]
    if mode == "apart":
        buckets: dict[str, list[str]] = {}
        for h in hosts:
            buckets.setdefault(labels.get(h, h), []).append(h)
        lists = list(buckets.values())
        mixed = [lst[i] for i in range(max(map(len, lists), default=0)) for lst in lists if i < len(lst)]
        return [Unit(h, (h,)) for h in mixed]
    raise DesignError(f"unknown topology mode {mode!r} (together or apart)")


def topology_violations(plan: RoundPlan, units: Sequence[Unit], labels: dict[str, str], mode: str) -> int:
    """How many groups of a round break the constraint (apart: share a label twice)."""
    if mode != "apart":
        return 0
    bad = 0
    for g in plan.groups:
        seen = [labels.get(h, h) for u in g.units for h in units[u].hosts]
        bad += len(seen) != len(set(seen))
    return bad

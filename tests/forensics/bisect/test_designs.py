"""Designs: partitions are partitions, sizes are valid, padding is honest."""

from __future__ import annotations

import pytest

from forensics.bisect import designs
from forensics.bisect.designs import (AdaptiveSplit, DesignError, GridDesign, Group, HandGrid, PlanContext,
                                      RoundPlan, SizeRule, Unit)
from forensics.bisect.designs import Tested as Job


def ctx(n: int, **kw) -> PlanContext:
    units = [Unit(f"n{i:03d}", (f"n{i:03d}",)) for i in range(n)]
    base = dict(units=units, rounds_done=0, history=[], posterior=[1 / n] * n, undecided=list(range(n)), good=[])
    base.update(kw)
    return PlanContext(**base)


def assert_partition(plan: RoundPlan, n: int) -> None:
    seen = [u for g in plan.groups for u in g.units]
    assert sorted(seen) == sorted(set(seen)), "a unit ran twice in one round"
    assert sorted(seen) == list(range(n))


def test_48_is_six_by_eight_then_eight_by_six():
    c = ctx(48)
    first = HandGrid().next_round(c)
    assert [len(g.units) for g in first.groups] == [8] * 6
    c.rounds_done = 1
    second = HandGrid().next_round(c)
    assert [len(g.units) for g in second.groups] == [6] * 8
    # every pair (row, column) names exactly one host
    pairs = {(i, j) for i, r in enumerate(first.groups) for j, col in enumerate(second.groups)
             if set(r.units) & set(col.units)}
    assert len(pairs) == 48


@pytest.mark.parametrize("n", [1, 2, 7, 13, 48, 50, 97, 512])
def test_grid_rounds_are_partitions(n):
    rows, cols = designs.grid_partitions(n)
    for groups in (rows, cols):
        flat = sorted(u for g in groups for u in g)
        assert flat == list(range(n))
    assert all(len(set(r) & set(c)) <= 1 for r in rows for c in cols)


def test_coprime_residue_separates_what_the_grid_cannot():
    rows, cols = designs.grid_partitions(48)
    m = designs.coprime_modulus(48, len(cols), len(rows))
    assert m == 7
    res = designs.residue_partition(48, m)
    assert sorted(u for g in res for u in g) == list(range(48))
    # (column, residue) is unique per host: CRT with m coprime to 8 and 7*8 >= 48
    key = {(i % 8, i % m) for i in range(48)}
    assert len(key) == 48


def test_padding_reaches_a_multiple_with_distinct_known_good_hosts():
    c = ctx(10, size_rule=SizeRule(min_size=2, multiple=4), spare_good_hosts=[f"good{i}" for i in range(12)])
    plan = HandGrid().next_round(c)  # 3 x 4 grid: rows of 4, 4, 2
    assert_partition(plan, 10)
    padding = [h for g in plan.groups for h in g.padding]
    assert len(padding) == len(set(padding))
    for g in plan.groups:
        assert c.size_rule.valid(len(g.units) + len(g.padding))
        assert all(h.startswith("good") for h in g.padding)


def test_padding_without_enough_good_hosts_is_a_clear_error():
    c = ctx(10, size_rule=SizeRule(multiple=4))
    with pytest.raises(DesignError, match="known-good padding"):
        HandGrid().next_round(c)


def test_size_rule():
    rule = SizeRule(min_size=2, multiple=4, max_size=8)
    assert [rule.smallest_valid(s) for s in (1, 4, 5)] == [4, 4, 8]
    assert not rule.valid(6) and rule.valid(8)
    with pytest.raises(DesignError):
        rule.smallest_valid(9)


def test_grid_isolates_candidates_padded_from_cleared_hosts():
    n = 8
    post = [0.0] * n
    post[1] = post[6] = 0.5
    post[2] = post[5] = 0.5
    c = ctx(n, rounds_done=2, posterior=post, undecided=[1, 2, 5, 6], good=[0, 3, 4, 7],
            size_rule=SizeRule(min_size=2))
    plan = GridDesign().next_round(c)
    assert plan.kind == "isolate"
    assert sorted(g.units[0] for g in plan.groups) == [1, 2, 5, 6]
    assert all(len(g.units) == 1 and len(g.padding) == 1 for g in plan.groups)
    pads = [g.padding[0] for g in plan.groups]
    assert len(set(pads)) == 4 and set(pads) <= {"n000", "n003", "n004", "n007"}


def test_grid_packs_barely_suspect_hosts_and_respects_max_parallel():
    post = [0.5, 0.01, 0.01, 0.01, 0.01, 0.5]
    c = ctx(6, rounds_done=3, posterior=post, undecided=list(range(6)))
    plan = GridDesign().next_round(c)
    alone = [g.units for g in plan.groups if len(g.units) == 1]
    assert sorted(alone) == [[0], [5]]
    assert sorted(u for g in plan.groups for u in g.units) == list(range(6))
    c.max_parallel = 2
    assert len(GridDesign().next_round(c).groups) == 2


def test_grid3_always_adds_a_residue_round():
    c = ctx(48, rounds_done=2, undecided=[3])
    c.posterior[3] = 0.5
    plan = designs.make_design("grid3").next_round(c)
    assert plan.kind.startswith("residues mod 7")
    assert_partition(plan, 48)


def test_adaptive_halves_the_last_unexplained_failure():
    design = AdaptiveSplit()
    c = ctx(8)
    assert design.next_round(c).groups[0].units == list(range(8))
    c.history = [[Job(list(range(8)), True)]]
    assert design.next_round(c).groups[0].units == [0, 1, 2, 3]
    # once a convicted unit explains the failure, the rest are tested together
    c.bad, c.undecided = [5], [4, 6, 7]
    assert design.next_round(c).groups[0].units == [4, 6, 7]


def test_topology_together_makes_units_and_apart_mixes():
    hosts = [f"h{i}" for i in range(8)]
    labels = {h: f"sw{i // 4}" for i, h in enumerate(hosts)}
    together = designs.units_for_topology(hosts, labels, "together")
    assert [u.name for u in together] == ["sw0", "sw1"] and together[0].hosts == tuple(hosts[:4])
    apart = designs.units_for_topology(hosts, labels, "apart")
    assert [u.name for u in apart][:2] == ["h0", "h4"]
    plan = RoundPlan("rows", [Group([0, 1]), Group([2, 3]), Group([4, 5]), Group([6, 7])])
    assert designs.topology_violations(plan, apart, labels, "apart") == 0

"""The straggler rules (parsers.judges.stragglers) on stamps laid out as the sources write them.

The real cases are tests/integration/device/test_h200_issue14_15.py (NCCL 2.28.9 on the H200);
these pin the rules themselves: noise never names anyone, one late rank is a straggler, every
rank of one host late is a slow host, 'everybody late' is the job's pace, and a rank's own
wait cancels the steady offsets with which ranks (or their clocks) differ.
"""

from __future__ import annotations

import random

from parsers.judges.stragglers import CLOCK_RESOLUTION_MS, FINE_RESOLUTION_MS, TimedOps, judge_ops

HOSTS = {r: f"node{r // 2}" for r in range(8)}  # two ranks per host


def _ops(late: dict[int, float], ranks: int = 8, ops: int = 40, jitter_ms: float = 1.0, seed: int = 3,
         offset_ms: dict[int, float] | None = None, with_done: bool = False,
         resolution_ms: float = CLOCK_RESOLUTION_MS) -> TimedOps:
    """Each op: rank r enters with jitter + its lateness; all complete when the last arrives. Rank r's
    stamps are `offset_ms` off (its clock, or when it notices the previous op's end): both of them."""
    rng = random.Random(seed)
    out = {}
    tick = resolution_ms

    def stamp(ms: float) -> int:
        return int(tick * int(ms / tick) * 1e6)

    for q in range(ops):
        base = 1000.0 + q * 100
        enter = {r: base + rng.gauss(0, jitter_ms) + late.get(r, 0.0) for r in range(ranks)}
        done = max(enter.values()) + 0.2
        off = offset_ms or {}
        out[("0xab", "AllReduce", q)] = {
            r: (stamp(t + off.get(r, 0.0)), stamp(done + off.get(r, 0.0) + rng.gauss(0, 0.1)) if with_done else None)
            for r, t in enter.items()}
    return TimedOps("test stamps", out, resolution_ms)


def test_noise_names_nobody():
    res = judge_ops(_ops({}), HOSTS)
    assert res.late == [] and res.ops == 40 and "no straggler" in res.describe()


def test_one_late_rank_is_a_straggler():
    res = judge_ops(_ops({5: 30.0}), HOSTS)
    assert res.late == [5] and res.slow_host is None and res.measure == "enter"
    assert res.last_share[5] > 0.9 and "rank 5 (node2)" in res.describe()


def test_every_rank_of_one_host_late_is_a_slow_host():
    res = judge_ops(_ops({2: 30.0, 3: 30.0}), HOSTS)
    assert res.late == [2, 3] and res.slow_host == "node1"


def test_enter_times_below_the_floor_are_not_named():
    assert judge_ops(_ops({5: 6.0}), HOSTS).late == []


def test_most_ranks_late_is_the_pace_of_the_job():
    res = judge_ops(_ops({r: 40.0 for r in range(5)}), HOSTS)
    assert res.late == []


def test_too_few_operations_are_not_judged():
    res = judge_ops(_ops({5: 300.0}, ops=4), HOSTS)
    assert res.late == [] and "too few" in res.describe()


def test_own_waits_cancel_steady_offsets():
    """A rank whose enter stamps are steadily 20 ms off (its clock, or when it notices the last op's end)
    is a straggler by enter times but not by its own wait: it waits as long as everyone else."""
    offsets = {1: 20.0}
    by_enter = judge_ops(_ops({}, offset_ms=offsets, resolution_ms=FINE_RESOLUTION_MS), HOSTS)
    by_wait = judge_ops(_ops({}, offset_ms=offsets, with_done=True, resolution_ms=FINE_RESOLUTION_MS), HOSTS)
    assert by_enter.measure == "enter" and by_enter.late == [1]  # what enter times alone would claim
    assert by_wait.measure == "wait" and by_wait.late == []
    late = judge_ops(_ops({6: 5.0}, offset_ms={6: -3.0, 0: 3.0}, with_done=True,
                          resolution_ms=FINE_RESOLUTION_MS, jitter_ms=0.3), HOSTS)
    assert late.late == [6] and 4.0 < late.lateness_ms[6] < 6.0 and "own wait" in late.describe()


def test_waits_on_a_coarse_clock_find_one_tick():
    """4 ms ticks: a 5 ms straggler's median wait deficit is one tick; healthy ranks' is 0."""
    res = judge_ops(_ops({6: 5.0}, with_done=True, jitter_ms=0.3), HOSTS)
    assert res.late == [6] and res.threshold_ms == CLOCK_RESOLUTION_MS
    assert judge_ops(_ops({}, with_done=True, jitter_ms=0.3), HOSTS).late == []

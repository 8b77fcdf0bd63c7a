"""The straggler rules (parsers.judges.stragglers) on enter times laid out as the recorder stamps them.

The real cases are tests/integration/device/test_h200_issue15 (NCCL 2.28.9 on the H200); these pin
the rules themselves: noise never names anyone, one late rank is a straggler, every rank of one
host late is a slow host, and 'everybody late' is the job's pace.
"""

from __future__ import annotations

import random

from parsers.judges.stragglers import judge_enter_times


def _times(late: dict[int, float], ranks: int = 8, ops: int = 40, jitter_ms: float = 1.0, seed: int = 3):
    rng = random.Random(seed)
    out = {}
    for q in range(ops):
        out[("0xab", "AllReduce", q)] = {r: int((q * 100 + rng.gauss(0, jitter_ms) + late.get(r, 0.0)) * 1e6)
                                         for r in range(ranks)}
    return out


HOSTS = {r: f"node{r // 2}" for r in range(8)}  # two ranks per host


def test_noise_names_nobody():
    res = judge_enter_times(_times({}), HOSTS, resolution_ms=4.0)
    assert res.late == [] and res.ops == 40 and "no straggler" in res.describe()


def test_one_late_rank_is_a_straggler():
    res = judge_enter_times(_times({5: 30.0}), HOSTS, resolution_ms=4.0)
    assert res.late == [5] and res.slow_host is None
    assert res.last_share[5] > 0.9 and "rank 5 (node2)" in res.describe()


def test_every_rank_of_one_host_late_is_a_slow_host():
    res = judge_enter_times(_times({2: 30.0, 3: 30.0}), HOSTS, resolution_ms=4.0)
    assert res.late == [2, 3] and res.slow_host == "node1"


def test_below_three_clock_ticks_is_not_named():
    assert judge_enter_times(_times({5: 6.0}), HOSTS, resolution_ms=4.0).late == []


def test_most_ranks_late_is_the_pace_of_the_job():
    res = judge_enter_times(_times({r: 40.0 for r in range(5)}), HOSTS, resolution_ms=4.0)
    assert res.late == []


def test_too_few_operations_are_not_judged():
    res = judge_enter_times(_times({5: 300.0}, ops=4), HOSTS)
    assert res.late == [] and "too few" in res.describe()

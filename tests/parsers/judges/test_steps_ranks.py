"""Across ranks (parsers.judges.step_ranks): a straggler rank or a job-wide slowdown, from arm()'s real step series.

Fixtures: tests/fixtures/straggler/README.md (real 4-rank gloo runs: rank 2 late by 0.3 s a
step, and a healthy run). Derived cases (a column dropped, a slowdown laid on every rank)
start from those real series and say what they change.
"""

from __future__ import annotations

import dataclasses

from hf_testpaths import FIXTURES
from parsers.judges.step_ranks import ARRIVAL, OUTSIDE, compare_ranks
from parsers.steps.series import parse_series, read_series
from facts import says


DIR = FIXTURES / "straggler"


def _series(run: str) -> dict:
    return {r: read_series(DIR / run / f"steps-rank{r}.csv") for r in range(4)}


def test_the_late_rank_is_named_from_arrival_times():
    got = compare_ranks(_series("straggle"))
    assert got.source == ARRIVAL and got.late == [2] and got.found.slow_host is None
    assert 250 <= got.found.lateness_ms[2] <= 400
    text = got.describe()
    assert text.startswith("rank 2 ") and "first collectives" in text
    assert "forensics.arm() step series" in text
    assert got.to_dict()["files"]["2"].endswith("steps-rank2.csv")


def test_a_healthy_run_names_no_one():
    got = compare_ranks(_series("healthy"))
    assert got.source == ARRIVAL and got.found.ops >= 100 and got.late == []
    assert got.describe().startswith("no straggler")


def test_without_arrival_times_the_time_outside_collectives_names_the_same_rank():
    series = {r: dataclasses.replace(s, first_enter=[None] * len(s.seconds)) for r, s in _series("straggle").items()}
    got = compare_ranks(series)
    assert got.source == OUTSIDE and got.late == [2]
    assert says([got.describe()], "rank 2", "outside collectives")


def test_a_slow_host_when_both_late_ranks_share_one():
    series = _series("straggle")
    # derived: rank 3 made as late as rank 2 (its arrivals replaced by rank 2's), both on host b
    series[3] = dataclasses.replace(series[3], first_enter=list(series[2].first_enter))
    got = compare_ranks(series, hosts={0: "a", 1: "a", 2: "b", 3: "b"})
    # issue 26 (changed): from arrival times alone, ranks' steady offsets are the job's noise; with two of four
    # ranks 300 ms apart from the other two, that spread is itself 300 ms, so neither half is named
    assert got.late == [] and got.found.threshold_ms > 300
    # with more ranks on time, the same two late ranks stand out and share host b
    for r in (4, 5, 6, 7):
        series[r] = dataclasses.replace(series[r % 2], source=f"derived-rank{r}")
    got = compare_ranks(series, hosts={0: "a", 1: "a", 2: "b", 3: "b", 4: "c", 5: "c", 6: "d", 7: "d"})
    assert got.late == [2, 3] and got.found.slow_host == "b" and got.describe().startswith("host b (ranks 2-3)")


def test_a_slowdown_on_every_rank_is_job_wide_not_a_straggler():
    series = _series("healthy")
    # derived: steps 60-109 of every rank last 1.5x longer (a throttled stretch); arrivals keep their order
    slowed = {r: dataclasses.replace(s, seconds=[d * 1.5 if 60 <= st < 110 else d for st, d in zip(s.steps, s.seconds)])
              for r, s in series.items()}
    got = compare_ranks(slowed)
    assert got.late == [] and "throttle-plateau" in [f.kind for f in got.job_wide]
    assert "job-wide:" in got.describe() and got.describe().startswith("no straggler")


def test_old_series_without_per_step_collective_times_cannot_tell():
    old = {r: parse_series("step,seconds,end_unix_time\n" + "".join(f"{i},0.5,{100 + i}\n" for i in range(30)),
                           f"r{r}.csv")
           for r in range(4)}
    got = compare_ranks(old)
    assert got.source == "" and got.late == [] and "cannot tell a straggler" in got.describe()


def test_series_reader_keeps_the_new_columns_aligned_with_steps():
    s = parse_series("step,seconds,end_unix_time,collective_seconds,first_enter_unix\n"
                     "1,0.5,10.5,0.1,10.2\n2,0.5,11.0,,\n3,0.4,11.4,nan,inf\n")
    assert s.collective_seconds == [0.1, None, None] and s.first_enter == [10.2, None, None]

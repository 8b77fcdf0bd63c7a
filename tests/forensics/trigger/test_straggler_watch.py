"""The straggler trigger's pure parts (forensics/trigger/straggler.py), on arrivals from real gloo runs.

The arrivals are the first_enter_unix columns of tests/fixtures/straggler (see its README),
fed in windows the way rank 0 reads them from the store.
"""

from __future__ import annotations

from forensics.trigger.straggler import PUBLISH_STEPS, StragglerWatch, decode, encode
from hf_testpaths import FIXTURES
from parsers.steps.series import read_series

DIR = FIXTURES / "straggler"


def _arrivals(run: str) -> dict[int, list[tuple[int, float]]]:
    out = {}
    for r in range(4):
        s = read_series(DIR / run / f"steps-rank{r}.csv")
        out[r] = [(st, t) for st, t in zip(s.steps, s.first_enter) if t is not None]
    return out


def _window(arrivals: dict, end: int, size: int = 20) -> dict:
    return {r: [(st, t) for st, t in pairs if end - size <= st < end] for r, pairs in arrivals.items()}


def test_fires_once_the_same_rank_was_late_in_persist_checks_in_a_row():
    watch = StragglerWatch(late_ms=50, persist=3)
    arrivals = _arrivals("straggle")
    alarms = [watch.observe(_window(arrivals, end), {r: "vm" for r in range(4)}, end) for end in (20, 26, 32)]
    assert alarms[:2] == [None, None]
    alarm = alarms[2]
    assert alarm.kind == "straggler" and alarm.ranks == (2,) and "rank 2 (vm)" in alarm.message
    assert 0.25 <= alarm.waited <= 0.4


def test_a_healthy_job_never_fires_and_a_threshold_above_the_lag_does_not_either():
    watch = StragglerWatch(late_ms=50, persist=1)
    healthy = _arrivals("healthy")
    assert all(watch.observe(_window(healthy, end), {}) is None for end in range(20, 150, 5))
    high = StragglerWatch(late_ms=500, persist=1)
    assert high.observe(_window(_arrivals("straggle"), 40), {}) is None


def test_too_few_common_steps_judge_nothing():
    watch = StragglerWatch(late_ms=50, persist=1)
    assert watch.observe(_window(_arrivals("straggle"), 30, size=4), {}) is None
    assert watch.observe(_window(_arrivals("straggle"), 30), {}) is not None  # the same run, enough steps: fires


def test_the_streak_restarts_when_the_late_rank_changes():
    watch = StragglerWatch(late_ms=50, persist=2)
    straggle = _arrivals("straggle")
    swapped = {({2: 1, 1: 2}.get(r, r)): v for r, v in straggle.items()}  # rank 1 takes rank 2's arrivals
    assert watch.observe(_window(straggle, 30), {}) is None
    assert watch.observe(_window(swapped, 36), {}) is None  # another rank: a new streak of 1
    assert watch.observe(_window(swapped, 42), {}).ranks == (1,)


def test_published_values_round_trip_and_junk_is_skipped():
    pairs = [(5, 1_796_114_215_701_265_000), (6, 1_796_114_215_759_020_000)]
    got = decode(encode(pairs).encode())
    # within 1 us
    assert [st for st, _ in got] == [5, 6] and all(abs(t * 1e9 - ns) < 1e3 for (_, t), (_, ns) in zip(got, pairs))
    assert decode(b"7:12 x:1 8:-3 9:abc \xff\xfe 10:20") == [(7, 12e-9), (10, 20e-9)]
    assert len(decode(" ".join(f"{i}:{i}" for i in range(100_000)))) <= PUBLISH_STEPS * 4


def test_published_steps_carry_durations_and_become_the_bundles_step_series(tmp_path):
    """Rows with the step's seconds and its time inside collectives round-trip through the store value
    and are written as the trigger's CSV, which `forensics steps` and `analyze` read back."""
    from forensics.trigger.straggler import arrivals_of, decode_rows, write_series

    rows = [(5, 1_796_114_215_701_265_000, 0.125, 0.1), (6, 1_796_114_215_826_020_000, None, 0.0),
            (7, 1_796_114_215_951_020_000, 0.124999, 0.05)]
    got = decode_rows(encode(rows))
    rounded = [(s, None if sec is None else round(sec, 6), None if c is None else round(c, 6)) for s, _t, sec, c in got]
    assert rounded == [(5, 0.125, 0.1), (6, None, None), (7, 0.124999, 0.05)]  # no duration: published as step:ns
    assert decode_rows(b"1:2:3 4:5:x:6 7:8:9:10") == [(7, 8e-9, 9e-6, 10e-6)]  # 3 fields or junk: skipped
    assert arrivals_of({2: got})[2] == [(s, t) for s, t, _a, _b in got]
    (path,) = write_series(tmp_path, {2: got, 3: [(1, 1.0, None, None)]})  # rank 3 has no duration: no file
    series = read_series(path)
    assert path.name == "steps-rank2.csv" and series.steps == [5, 7] and series.collective_seconds == [0.1, 0.05]
    assert abs(series.first_enter[0] - 1_796_114_215.701265) < 1e-5

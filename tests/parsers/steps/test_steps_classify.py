"""The step-pattern classifier on generated series of each shape, and the series readers."""

from __future__ import annotations

import random

import pytest

from parsers.steps.classify import Settings, classify
from parsers.steps.series import SeriesError, StepSeries, parse_series

R = random.Random(7)


def flat(n, base=1.0, sd=0.01):
    return [base + R.gauss(0, sd) for _ in range(n)]


def kinds(series, settings=None):
    return [f.kind for f in classify(series, settings or Settings())]


def test_healthy_series_has_no_finding():
    assert kinds(StepSeries(flat(300))) == []


def test_periodic_slow_steps():
    s = flat(300)
    for i in range(49, 300, 50):
        s[i] = 4.0
    found = classify(StepSeries(s))
    assert found[0].kind == "periodic-slow" and "every 50 steps" in found[0].title
    assert any("checkpoint" in c for c in found[0].causes)


def test_rare_random_slow_steps():
    s = flat(300)
    for i in (37, 151, 260):
        s[i] = 3.0
    assert kinds(StepSeries(s)) == ["rare-slow"]


def test_gc_decline_that_resets_at_restart():
    s = [1.0 + 0.002 * (i % 150) + R.gauss(0, 0.01) for i in range(450)]
    found = classify(StepSeries(s, restarts=[150, 300]))
    assert found[0].kind == "gc-decline" and found[0].confidence >= 0.8
    assert any("arm(gc=N)" in c for c in found[0].next_checks)


def test_plateau_at_seventy_percent():
    s = flat(300)
    s[120:180] = flat(60, base=1.0 / 0.7)
    found = classify(StepSeries(s))
    assert found[0].kind == "throttle-plateau" and "steps 120" in found[0].evidence[0]


def test_flat_low_needs_expected():
    series = StepSeries(flat(300, base=1.5))
    assert kinds(series) == []
    assert kinds(series, Settings(expected=1.0)) == ["flat-low"]


def test_high_frequency_noise():
    s = [1.0 + abs(R.gauss(0, 0.1)) for _ in range(300)]
    assert kinds(StepSeries(s), Settings(expected=1.0)) == ["noise"]


def test_readers_and_restarts():
    csv_text = "step,seconds,end_unix_time\n0,0.5,100.5\n1,0.5,101.0\n2,0.5,101.5\n0,0.6,500.0\n1,0.6,500.6\n"
    series = parse_series(csv_text, "x.csv")
    assert series.seconds == [0.5, 0.5, 0.5, 0.6, 0.6] and series.restarts == [3]
    gap = parse_series("step,seconds,end_unix_time\n5,1.0,10\n6,1.0,11\n7,1.0,900\n", "g.csv")
    assert gap.restarts == [2]
    assert parse_series("[0.1, 0.2]").seconds == [0.1, 0.2]
    assert parse_series("0.1\n0.2\n").seconds == [0.1, 0.2]
    for bad, message in (("", "empty"), ("step,loss\n1,2\n", "no step-time column"), ("0.1\n-3\n", "positive"),
                         ("[1, \"x\"]", "not a number"), ("{", "JSON")):
        with pytest.raises(SeriesError, match=message):
            parse_series(bad)

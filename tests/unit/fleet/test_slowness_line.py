"""Issue 27: a straggler the step series name shows in analyze's human output, as its own line under the verdict.

Real input: tests/fixtures/straggler (4-rank gloo runs, forensics.arm() step series; see its README).
"""

from __future__ import annotations

from hf_testpaths import FIXTURES
from forensics.report.text import render_verdict
from parsers import knowledge
from parsers.analyze import analyze

KB = knowledge.load(use_env=False)


def test_a_step_series_straggler_is_a_line_of_the_human_output():
    out = render_verdict(analyze(FIXTURES / "straggler" / "straggle", KB).verdict, width=0)
    line = next(x for x in out.splitlines() if x.startswith("  slow: "))
    assert line.startswith("  slow: rank 2 arrives last at 100% of 57 steps' first collectives")
    assert "the job's jitter" in line and "not judged" in line  # no time-stamped progress: shown, not judged


def test_a_healthy_run_has_no_slow_line():
    out = render_verdict(analyze(FIXTURES / "straggler" / "healthy", KB).verdict, width=0)
    assert "slow:" not in out

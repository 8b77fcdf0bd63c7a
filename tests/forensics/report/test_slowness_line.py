"""Issue 27: a straggler the step series name shows in analyze's human output, as its own line under the verdict.

Real input: tests/fixtures/straggler (4-rank gloo runs, forensics.arm() step series; see its README).
"""

from __future__ import annotations

from hf_testpaths import FIXTURES
from forensics.report.text import render_verdict
from parsers import knowledge
from forensics.report.words import analyze
from facts import says


KB = knowledge.load(use_env=False)


def test_a_step_series_straggler_is_a_line_of_the_human_output():
    out = render_verdict(analyze(FIXTURES / "straggler" / "straggle", KB).verdict, width=0)
    line = next(x for x in out.splitlines() if x.startswith("  slow: "))
    assert says([line], "rank 2", "100%", "57 steps")  # who, how often, over what
    assert "the job's jitter" in line and "not judged" in line  # no time-stamped progress: shown, not judged


def test_a_healthy_run_has_no_slow_line():
    out = render_verdict(analyze(FIXTURES / "straggler" / "healthy", KB).verdict, width=0)
    assert "slow:" not in out


def test_the_culprit_straggler_has_its_line_within_the_terminals_width(tmp_path):
    """A running job (the H200 slow5 capture, ns recorder): the straggler is the culprit and its figures are
    at the end of a long summary; the 'slow:' line says them where an 80-column terminal keeps them."""
    from parsers.input.archive import extract_into

    extract_into(FIXTURES / "device" / "h200_issue15_ns.tar.gz", tmp_path)
    verdict = analyze(tmp_path / "h200_issue15_ns" / "slow5" / "round1", KB).verdict
    out = render_verdict(verdict, width=80).splitlines()
    line = next(x for x in out if x.startswith("  slow: "))
    assert says([line], "rank 6 (node06)", "86%", "83 collectives", "5.0 ms") and len(line) <= 80, line


def test_a_running_job_that_names_no_one_points_at_nothing_absent(tmp_path):
    """Issue 41 item 4: a no-hang verdict that names nothing slow (the H200 healthy capture) says so in its
    summary without pointing at 'the figures below'; its figures are its 'slow:' line, said once (not again
    as 'the evidence shows'), in text and HTML."""
    from parsers.input.archive import extract_into
    from forensics.report.html import verdict_html
    from forensics.report.view import build_view

    extract_into(FIXTURES / "device" / "h200_issue15_ns.tar.gz", tmp_path)
    verdict = analyze(tmp_path / "h200_issue15_ns" / "healthy" / "round2", KB).verdict
    # wording is the behaviour
    assert verdict.summary.startswith("no hang") and "no rank, host or link is named slow" in verdict.summary
    assert "below" not in verdict.summary, verdict.summary
    out = render_verdict(verdict, width=0).splitlines()
    slow = [x for x in out if x.startswith("  slow: ")]
    assert len(slow) == 1 and not [x for x in out if x.startswith("  the evidence shows: ") and x[22:] in slow[0]], out
    assert "below" not in verdict_html(build_view(verdict)).split("VERDICT", 1)[-1].split("</p>", 1)[0]

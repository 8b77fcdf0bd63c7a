"""Messages that name another rank (issue 39 item 2): a monitored barrier's report names the ranks that did not
arrive; they are the suspects, cited with the reporter's line, and the reporter is no suspect. On real gloo output
(tests/fixtures/issue39/README.md) and on live gloo jobs of several sizes."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from forensics.report.words import analyze
from parsers import knowledge
from parsers.model.findings import CULPRIT_MIN_CONFIDENCE, ReasonClass

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "issue39"
KB = knowledge.load(use_env=False)
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "support"))
from barrier_job import run_job  # noqa: E402


def named(v) -> set[int]:
    return {s.rank for s in v.suspects if s.confidence >= CULPRIT_MIN_CONFIDENCE and s.rank is not None}


@pytest.mark.parametrize("case,absent,reporter_waiters", [
    ("monbarrier-w4-absent1-3", {1, 3}, {2}), ("monbarrier-w6-absent4", {4}, {1, 2, 3, 5})])
def test_the_absent_ranks_are_named_and_the_reporter_is_not(case, absent, reporter_waiters):
    v = analyze(FIXTURES / case, KB).verdict
    assert named(v) == absent, v.text
    assert v.culprit.reason_class == ReasonClass.NAMED_ABSENT and v.culprit.rank == min(absent)
    assert "monitored barrier" in v.summary and f"rank {min(absent)}" in v.summary
    first = v.culprit.evidence[0]
    assert first.startswith("rank 0 reports (node00/rank0.stderr:") and "failed to pass monitoredBarrier" in first
    assert 0 not in {s.rank for s in v.suspects}  # the reporter only waited
    assert not [s for s in v.suspects if s.rank in reporter_waiters]  # nor did the ranks that arrived
    assert v.hang == "hang"  # the report is itself a wait past a timeout


def test_the_widest_report_is_cited():
    """wait_all_ranks=True logs one line per rank, then the list: the list is the evidence of each."""
    v = analyze(FIXTURES / "monbarrier-w4-absent1-3", KB).verdict
    assert "Ranks 1, 3 failed to pass" in v.culprit.evidence[0]  # verbatim input: rank 0's own line
    assert "(and for rank 3)" in v.culprit.reason


@pytest.mark.integration
@pytest.mark.parametrize("world,absent,wait_all", [(3, (2,), False), (5, (1, 4), True), (4, (3,), True)])
def test_live_gloo_monitored_barrier(tmp_path, world, absent, wait_all):
    codes = run_job(tmp_path, "monbarrier", world, absent, timeout_ms=1500, wait_all=wait_all)
    assert codes[0] != 0 and all(codes[r] == 0 for r in absent), codes
    v = analyze(tmp_path, KB).verdict
    expected = set(absent) if wait_all else {min(absent)}  # without wait_all the barrier names the first only
    assert named(v) == expected, v.text
    assert v.culprit.reason_class == ReasonClass.NAMED_ABSENT and 0 not in {s.rank for s in v.suspects}


def test_the_docs_wording_without_a_reporter_names_the_rank(tmp_path):
    """PyTorch's docs (distributed.html, Debugging): 'RuntimeError: Rank 1 failed to pass monitoredBarrier in 2000 ms'
    with no rank prefix: rank 1 is named; only the group's rank 0 waits in a monitored barrier and reports."""
    src = FIXTURES / "excerpts" / "pytorch-docs-monitored-barrier.log"
    (tmp_path / src.name).write_text(src.read_text())
    v = analyze(tmp_path, KB).verdict
    assert v.culprit is not None and v.culprit.rank == 1 and v.culprit.reason_class == ReasonClass.NAMED_ABSENT, v.text
    assert v.culprit.evidence[0].startswith("rank 0 reports (pytorch-docs-monitored-barrier.log:1)")


def test_a_subgroups_report_names_no_global_rank():
    """In new_group([1, 2, 3]) the report comes from global rank 1 (the group's rank 0) and 'Rank 2' is the group's
    rank 2 (global rank 3): read as the job's rank 2 it would blame a rank that arrived."""
    v = analyze(FIXTURES / "monbarrier-sub-w4-absent3", KB).verdict
    assert not [s for s in v.suspects if s.reason_class == ReasonClass.NAMED_ABSENT], v.text
    assert 2 not in named(v)

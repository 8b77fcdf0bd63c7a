"""A collective enqueued but never started on one rank's GPU, read from timed Flight Recorder dumps of real
NCCL 2.28.9 jobs (tests/fixtures/issue39/env): the post-mortem of a long kernel names its rank."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from forensics.report.words import analyze
from parsers.gather.evidence import load_path
from parsers.judges import fr_started
from parsers.model.findings import ReasonClass

ENV = Path(__file__).resolve().parents[2] / "fixtures" / "issue39" / "env"


def truth(name: str) -> dict:
    return json.loads((ENV / f"{name}-truth.json").read_text())


@pytest.mark.parametrize("name", ["gpusleep-s39", "gpusleep-s40"])
def test_the_rank_behind_a_long_kernel_is_named_from_the_logs_folder(name):
    want = truth(name)["culprit_ranks"]
    found = fr_started.judge(load_path(ENV / f"{name}-logs.tar.gz"))
    assert [s.rank for s in found.suspects] == want
    assert found.suspects[0].reason_class == ReasonClass.GPU_QUEUED
    verdict = analyze(ENV / f"{name}-logs.tar.gz").verdict
    assert verdict.culprit is not None and verdict.culprit.rank == want[0]
    assert verdict.culprit.reason_class == ReasonClass.GPU_QUEUED


@pytest.mark.parametrize("name", ["ordermismatch-s39", "lock-s39"])
def test_no_claim_where_no_collective_sits_unstarted_behind_other_work(name):
    """ordermismatch: ranks 6 and 7 failed inside #7 (their counters lag, their entries say started); lock:
    rank 2 never enqueued #7. Neither is work queued behind a kernel."""
    assert fr_started.judge(load_path(ENV / f"{name}-logs.tar.gz")).suspects == []

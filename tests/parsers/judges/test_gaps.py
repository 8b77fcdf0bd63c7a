"""A post-mortem says which evidence it lacks to reach the live answer (issue 39 item 7), on real captures.

The issue 26 pipeline capture (8 ranks, NCCL 2.28.9, H200) was made without the recorder and without
Flight Recorder timing: its logs folder lacks both; its live bundle (no dump in it) claims no gap. A logs folder
the recorder wrote its state into (the real plugin, driven by the C harness, SIGABRT) lacks neither.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from forensics.report.words import analyze
from nccl_patches.harness import start_hanging_rank
from parsers.gather.evidence import load_path
from parsers.judges.gaps import evidence_gaps

PIPELINE = Path(__file__).resolve().parents[2] / "fixtures" / "issue26" / "pipeline"


def gaps_of(path: Path) -> list[str]:
    return [g.kind for g in evidence_gaps(load_path(path))]


def test_logs_folder_without_recorder_or_timing_names_both():
    assert gaps_of(PIPELINE / "logs.tar.gz") == ["no-recorder-state", "fr-without-timing"]


def test_live_bundle_claims_no_gap():
    """A live collection (a manifest) read the recorder where it ran, if it was loaded; this one holds no dump."""
    assert gaps_of(PIPELINE / "bundle.tar.gz") == []


def test_the_verdict_says_what_to_set_and_keeps_its_culprit():
    verdict = analyze(PIPELINE / "logs.tar.gz").verdict
    kinds = [g["kind"] for g in verdict.sections["evidence_gaps"]]
    assert kinds == ["no-recorder-state", "fr-without-timing"]
    assert verdict.culprit is not None and verdict.culprit.rank == 3  # the gaps change no culprit
    said = "\n".join(verdict.missing_evidence)
    # wording is the behaviour: the variables a user sets to close the gap
    assert "TORCH_NCCL_ENABLE_TIMING=1" in said and "FORENSICS_RECORDER_COPY_DIR" in said


@pytest.mark.integration
def test_recorder_copies_in_a_logs_folder_close_the_gap(plugin, harness, tmp_path, ranks):
    """The real plugin hung in all-reduce on 3 'hosts', SIGABRT: the copies beside the NCCL logs are read."""
    for r in range(3):
        logs = tmp_path / "logs" / f"node{r:02d}"
        env = {"FORENSICS_RECORDER_DIR": str(tmp_path / "shm"), "NCCL_DEBUG_FILE": f"{logs}/nccl.%h.%p.log",
               "NCCL_HOSTID": f"node{r:02d}"}
        ranks.append(start_hanging_rank(harness, plugin, 5, r, 3, 4, 3, 16, 10, 0, env))
    time.sleep(0.3)
    for h in ranks:
        os.kill(h.pid, signal.SIGABRT)
        assert h.proc.wait(timeout=10) == -signal.SIGABRT
    assert len(list((tmp_path / "logs").rglob("nccl-recorder.*.bin"))) == 3
    verdict = analyze(tmp_path / "logs").verdict
    assert verdict.sections["recorder"]["state_files"] == 3
    assert {e["waiter_host"] for e in verdict.sections["recorder"]["wait_edges"]} <= {"node00", "node01", "node02"}
    assert "evidence_gaps" not in verdict.sections


def test_timed_dumps_close_the_timing_gap():
    """gpusleep-s39 (tests/fixtures/issue39/env): made with TORCH_NCCL_ENABLE_TIMING=1, killed before the
    ranks aborted: timing is there, the recorder's copies are not."""
    env = PIPELINE.parents[1] / "issue39" / "env"
    assert gaps_of(env / "gpusleep-s39-logs.tar.gz") == ["no-recorder-state"]


LOCK41 = Path(__file__).resolve().parents[2] / "fixtures" / "issue39" / "env" / "lock-s41-logs.tar.gz"


def test_a_rank_without_the_stacks_the_others_left_is_a_gap():
    """Seed 41's lock case on the H100: rank 0 blocked on a lock its own thread held, never aborted (killed at the
    end) and left no faulthandler dump; ranks 1-7 aborted and left theirs. Live, py-spy named the holder; here
    the verdict keeps its culprit and says which stacks the folder lacks."""
    gaps = {g.kind: g for g in evidence_gaps(load_path(LOCK41))}
    assert gaps["no-stacks"].ranks == (0,)
    verdict = analyze(LOCK41).verdict
    assert verdict.culprit is not None and verdict.culprit.rank == 0
    # wording is the behaviour: the piece missing, for the rank it concerns
    assert any(line.startswith("no Python stacks of rank 0:") for line in verdict.missing_evidence)


def test_no_stack_gap_where_no_rank_left_stacks():
    """Without PYTHONFAULTHANDLER no rank leaves a dump: that is no gap of one rank (the issue 26 capture)."""
    assert "no-stacks" not in gaps_of(PIPELINE / "logs.tar.gz")


def test_a_rank_that_finished_is_no_stack_gap():
    """Seed 41's order mismatch: rank 2 finished its call and exited 0 (torch's teardown warning in its output);
    ranks 0, 1 and 3 aborted with their dumps. Nothing of rank 2's threads is missing."""
    om41 = Path(__file__).resolve().parents[2] / "fixtures" / "issue39" / "device" / "seed41-ordermismatch"
    assert "no-stacks" not in gaps_of(om41 / "logs.tar.gz")

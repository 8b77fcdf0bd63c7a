"""A lock's holder in the why (issue 39 item 4): the thread, its frame of the user's code and what it waits in;
'holds' where it is the only other thread that runs the user's code, 'likely holds' among several. On the H200
lock capture (py-spy --native: two candidate threads, both in clock_nanosleep) and the gloo twosinks capture
(py-spy without native frames: one candidate)."""

from __future__ import annotations

from pathlib import Path

import pytest

from forensics.report.words import analyze
from parsers import knowledge

ISSUE26 = Path(__file__).resolve().parents[2] / "fixtures" / "issue26"
KB = knowledge.load(use_env=False)


def why_of(v, rank: int):
    """(the why, the evidence line that says it in full) of culprit `rank`."""
    head = next(c for c in (v.culprits or [v.culprit]) if c.rank == rank)
    line = next(e for e in head.evidence if getattr(e, "why", None))
    return line.why, str(line)


@pytest.mark.integration  # two archives of 8 and 4 ranks, analysed whole
def test_the_only_candidate_holds_the_lock_and_several_are_each_said_with_what_they_wait_in():
    one, _ = why_of(analyze(ISSUE26 / "twosinks" / "bundle.tar.gz", KB).verdict, 3)
    # wording is the behaviour: the one candidate is said to hold the lock, not likely to
    assert "its thread 'ckpt-writer' at write_shard_to_storage holds (inside hrtimer_nanosleep)" in one
    assert "likely" not in one
    two, said = why_of(analyze(ISSUE26 / "lock" / "bundle.tar.gz", KB).verdict, 5)
    assert "'ckpt-writer' at write_shard_to_storage (live_scenarios.py:250) inside clock_nanosleep" in said
    assert "'fr-dump-watcher'" in two and two.endswith("likely holds")


@pytest.mark.integration  # an 8-rank logs archive, analysed whole
def test_a_rank_that_ended_gets_its_own_nccl_warn_as_its_why():
    """The H200 order capture (issue 26, NCCL 2.28.9): rank 3's NCCL log has 'message truncated : receiving 524288
    bytes instead of 65536'. Said of rank 3 as a rank that exited, that WARN line is its why, cited with its file;
    a rank whose log holds no error of its own (rank 5) gets none."""
    from parsers.judges.own_state import own_state
    from parsers.model.findings import ReasonClass, Suspect

    ev = analyze(ISSUE26 / "order" / "logs.tar.gz", KB).evidence
    s = Suspect(rank=3, host=None, pid=None, reason_class=ReasonClass.EXITED, reason="exited", confidence=0.9)
    lines = own_state(ev, s)
    # verbatim input: NCCL's WARN
    assert s.why and "message truncated : receiving 524288 bytes instead of 65536" in s.why
    assert lines[0].tool == "nccl-log" and lines[0].file.endswith(".log") and lines[0].startswith("cause:")
    quiet = Suspect(rank=5, host=None, pid=None, reason_class=ReasonClass.EXITED, reason="exited", confidence=0.9)
    own_state(ev, quiet)
    assert not quiet.why

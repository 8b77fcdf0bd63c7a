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


def why_of(v, rank: int) -> str:
    head = next(c for c in (v.culprits or [v.culprit]) if c.rank == rank)
    return next(e for e in head.evidence if getattr(e, "why", None)).why


@pytest.mark.integration  # two archives of 8 and 4 ranks, analysed whole
def test_the_only_candidate_holds_the_lock_and_several_are_each_said_with_what_they_wait_in():
    one = why_of(analyze(ISSUE26 / "twosinks" / "bundle.tar.gz", KB).verdict, 3)
    # wording is the behaviour: the one candidate is said to hold the lock, not likely to
    assert "its thread 'ckpt-writer' at write_shard_to_storage" in one and one.endswith(" holds")
    assert "likely" not in one
    two = why_of(analyze(ISSUE26 / "lock" / "bundle.tar.gz", KB).verdict, 5)
    assert "'ckpt-writer' at write_shard_to_storage (live_scenarios.py:250) inside clock_nanosleep" in two
    assert "'fr-dump-watcher'" in two and two.endswith("likely holds")

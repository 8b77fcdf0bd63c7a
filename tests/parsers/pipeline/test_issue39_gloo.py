"""Issue 39's matrix on gloo (tests/fixtures/issue39/README.md): a group that finished and exited 0 is healthy
(item 5), a monitored barrier names its absent rank (item 2), a lock's holder is the why (item 4); each live
bundle and logs folder as the ranks left them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from forensics.report.words import analyze
from parsers import knowledge
from parsers.judges.stacks import waiting_text
from parsers.model.findings import CULPRIT_MIN_CONFIDENCE, ReasonClass
from parsers.stacks.classify import Activity

pytestmark = pytest.mark.integration  # six archives of 5-rank jobs, analysed whole

CASES = Path(__file__).resolve().parents[2] / "fixtures" / "issue39" / "gloo-i39"
KB = knowledge.load(use_env=False)


def verdict(case: str, form: str):
    return analyze(CASES / case / f"{form}.tar.gz", KB).verdict


def truth(case: str) -> dict:
    return json.loads((CASES / case / "truth.json").read_text())


def named(v) -> set:
    return {s.rank if s.rank is not None else ("pid", s.pid) for s in v.suspects
            if s.confidence >= CULPRIT_MIN_CONFIDENCE}


def test_subgroup_the_group_that_exited_0_is_healthy():
    v = verdict("subgroup", "bundle")
    assert named(v) == set(truth("subgroup")["culprit_ranks"]) == {2}, v.text
    assert not [s for s in v.suspects if s.reason_class in (ReasonClass.EXITED, ReasonClass.ABSENT)]


def test_subgroup_logs_name_no_finished_rank():
    v = verdict("subgroup", "logs")
    assert not named(v) & set(truth("subgroup")["healthy_ranks"]), v.text


@pytest.mark.parametrize("form,reason_class", [("bundle", ReasonClass.OUTSIDE), ("logs", ReasonClass.NAMED_ABSENT)])
def test_monbarrier_the_absent_rank_not_the_reporter(form, reason_class):
    v = verdict("monbarrier", form)
    assert named(v) == set(truth("monbarrier")["culprit_ranks"]) == {2}, v.text
    assert v.culprit.reason_class == reason_class and 0 not in named(v)


def test_lock_the_holder_thread_is_the_why():
    v = verdict("lock", "bundle")
    assert v.culprit.rank == truth("lock")["culprit_ranks"][0] == 1 and named(v) == {1}, v.text
    assert "'ckpt-writer' at write_shard_to_storage holds" in v.culprit.why and "likely" not in v.culprit.why
    assert "inside hrtimer_nanosleep" in v.culprit.why  # no native frame: what it waits in, from its /proc task


def test_wrongpeersend_names_no_wrong_rank_and_says_each_wait():
    """Stage 1 sends to stage 3 (h39fin's wrongpeersend, gloo, 4 ranks), collected before py-spy --locals kept the
    peers: stacks without them carry no peer, so no culprit is named (with them: tests/parsers/judges/
    test_p2p_stacks.py); what the summary says must hold for every rank it names (two wait in send, two in
    recv), where it said 'ranks 0-3 wait in send'."""
    v = verdict("wrongpeersend", "bundle")
    assert named(v) <= set(truth("wrongpeersend")["culprit_ranks"]) == {1}, v.text
    # wording is the behaviour: each kind of wait with its own ranks, none said for all
    assert "wait in send (ranks 0-1), recv (ranks 2-3)" in v.summary, v.summary


def test_waiting_text_says_each_kind_and_counts_the_rest():
    """The words for ranks that wait in different ways: one kind alone, collectives by op, other kinds whole, and
    past the third kind a count."""
    coll = [Activity("collective", op) for op in ("all_reduce", "send", "recv", "barrier")]
    assert waiting_text({0: coll[0], 1: coll[0]}) == "wait in all_reduce"
    five = {0: coll[0], 1: coll[0], 2: coll[1], 3: coll[2], 4: coll[3]}
    # wording is the behaviour: three kinds said with their ranks, the fourth counted
    assert waiting_text(five) == ("wait in all_reduce (ranks 0-1), send (ranks 2), recv (ranks 3), 1 more in 1 other "
                                  "kind(s) of wait")
    mixed = waiting_text({0: coll[0], 1: Activity("gpu-sync", "cudaStreamSynchronize")})
    # wording is the behaviour: kinds other than collectives said whole, each with its ranks
    assert mixed == "wait in all_reduce (ranks 0), wait on the GPU (cudaStreamSynchronize) (ranks 1)"

"""Issue 39's matrix on gloo (tests/fixtures/issue39/README.md): a group that finished and exited 0 is healthy
(item 5), a monitored barrier names its absent rank (item 2), a lock's holder is the why (item 4); each live
bundle and logs folder as the ranks left them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from forensics.report.words import analyze
from parsers import knowledge
from parsers.model.findings import CULPRIT_MIN_CONFIDENCE, ReasonClass

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

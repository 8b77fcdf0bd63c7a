"""Issue 39's point-to-point device captures (H100, NCCL 2.28.9, torch 2.11; scripts/device/i39_scenarios.py,
seeds 39 and 40: world size, culprit, sizes and fault step drawn from the seed), each as the live bundle and the
logs folder after the watchdog, trimmed (scripts/device/trim_fixtures.py; no Flight Recorder entry dropped).
tests/fixtures/i39/<case>-<seed>/truth.json is the driver's truth.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from forensics.report.words import analyze
from parsers import knowledge
from parsers.model.findings import CULPRIT_MIN_CONFIDENCE, ReasonClass

pytestmark = pytest.mark.integration  # whole captures analysed

FIX = Path(__file__).resolve().parents[2] / "fixtures" / "i39"
KB = knowledge.load(use_env=False)
FORMS = ("bundle", "logs")


def case(name: str, form: str):
    return analyze(FIX / name / f"{form}.tar.gz", KB).verdict, json.loads((FIX / name / "truth.json").read_text())


def named(v) -> set[int]:
    return {s.rank for s in v.suspects if s.confidence >= CULPRIT_MIN_CONFIDENCE and s.rank is not None}


@pytest.mark.parametrize("name", ["wrongpeer-seed39", "wrongpeer-seed40"])
@pytest.mark.parametrize("form", FORMS)
def test_wrong_peer_receive_is_named_as_such_live_and_post_mortem(name, form):
    v, truth = case(name, form)
    (culprit,) = truth["culprit_ranks"]
    assert v.culprit.rank == culprit and v.culprit.reason_class == ReasonClass.WRONG_PEER, v.text
    assert named(v) == {culprit} and v.deadlock is None
    sender = culprit - 1  # the stage whose sends go unanswered (the plan: it receives from culprit-2)
    assert f"rank {sender} send" in v.culprit.reason, v.culprit.reason
    if form == "logs":  # the dumps hold the receive itself and the peer it names
        assert f"recv from {culprit - 2}, which never sends to it" in v.culprit.reason


@pytest.mark.parametrize("name", ["sendsend-seed39", "sendsend-seed40"])
@pytest.mark.parametrize("form", FORMS)
def test_send_send_pair_is_a_deadlock_of_both_live_and_post_mortem(name, form):
    v, truth = case(name, form)
    assert v.deadlock is not None and sorted(v.deadlock.members) == sorted(truth["culprit_ranks"]), v.text
    assert {e.op.split()[0].lower() for e in v.deadlock.edges} == {"send"} and v.culprit is None
    assert "sends to the next first" in v.summary and not named(v), v.text  # the others wait in the all_reduce


@pytest.mark.parametrize("form", FORMS)
def test_pipeline_stall_is_where_the_waits_end_not_a_cycle(form):
    v, truth = case("pipestall-seed39", form)
    assert v.deadlock is None and v.culprit.rank == truth["culprit_ranks"][0] and named(v) == set(truth["culprit_ranks"]), v.text


"""Point-to-point waits matched from stacks (issue 39 item 1, gloo): each rank's send or recv with the peer that
py-spy --locals kept.

The bundles (tests/fixtures/issue39/gloo-p2p-locals/, README there) are real hangs on gloo collected by the real
`forensics collect` (scripts/device/i39_scenarios.py --backend gloo, seeds 40 and 42, worlds 4-7): a stage that
receives from the wrong peer, one that sends to the wrong peer, and a pair that both send first.
"""

from __future__ import annotations

import json
import tarfile
from pathlib import Path

import pytest

from forensics.report.words import analyze
from parsers import knowledge
from parsers.judges.p2p_stacks import StackOp, judge_stacks
from parsers.model.findings import CULPRIT_MIN_CONFIDENCE, ReasonClass

CASES = Path(__file__).resolve().parents[2] / "fixtures" / "issue39" / "gloo-p2p-locals"
KB = knowledge.load(use_env=False)
WRONG = ["wrongpeer-seed40", "wrongpeer-seed42", "wrongpeersend-seed40", "wrongpeersend-seed42"]
PAIRS = ["sendsend-seed40", "sendsend-seed42"]


def truth(name: str) -> dict:
    return json.loads((CASES / name / "truth.json").read_text())


def named(v) -> set:
    return {s.rank for s in v.suspects if s.confidence >= CULPRIT_MIN_CONFIDENCE}


@pytest.mark.integration  # a bundle of 4-7 ranks analysed whole
@pytest.mark.parametrize("name", WRONG)
def test_a_wait_whose_peer_never_posts_the_matching_op_is_the_root(name):
    v, t = analyze(CASES / name / "bundle.tar.gz", KB).verdict, truth(name)
    (culprit,) = t["culprit_ranks"]
    assert v.culprit.rank == culprit and v.culprit.reason_class == ReasonClass.WRONG_PEER, v.text
    assert named(v) == {culprit} and v.deadlock is None, v.text
    wrong = culprit - 2 if t["case"] == "wrongpeer" else culprit + 2
    said = f"recv from {wrong}, which never sends to it" if t["case"] == "wrongpeer" else \
        f"send to {wrong}, which never receives from it"
    # wording is the behaviour: the words, with the peer the call names
    assert f"posts {said}" in v.culprit.reason, v.culprit.reason


@pytest.mark.integration  # a bundle of 4-7 ranks analysed whole
@pytest.mark.parametrize("name", PAIRS)
def test_two_ranks_each_sending_to_the_other_are_a_deadlock_naming_both(name):
    v = analyze(CASES / name / "bundle.tar.gz", KB).verdict
    assert v.deadlock is not None and sorted(v.deadlock.members) == truth(name)["culprit_ranks"], v.text
    assert {e.op for e in v.deadlock.edges} == {"send"} and not named(v), v.text


def _unpacked(name: str, tmp: Path, locals_: bool = True, second_look: bool = True) -> Path:
    """The bundle unpacked, as a collect without --locals leaves it (every kept argument taken out of its py-spy
    files) or without the second look (no time says the job hangs)."""
    with tarfile.open(CASES / name / "bundle.tar.gz") as tar:
        tar.extractall(tmp, filter="data")
    for path in (tmp / "bundle").rglob("pyspy.json") if not locals_ else ():
        doc = json.loads(path.read_text())
        for thread in doc:
            for frame in thread["frames"]:
                frame.pop("locals", None)
        path.write_text(json.dumps(doc))
    for path in (tmp / "bundle").rglob("second-look.json") if not second_look else ():
        path.unlink()
    return tmp / "bundle"


@pytest.mark.integration  # a bundle of 4-7 ranks analysed whole
@pytest.mark.parametrize("name", ["wrongpeer-seed40", "wrongpeersend-seed42", "sendsend-seed40"])
def test_without_locals_nothing_is_claimed_from_the_stacks(name, tmp_path):
    v = analyze(_unpacked(name, tmp_path, locals_=False), KB).verdict
    assert not [s for s in v.suspects if s.reason_class == ReasonClass.WRONG_PEER], v.text
    assert v.deadlock is None and named(v) <= set(truth(name)["culprit_ranks"]), v.text


@pytest.mark.integration  # a bundle of 4-7 ranks analysed whole
@pytest.mark.parametrize("name", ["wrongpeer-seed42", "sendsend-seed42"])
def test_one_look_with_no_time_is_a_lead_never_a_culprit_or_a_deadlock(name, tmp_path):
    """Without the second look nothing says the job hangs: the stacks are one moment of a job that may still run."""
    v = analyze(_unpacked(name, tmp_path, second_look=False), KB).verdict
    assert v.hang == "not established" and v.deadlock is None and not named(v), v.text
    if name.startswith("wrongpeer"):
        (lead,) = [s for s in v.suspects if s.reason_class == ReasonClass.WRONG_PEER]
        assert lead.rank == truth(name)["culprit_ranks"][0] and lead.demotion.unproven, v.text


def test_a_recv_recv_pair_is_a_cycle_of_both_and_no_wrong_peer():
    edges, suspects = judge_stacks({1: StackOp(1, "recv", 2), 2: StackOp(2, "recv", 1), 0: StackOp(0, "send", 1)})
    assert {(e.waiter, e.peer) for e in edges if e.can_close_a_cycle} == {(1, 2), (2, 1), (0, 1)} and not suspects


def test_a_send_and_its_receive_are_one_transfer_not_a_wait():
    edges, suspects = judge_stacks({0: StackOp(0, "send", 1), 1: StackOp(1, "recv", 0)})
    assert edges == [] and suspects == []


def test_a_peer_no_stack_shows_is_a_wait_never_a_cycle_edge():
    (edge,), suspects = judge_stacks({3: StackOp(3, "recv", 2)})
    assert edge.peer == 2 and not edge.can_close_a_cycle and not suspects


def test_a_wrong_peer_off_any_cycle_is_not_said():
    """Rank 2 receives from 0, rank 0 sends to 3 (no stack of 3: it may still receive) and rank 1 sends to 2: no
    cycle says that rank 0 never sends to 2, so no wrong peer is named."""
    _, suspects = judge_stacks({2: StackOp(2, "recv", 0), 0: StackOp(0, "send", 3), 1: StackOp(1, "send", 2)})
    assert suspects == []

"""Point-to-point waits matched from stacks (issue 39 item 1, gloo): each rank's send or recv with the peer that
py-spy --locals kept.

The bundles (tests/fixtures/issue39/gloo-p2p-locals/, README there) are real hangs on gloo collected by the real
`forensics collect` (scripts/device/i39_scenarios.py --backend gloo, seeds 40-42 and 47, worlds 4-8): a stage that
receives from the wrong peer, one that sends to the wrong peer, a pair that both send first and a pair that both
receive first.
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
#: ranks 0 and 3 of 4, 1 and 4 of 6, 1 and 3 of 8: each posts recv from the other first, the rest in all_reduce
RECV_PAIRS = ["recvrecv-seed41", "recvrecv-seed47", "recvrecv-seed40"]
#: the op both ranks of a pair wait in, by case
PAIR_OP = {"sendsend": "send", "recvrecv": "recv"}


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


@pytest.mark.integration  # a bundle of 4-8 ranks analysed whole
@pytest.mark.parametrize("name", PAIRS + RECV_PAIRS)
def test_two_ranks_each_in_the_same_op_toward_the_other_are_a_deadlock_naming_both(name):
    v, t = analyze(CASES / name / "bundle.tar.gz", KB).verdict, truth(name)
    a, b = t["culprit_ranks"]
    op = PAIR_OP[t["case"]]
    assert v.deadlock is not None and sorted(v.deadlock.members) == [a, b], v.text
    assert {(e.waiter, e.peer, e.op) for e in v.deadlock.edges} == {(a, b, op), (b, a, op)} and not named(v), v.text
    # wording is the behaviour: the headline names both ranks and the op each waits in
    assert v.summary.startswith(f"deadlock: ranks {a}, {b} wait on each other") and f"{a} on {b} in {op}" in \
        v.summary and f"{b} on {a} in {op}" in v.summary, v.summary


@pytest.mark.integration  # a bundle of 8 ranks analysed whole, twice
def test_a_recv_recv_pair_read_from_its_files_is_the_deadlock_its_digest_gives(tmp_path):
    """The recvrecv bundles' ranks are read from the host digest collect wrote (the kept peers are in its frames);
    read from the py-spy files themselves they give the same cycle."""
    whole = analyze(CASES / "recvrecv-seed40" / "bundle.tar.gz", KB).verdict
    raw = analyze(_unpacked("recvrecv-seed40", tmp_path, digest=False), KB).verdict
    assert whole.sections["digests"]["hosts_from_digest"] == 1 and "digests" not in raw.sections, raw.text
    assert raw.deadlock is not None and whole.deadlock is not None, raw.text
    assert raw.deadlock.to_dict() == whole.deadlock.to_dict() and raw.summary == whole.summary, raw.text


@pytest.mark.integration  # a logs folder of 4-8 ranks analysed whole
@pytest.mark.parametrize("name", RECV_PAIRS)
def test_a_recv_recv_logs_folder_blames_no_rank_off_the_pair(name, tmp_path):
    """What gloo's ranks leave (their stderr: 'Timed out waiting ... for recv operation', a traceback into recv or
    all_reduce) names no peer of any wait, and the first timeout may be a rank off the pair (seed 40: rank 0, in
    all_reduce): the hang is said, and no rank off the pair is named for it, nor any cycle but the pair's."""
    with tarfile.open(CASES / name / "logs.tar.gz") as tar:
        tar.extractall(tmp_path, filter="data")
    v, pair = analyze(tmp_path / "logs", KB).verdict, truth(name)["culprit_ranks"]
    assert v.hang == "hang" and named(v) <= set(pair), v.text
    assert v.deadlock is None or sorted(v.deadlock.members) == pair, v.text


def _unpacked(name: str, tmp: Path, locals_: bool = True, second_look: bool = True, digest: bool = True) -> Path:
    """The bundle unpacked, as a collect without --locals leaves it (every kept argument taken out of its py-spy
    files) or without the second look (no time says the job hangs). The host digests go too: collect wrote them
    from the files as they were (kept peers, second look), and a current digest is read instead of its files."""
    with tarfile.open(CASES / name / "bundle.tar.gz") as tar:
        tar.extractall(tmp, filter="data")
    for path in (tmp / "bundle").rglob("digest.json") if not (locals_ and second_look and digest) else ():
        path.unlink()
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
@pytest.mark.parametrize("name", ["wrongpeer-seed40", "wrongpeersend-seed42", "sendsend-seed40", "recvrecv-seed41"])
def test_without_locals_nothing_is_claimed_from_the_stacks(name, tmp_path):
    v = analyze(_unpacked(name, tmp_path, locals_=False), KB).verdict
    assert not [s for s in v.suspects if s.reason_class == ReasonClass.WRONG_PEER], v.text
    assert v.deadlock is None and named(v) <= set(truth(name)["culprit_ranks"]), v.text


@pytest.mark.integration  # a bundle of 4-7 ranks analysed whole
@pytest.mark.parametrize("name", ["wrongpeer-seed42", "sendsend-seed42", "recvrecv-seed47"])
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

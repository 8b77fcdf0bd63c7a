"""Point-to-point matching per pair and direction (parsers/judges/p2p_match.py), on real NCCL 2.28.9 Flight
Recorder dumps: the issue 26 pipeline capture (8 ranks, stage 3 stalled before its send at micro-batch 3;
tests/fixtures/issue26/README.md). Variants edit those dumps' entries the way the other faults change them
(a receive from the wrong peer, a pair that both send, a dump without completion states), each edit said
where it is made; the rest of every file is the capture's.
"""

from __future__ import annotations

import json
import tarfile
from pathlib import Path

import pytest

from forensics.report.advice import P2P_CYCLE_ADVICE
from forensics.report.view import build_view
from forensics.report.words import analyze
from parsers import knowledge
from parsers.judges import p2p_match
from parsers.model.findings import CULPRIT_MIN_CONFIDENCE, ReasonClass

FIX = Path(__file__).resolve().parents[2] / "fixtures" / "issue26" / "pipeline" / "logs.tar.gz"
KB = knowledge.load(use_env=False)


def logs_folder(tmp: Path) -> Path:
    """The capture's post-mortem folder with the live triggers' JSON dumps only (one dump a rank, easy to edit)."""
    with tarfile.open(FIX) as tar:
        tar.extractall(tmp, filter="data")
    for f in [*tmp.rglob("fr_trace_rank_*"), *tmp.rglob("fr_live_rank_?")]:
        f.unlink()  # the pickles: the same ops (the watchdog's written later), kept here as JSON alone
    return tmp


def dump(tmp: Path, rank: int) -> dict:
    return json.loads((tmp / f"node{rank:02d}" / f"fr_live_rank_{rank}.json").read_text())


def save(tmp: Path, rank: int, data: dict) -> None:
    (tmp / f"node{rank:02d}" / f"fr_live_rank_{rank}.json").write_text(json.dumps(data))


def p2p_entry(like: dict, name: str, seq: int, state: str) -> dict:
    """A p2p entry shaped like the capture's own (`like`), with its name, p2p seq and state."""
    return {**like, "profiling_name": name, "p2p_seq_id": seq, "state": state, "record_id": like["record_id"] + 1,
            "retired": False}


def named(v) -> set[int]:
    return {s.rank for s in v.suspects if s.confidence >= CULPRIT_MIN_CONFIDENCE and s.rank is not None}


def test_histories_count_per_pair_and_direction():
    ops = {3: [(1, "recv", 2, "completed", None), (2, "send", 4, "completed", None), (3, "recv", 2, "completed", None)],
           4: [(1, "recv", 3, "completed", None), (2, "send", 5, "completed", None), (3, "recv", 3, "enqueued", None)]}
    hist = p2p_match.histories(ops, whole=set())
    assert hist[3].posted("send", 4) == 1 and hist[4].posted("recv", 3) == 2
    (pending,) = p2p_match.pending_ops(hist)
    assert pending.op.rank == 4 and pending.op.nth == 2 and pending.match == "unmatched" and pending.peer_posted == 1
    assert not p2p_match.wrong_peer(pending, hist)  # rank 3 sent to it before: behind, not the wrong peer


def test_a_wrapped_history_counts_nothing():
    ops = {0: [(40, "send", 1, "enqueued", None)], 1: [(1, "recv", 0, "completed", None)]}
    (pending,) = p2p_match.pending_ops(p2p_match.histories(ops, whole=set()))
    assert pending.match == "unknown" and pending.peer_posted is None  # rank 0's first 39 ops fell out of its buffer


def test_the_capture_the_stalled_stage_is_where_the_waits_end(tmp_path):
    v = analyze(logs_folder(tmp_path), KB).verdict
    assert v.culprit.rank == 3 and named(v) == {3} and v.deadlock is None, v.text


def test_a_receive_from_the_wrong_peer_is_the_root(tmp_path):
    """Edit: rank 4's pending receive names rank 2 (not 3), and rank 3 posted its send to 4 (it did not stall)."""
    folder = logs_folder(tmp_path)
    four, three = dump(folder, 4), dump(folder, 3)
    last = four["entries"][-1]
    assert last["profiling_name"] == "nccl:recv 4<-3" and last["state"] == "scheduled"
    last["profiling_name"] = "nccl:recv 4<-2"
    save(folder, 4, four)
    mine = [e for e in three["entries"] if e["is_p2p"]]
    three["entries"].append(p2p_entry(three["entries"][-1], "nccl:send 3->4", mine[-1]["p2p_seq_id"] + 1, "scheduled"))
    save(folder, 3, three)
    v = analyze(folder, KB).verdict
    assert v.culprit.rank == 4 and v.culprit.reason_class == ReasonClass.WRONG_PEER, v.text
    # wording is the behaviour: issue 39 asks that the root be named as such, in these words
    assert "posts recv from 2, which never sends to it, while rank 3 sends to it unanswered" in v.culprit.reason
    assert named(v) == {4} and v.deadlock is None


@pytest.mark.parametrize("state", ["completed", "scheduled"])
def test_a_send_to_the_wrong_peer_is_the_root(tmp_path, state):
    """Edit (no capture of a wrong send exists; made from the capture): rank 3 posts its send of the stalled
    micro-batch to rank 5, not 4; NCCL completes a send whose data fits the peer's buffers ('completed'), a larger
    one waits ('scheduled'). Rank 4's receive from 3 goes unanswered; rank 5 never receives from 3: the send side
    of a wrong peer, read as the receive side is (a completed send waits on no one, so it makes no wait edge)."""
    folder = logs_folder(tmp_path)
    three = dump(folder, 3)
    mine = [e for e in three["entries"] if e["is_p2p"]]
    three["entries"].append(p2p_entry(three["entries"][-1], "nccl:send 3->5", mine[-1]["p2p_seq_id"] + 1, state))
    save(folder, 3, three)
    v = analyze(folder, KB).verdict
    assert v.culprit.rank == 3 and v.culprit.reason_class == ReasonClass.WRONG_PEER, v.text
    ends = "it sent to the wrong peer" if state == "completed" else "it waits on the wrong peer"
    # wording is the behaviour: the send side in the receive side's words
    assert (f"posts send to 5, which never receives from it, while rank 4 receives from it unanswered: {ends}"
            in v.culprit.reason)
    assert named(v) == {3} and v.deadlock is None


def test_a_pair_that_both_send_is_a_deadlock_of_both(tmp_path):
    """Edit: ranks 6 and 7 each post one more op, a send to the other (7 otherwise only receives)."""
    folder = logs_folder(tmp_path)
    for rank, peer in ((6, 7), (7, 6)):
        d = dump(folder, rank)
        seq = max(e["p2p_seq_id"] for e in d["entries"] if e["is_p2p"]) + 1
        d["entries"] = [e for e in d["entries"] if not (e["is_p2p"] and e["state"] != "completed")]
        d["entries"].append(p2p_entry(d["entries"][-1], f"nccl:send {rank}->{peer}", seq, "scheduled"))
        save(folder, rank, d)
    v = analyze(folder, KB).verdict
    assert v.deadlock is not None and sorted(v.deadlock.members) == [6, 7], v.text
    assert {e.op for e in v.deadlock.edges} == {"send"} and v.culprit is None
    assert build_view(v).deadlock_next_step == P2P_CYCLE_ADVICE.next_step  # not the collectives' order advice
    # wording is the behaviour: the headline names both ranks and the op
    assert v.summary.startswith("deadlock: ranks 6, 7 wait on each other") and "sends to the other first" in v.summary


def test_a_send_and_a_receive_of_one_pair_at_other_numbers_are_no_cycle(tmp_path):
    """Edit (the issue 39 post-mortem): no completion states ('scheduled' for every rank's last ops), and rank 6's
    last op is its send to 7 at p2p seq 6 while rank 7's is its receive from 6 at p2p seq 3: the same transfer."""
    folder = logs_folder(tmp_path)
    six = dump(folder, 6)
    six["entries"] = [e for e in six["entries"] if not (e["is_p2p"] and e["state"] != "completed")]
    for e in six["entries"][-2:]:
        e["state"] = "scheduled"
    save(folder, 6, six)
    seven = dump(folder, 7)
    seven["entries"] = [e for e in seven["entries"] if not (e["is_p2p"] and e["p2p_seq_id"] == 4)]
    seven["entries"][-1]["state"] = "scheduled"
    save(folder, 7, seven)
    v = analyze(folder, KB).verdict
    assert v.deadlock is None and not v.summary.startswith("deadlock"), v.text
    assert v.culprit is not None and v.culprit.rank == 3, v.text


def test_the_live_bundle_matches_the_recorders_send_recv_records():
    """The live bundle of the same capture: no dump holds a send/recv, the recorder's records do (peers as
    communicator ranks, mapped by the files' own table): the same matching finds where the waits end."""
    v = analyze(FIX.parent / "bundle.tar.gz", KB).verdict
    assert v.culprit.rank == 3 and named(v) == {3}, v.text
    p2p_root = [a for a in v.culprit.agreeing if a.reason_class == ReasonClass.WAIT_ROOT and a.source == "recorder"
                and "point-to-point" in a.reason]
    assert p2p_root and "4-7" in p2p_root[0].reason, [a.reason for a in v.culprit.agreeing]  # its waiters

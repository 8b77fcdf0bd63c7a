"""The unanswered-send rule (parsers/judges/p2p.py: `unanswered`) over rows that one rank and a digest's class of
ranks both give: at 8 ranks and at 100,000 the same function decides (issue 43 item 2). The rows are what the
seed-42 send/send capture shows (tests/fixtures/i39/sendsend-seed42: ranks 0 and 3 in isend, the rest in
all_reduce), at its size and scaled to a fleet, and the cases where the rule must stay silent."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from forensics.report.words import analyze
from parsers import knowledge
from parsers.gather.evidence import Evidence, RankEvidence
from parsers.judges import p2p
from parsers.judges.p2p import unanswered
from parsers.model import ThreadStack
from parsers.model.findings import ReasonClass

C, G, E = "collective", "gpu-sync", "elsewhere"


def one(rank: int, kind: str, op: str | None) -> tuple:
    return (kind, op, [[rank, rank]])


def capture_rows() -> list[tuple]:
    """The capture's 8 ranks, each its own row, as the judge reads them at 8 ranks."""
    return [one(r, C, "isend" if r in (0, 3) else "all_reduce") for r in range(8)]


def test_the_capture_rank_by_rank():
    assert unanswered(capture_rows(), 8) == ([[0, 0], [3, 3]], "all_reduce", [[1, 2], [4, 7]])


def test_the_same_answer_from_classes_at_fleet_size():
    """Two senders read here, 99,998 ranks in all_reduce judged from their digests' class: the rows differ in
    shape (a class of 99,998 ranks, not 99,998 rows), the answer does not."""
    rows = [one(0, C, "isend"), one(50_003, C, "isend"), (C, "all_reduce", [[1, 50_002], [50_004, 99_999]])]
    assert unanswered(rows, 100_000) == ([[0, 0], [50_003, 50_003]], "all_reduce", [[1, 50_002], [50_004, 99_999]])


@pytest.mark.parametrize("change,why", [
    (lambda rows: rows[:7], "a rank's stack is missing: its op is unknown"),
    (lambda rows: rows[:5] + [one(5, C, "recv")] + rows[6:], "a rank is in a receive: a send may be answered"),
    (lambda rows: rows[:5] + [one(5, E, None)] + rows[6:], "a rank runs outside any op: it may be the stalled one"),
    (lambda rows: rows[:5] + [one(5, C, "barrier")] + rows[6:], "the rest wait in two collectives"),
    (lambda rows: [one(r, C, "all_reduce") for r in range(8)], "no rank in a send"),
    (lambda rows: [one(r, C, "isend") for r in range(8)], "every rank in a send: no collective waits on them"),
    (lambda rows: [one(r, C, "isend" if r < 2 else "wait") for r in range(8)], "the rest in Work.wait: an irecv's"),
])
def test_silent_unless_every_rank_says_so(change, why):
    assert unanswered(change(capture_rows()), 8) is None, why


def test_a_wait_on_the_gpu_is_not_a_collective_the_senders_hold_up():
    """The rest in torch.cuda.synchronize may wait on any kernel, not on a collective the senders have not joined."""
    rows = [one(r, G if r else C, "isend" if r == 0 else "torch.cuda.synchronize") for r in range(4)]
    assert unanswered(rows, 4) is None


I39 = Path(__file__).resolve().parents[2] / "fixtures" / "i39"
KB = knowledge.load(use_env=False)


def _as_read_by(ev: Evidence, ranks: set[int], tool: str) -> Evidence:
    """The bundle with `ranks`' main stacks as `tool` reads them: 'merged' (the capture, py-spy --native),
    'py-spy' (its Python frames) or 'gdb' (its native frames: gdb shows no Python frame)."""
    def view(r: RankEvidence) -> RankEvidence:
        main = r.main_stack
        assert main is not None
        frames = [f for f in main.frames if tool == "merged" or f.native is (tool == "gdb")]
        stack = ThreadStack(main.thread_id, main.name, frames, is_main=True, source=tool)
        return replace(r, pyspy=[] if tool == "gdb" else [stack], gdb=[stack] if tool == "gdb" else [])
    return replace(ev, ranks=[view(r) if r.rank in ranks else r for r in ev.ranks])


@pytest.mark.parametrize("tool", ["merged", "py-spy", "gdb"])
def test_the_capture_names_both_senders_whichever_tool_read_their_stacks(tool):
    """Ranks 0 and 3 of the seed-42 capture as py-spy, gdb or py-spy --native read them: one answer (issue 43 item
    2). gdb names no Python call; its c10d::ProcessGroupNCCL::send is the same send."""
    ev = _as_read_by(analyze(I39 / "sendsend-seed42" / "bundle.tar.gz", KB).evidence, {0, 3}, tool)
    got = p2p.judge(ev)
    assert sorted((s.rank, s.reason_class) for s in got.suspects) == [(0, ReasonClass.UNANSWERED),
                                                                        (3, ReasonClass.UNANSWERED)]


@pytest.mark.parametrize("tool", ["merged", "py-spy", "gdb"])
def test_a_send_to_the_wrong_peer_is_one_answer_whichever_tool_read_its_stack(tool):
    """Rank 1 of the wrong-peer-send capture (seed 41) waits in its send while rank 2's receive from it goes
    unanswered: the recorder's records and its stack's call, read by any tool, name it the wrong peer."""
    ev = _as_read_by(analyze(I39 / "wrongpeersend-seed41" / "bundle.tar.gz", KB).evidence, {1}, tool)
    (suspect,) = p2p.judge(ev).suspects
    assert (suspect.rank, suspect.reason_class) == (1, ReasonClass.WRONG_PEER)

"""ProcessGroupWrapper (TORCH_DISTRIBUTED_DEBUG=DETAIL) lines, read and judged, on real excerpts.

The lines come from the real-world corpus (tests/fixtures/realworld: Lightning #19106, DeepSpeed #7568,
SimpleTuner #2712, SGLang #16237), so the reader is tested on what users paste, in its three forms.
"""

from __future__ import annotations

from dataclasses import replace

from hf_testpaths import FIXTURES
from parsers.judges.logs.tables import WRAPPER, Tables, _checked_ops, find_mismatches
from parsers.judges.logs.verdict import _Acc, _wrapper_reports
from parsers.model.events import ErrorEvent, Origin
from parsers.readers import c10d
from parsers.readers.exception import categorize
from parsers.readers.rank_log import parse_lines

CORPUS = FIXTURES / "realworld"


def _events(stem: str) -> list:
    with open(CORPUS / f"{stem}.log", encoding="utf-8") as fh:
        return [e for e in parse_lines(fh, stem).events if isinstance(e, ErrorEvent)]


def test_running_collective_lines_carry_rank_position_op_and_size():
    evs = _events("lightning-19106")
    assert [(e.kind, e.origin.rank, e.seq, e.op, e.data.numel) for e in evs] == [
        ("c10d-fingerprint", r, 18, "allreduce", 1) for r in (3, 2, 0)]


def test_mismatch_report_names_both_sides_in_every_form():
    """torch 2.x with tensors on one side and 'SequenceNumber=0OpType=GATHER' (no comma) on the other;
    inside another program's error text; and inside SGLang's exception."""
    got = {stem: [(s.rank, s.op, s.seq) for s in _events(stem)[0].data.sides]
           for stem in ("deepspeed-7568", "simpletuner-2712", "sglang-16237")}
    assert got == {"deepspeed-7568": [(2, "allreduce", 32), (3, "gather", 0)],
                   "simpletuner-2712": [(4, "allgather", 101), (7, "reduce", 0)],
                   "sglang-16237": [(13, "barrier", 17), (0, "barrier", 45)]}
    assert _events("simpletuner-2712")[0].origin.rank == 4  # '[RANK 4] ' is the application's rank label


def test_the_oldest_form_names_the_other_side_by_op_only():
    """torch 1.12 printed the other side as a bare op name: the 'Current Error Message' quoted in
    pytorch/pytorch#79901 (2022), whose two display lines are joined here into the one line a log holds."""
    line = ("Detected mismatch between collectives on ranks. Rank 0 is running collective: "
            "CollectiveFingerPrint(OpType=ALLREDUCE, …), but Rank 1 is running collective: REDUCE.")
    ev = c10d.match_line(line, Origin())[0]
    assert [(s.rank, s.op, s.seq) for s in ev.data.sides] == [(0, "allreduce", None), (1, "reduce", None)]


def test_the_exception_is_a_symptom_not_a_cause():
    """The rank that raises is where the check ran, not the odd one: never 'raised' as a cause."""
    assert categorize("RuntimeError", _events("deepspeed-7568")[0].message) == "mismatch"


def _judge(stem: str, world: int | None) -> dict:
    acc: dict[int, _Acc] = {}
    _wrapper_reports([(e.origin.rank, e) for e in _events(stem)], world, lambda r: acc.setdefault(r, _Acc(r)))
    return {r: (a.reason_class, a.confidence) for r, a in acc.items()}


def test_the_rank_the_check_stops_at_is_a_lead_and_a_suspect_only_when_the_rest_agree():
    """The check stops at the first rank, in rank order, that differs: ranks 0-2 agree with rank 2, so
    rank 3 differs from three ranks (a lead); in a stated world of 4 they are all the others (a suspect)."""
    assert _judge("deepspeed-7568", None) == {3: ("mismatch", 0.45)}
    assert _judge("deepspeed-7568", 4) == {3: ("mismatch", 0.6)}
    assert _judge("deepspeed-7568", 8) == {3: ("mismatch", 0.45)}  # ranks 4-7 were not compared
    assert _judge("simpletuner-2712", None) == {7: ("mismatch", 0.45)}


def test_a_check_that_stops_at_rank_0_names_nobody():
    """SGLang #16237: rank 13 differs from rank 0; either may be the odd one."""
    assert _judge("sglang-16237", None) == {}


def test_both_sides_of_a_report_at_one_position_are_compared():
    """Two sides at the same SequenceNumber become signatures there (ProcessGroupWrapper's own numbering,
    kept apart from c10d's SeqNum): a 1-against-1 difference is a tie, no minority."""
    line = _events("deepspeed-7568")[0]
    same = ErrorEvent(kind=line.kind, message=line.message, origin=line.origin, comm="pg:0",
                      data=replace(line.data, sides=[replace(s, seq=32) for s in line.data.sides]))

    class _Ids:
        def resolve(self, origin):
            return origin.rank

        def canonical(self, comm, rank):
            return comm

    t = Tables()
    _checked_ops(t, _Ids(), same)
    assert set(t.signatures) == {(WRAPPER + "pg:0", 32)}
    found = find_mismatches(t)
    assert {tuple(m["ranks"]) for m in found} == {(2,), (3,)} and all(m["tie"] for m in found)


def test_the_torch_1_10_form_names_only_the_raising_side_and_names_nobody():
    """torch 1.10 printed only the raising rank's fingerprint ('Rank 0 is running inconsistent collective:
    CollectiveFingerPrint(OpType=BROADCAST, ...', speechbrain #1166): one side is read, and with no other
    side the check names no rank."""
    evs = _events("speechbrain-1166")
    assert [(e.kind, [(s.rank, s.op, s.seq, s.numel) for s in e.data.sides]) for e in evs] == [
        ("collective-mismatch", [(0, "broadcast", None, 4)])]
    assert _judge("speechbrain-1166", None) == {}

"""TORCH_NCCL_DESYNC_DEBUG's report, read and judged, on real excerpts.

pytorch/pytorch#152623 (tests/fixtures/realworld/pytorch-152623.log): a maintainer's reproduction
whose report names rank 7 as the lagging rank of 8. NVIDIA/nccl#2213 quotes the same line form
without '(count from 1)' from a two-rank job.
"""

from __future__ import annotations

from hf_testpaths import FIXTURES
from parsers.judges.logs import desync
from parsers.judges.logs.verdict import _Acc
from parsers.model.events import ErrorEvent, Origin
from parsers.readers.prefix import strip_prefix
from parsers.readers import c10d
from parsers.readers.rank_log import parse_lines

LOG = FIXTURES / "realworld" / "pytorch-152623.log"


def _events(lines) -> list[ErrorEvent]:
    return [e for e in parse_lines(iter(lines), "pytorch-152623").events if isinstance(e, ErrorEvent)]


def _judge(events, world=None) -> dict:
    acc: dict[int, _Acc] = {}
    desync.offer_suspects([(e.origin.rank, e) for e in events], world, lambda r: acc.setdefault(r, _Acc(r)))
    return {r: (a.reason_class, a.confidence) for r, a in acc.items()}


def test_the_report_and_its_snapshot_are_read():
    evs = [e for e in _events(LOG.read_text(encoding="utf-8").splitlines(True)) if e.kind.startswith("desync")]
    assert [(e.kind, e.data.to_dict()) for e in evs] == [
        ("desync-lagging",{"lagging": [7], "state": "finished-before", "collective": 182}),
        ("desync-state",{"ranks": [7], "state": "finished", "last_op": "allreduce"}),
        ("desync-state",{"ranks": [0, 1, 2], "state": "started", "last_op": "allreduce"}),
        ("desync-state",{"ranks": [3, 4, 5, 6], "state": "started", "last_op": "allgather"})]
    assert all(e.seq is None and e.op is None for e in evs)  # the report's count is not SeqNum


def test_a_bracketed_rank_in_the_report_is_not_a_launcher_label():
    """'[7] finished ALLREDUCE' is about rank 7, printed by rank 0: the prefix reader must leave it."""
    for line in ("             [7] finished collective #182, but didn't join collective #183 (count from 1)",
                 "             [7] finished ALLREDUCE"):
        text, info = strip_prefix(line)
        assert info.label is None and text.startswith("[7] ")


def test_the_lagging_minority_is_named_behind():
    assert _judge(_events(LOG.read_text(encoding="utf-8").splitlines(True))) == {7: ("behind", 0.6)}


def test_without_the_snapshot_or_a_world_size_nobody_is_named():
    """The lagging line alone does not say how many ranks went on: NVIDIA/nccl#2213's line, two ranks."""
    line = "[1] finished collective #1155873, but didn't join collective #1155874"
    text, _ = strip_prefix(line)
    evs = c10d.match_line(text, Origin(rank=0))
    assert [(e.kind, e.data.lagging, e.data.collective) for e in evs] == [("desync-lagging", [1], 1155873)]
    assert _judge(evs) == {}
    assert _judge(evs, world=2) == {}  # one of two is no minority


def test_a_lagging_majority_names_nobody():
    """Ranks 0-6 lagging of 8 would say as much about rank 7 running ahead: built from the real lines."""
    lines = LOG.read_text(encoding="utf-8").replace("[7] finished collective", "[0, 1, 2, 3, 4, 5, 6] finished "
                                                    "collective").splitlines(True)
    assert _judge(_events(lines)) == {}

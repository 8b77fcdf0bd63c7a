"""A rank's wait for the NCCL unique id of another rank (issue 42 item 1: the pytest-reported form).

Real lines: pytorch/pytorch#82091 (torch 1.x RuntimeError, spelt 'retreiving', rank 2 waits for rank 0) and
hiyouga/LlamaFactory#3698 (torch 2.x DistBackendError, rank 4); the waiting rank is the one that prints, the rank
waited for is in its words.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from parsers.model.events import Origin
from parsers.readers import unique_id

CORPUS = Path(__file__).resolve().parents[2] / "fixtures" / "realworld"


@pytest.mark.parametrize("stem, me", [("pytorch-82091", 2), ("llamafactory-3698", 4)])
def test_the_waiting_rank_and_the_rank_waited_for(stem, me):
    line = (CORPUS / f"{stem}.log").read_text().splitlines()[0]
    [event] = unique_id.match_line(line, Origin())
    assert event.kind == "store-timeout" and event.origin.rank == me
    assert event.data.waits_for == 0 and event.data.why == "Socket Timeout"


def test_a_launcher_rank_on_the_line_wins():
    line = (CORPUS / "pytorch-82091.log").read_text().splitlines()[0]
    [event] = unique_id.match_line(line, Origin(rank=6))
    assert event.origin.rank == 6 and event.data.waits_for == 0


def test_other_lines_give_nothing():
    assert unique_id.match_line("NCCL INFO ncclUniqueId sent", Origin()) == []

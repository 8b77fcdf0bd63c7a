"""DDP's reducer error ('Expected to have finished reduction in the prior iteration ...'), issue 42 item 1.

Real excerpts of five threads (tests/fixtures/realworld/: cutie-125, ddcap-35, mmdet-8626, mmpose-3111,
tune-a-video-78, mmdet3d-488): the rank the error is about comes from its own words ('did not receive grad for
rank N'), over ranks 0, 2 and 3 and both wordings of torch's message; the advice lines are understood, not
'not understood'; a prefix's rank never hides the rank the message names.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from parsers.model.events import Origin
from parsers.readers import ddp, rank_log

CORPUS = Path(__file__).resolve().parents[2] / "fixtures" / "realworld"


@pytest.mark.parametrize("stem, rank", [("cutie-125", 3), ("ddcap-35", 0), ("mmdet-8626", 3), ("mmpose-3111", 2),
                                        ("tune-a-video-78", 0)])
def test_the_rank_is_the_one_the_message_names(stem, rank):
    parsed = rank_log.parse_lines((CORPUS / f"{stem}.log").read_text().splitlines(), f"{stem}.log")
    named = {e.origin.rank for e in parsed.events if getattr(e, "kind", "") == ddp.KIND and e.origin.rank is not None}
    assert named == {rank}


@pytest.mark.parametrize("stem", ["cutie-125", "ddcap-35", "mmdet-8626", "mmpose-3111", "mmdet3d-488"])
def test_torchs_advice_lines_are_understood(stem):
    lines = (CORPUS / f"{stem}.log").read_text().splitlines()
    parsed = rank_log.parse_lines(lines, f"{stem}.log")
    sample = [text for _, text in parsed.facts.get("unknown_sample", [])]
    assert not [t for t in sample if "forward" in t or "TORCH_DISTRIBUTED_DEBUG" in t], sample


def test_both_wordings_of_the_head_are_read():
    one = (CORPUS / "mmdet3d-488.log").read_text().splitlines()[0]  # torch 1.x: '(1) passing ... (2) making sure'
    two = (CORPUS / "mmdet-8626.log").read_text().splitlines()[4]  # later: '... and by' then a new line
    for line in (one, two):
        [event] = ddp.match_line(line, Origin(rank=5))
        assert event.kind == ddp.KIND and event.origin.rank == 5  # no rank in these words: the line's own stays


def test_a_prefix_rank_does_not_hide_the_rank_the_list_names():
    line = (CORPUS / "cutie-125.log").read_text().splitlines()[3]
    [event] = ddp.match_line(line, Origin(rank=0, host="node-1"))
    assert event.origin.rank == 3 and event.origin.host == "node-1"
    assert event.data.named.startswith("mask_encoder.sensory_update")


def test_lines_that_only_mention_the_option_are_not_the_error():
    assert ddp.match_line("find_unused_parameters=True was specified in DDP constructor, but did not find any unused "
                          "parameters in the forward pass.", Origin()) == []

"""The global rank from the message's own default-group tag when a `[rankN]:` prefix disagrees (issue 42 item 6).

torchtitan-style runs keep each node's local rank in the prefix; the default group's `[PG ID 0 PG GUID
0(default_pg) Rank r]` is the global rank by definition. The lines are real (XPixelGroup/BasicSR#737,
huggingface/accelerate#3861, axolotl-ai-cloud/axolotl#3476, tests/fixtures/realworld); the prefix a per-node
launcher would have left is the origin the reader is handed. pytorch/torchtitan#810 is the shape as posted:
`[rank0]:` before `[PG ID 0 PG GUID 0(default_pg) Rank 4]` on a JUWELS run, each node's local rank 0 in the
prefix.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from parsers.model.events import Origin
from parsers.readers.prefix import strip_prefix
from parsers.readers import c10d, rank_log

CORPUS = Path(__file__).resolve().parents[2] / "fixtures" / "realworld"


def _payload(stem: str, needle: str) -> tuple[str, int]:
    line = next(ln for ln in (CORPUS / f"{stem}.log").read_text().splitlines() if needle in ln)
    text, pre = strip_prefix(line)
    return text, pre.rank


@pytest.mark.parametrize("stem, rank", [("basicsr-737", 1), ("accelerate-3861", 2), ("axolotl-3476-tmux", 1)])
def test_default_group_rank_wins_over_a_per_node_prefix(stem, rank):
    text, prefix_rank = _payload(stem, f"0(default_pg) Rank {rank}]")
    assert prefix_rank == rank  # as posted, they agree
    for per_node in {0, 1} - {rank}:
        events = c10d.match_line(text, Origin(rank=per_node))
        assert events and {e.origin.rank for e in events} == {rank}


def test_a_subgroup_tag_never_overrides_the_prefix():
    text, _ = _payload("megatron-935", "Rank 5]")
    events = c10d.match_line(text, Origin(rank=13))
    assert events and {e.origin.rank for e in events} == {13}  # a subgroup's rank is no global rank


def test_a_posted_per_node_prefix_gives_the_message_rank_and_no_rank_0():
    """torchtitan#810 as posted: the timeout is global rank 4's, and the `[rank0]:` on its frame lines names no
    global rank (before: the file counted as rank 0's, which 'never logged the operation' rank 4 waits in)."""
    lines = (CORPUS / "torchtitan-810.log").read_text().splitlines()
    parsed = rank_log.parse_lines(lines, "torchtitan-810.log")
    timeouts = [e for e in parsed.events if getattr(e, "kind", "") == "watchdog-timeout"]
    assert [(e.origin.rank, e.seq) for e in timeouts] == [(4, 49120)]
    assert parsed.facts.get("rank") != 0 and 0 not in parsed.facts.get("ranks", [])
    assert parsed.facts["per_node_prefixes"] == [0]
    assert all(getattr(e, "origin", None) is None or e.origin.rank != 0 for e in parsed.events)


def test_a_prefix_that_agrees_stays_a_global_rank():
    """basicsr#737's `[rank1]:` with `Rank 1]` in the message: nothing per-node, its ranks stay."""
    parsed = rank_log.parse_lines((CORPUS / "basicsr-737.log").read_text().splitlines(), "basicsr-737.log")
    assert "per_node_prefixes" not in parsed.facts
    assert {0, 1, 2} <= set(parsed.facts["ranks"])

"""PyTorch 1.x's store-based barrier timeout ('Timed out initializing process group in store based barrier on
rank: R, for key: K (world_size=W, worker_count=C, ...)') read as a store timeout of rank R: C of W counted.

Real lines: the corpus excerpts of PseCo #15 (worker_count 16 past world_size 4: a reused store) and
metaseq #52 (1792 of 2048).
"""

from __future__ import annotations

from hf_testpaths import FIXTURES
from parsers.model.events import ErrorEvent, Origin
from parsers.readers import c10d
from parsers.readers.rank_log import parse_lines


def _store_timeouts(stem: str) -> list[ErrorEvent]:
    with open(FIXTURES / "realworld" / f"{stem}.log", encoding="utf-8") as fh:
        parsed = parse_lines(fh, stem)
    return [e for e in parsed.events if isinstance(e, ErrorEvent) and e.kind == "store-timeout"]


def test_barrier_timeout_names_its_rank_and_counts():
    [ev] = _store_timeouts("metaseq-52")
    assert ev.origin.rank == 4330
    assert (ev.data.joined, ev.data.expected) == (1792, 2048)


def test_count_past_world_size_is_kept_as_printed():
    [ev] = _store_timeouts("pseco-15")
    assert ev.origin.rank == 0 and (ev.data.joined, ev.data.expected) == (16, 4)


def test_a_rank_prefix_wins_over_the_message_rank():
    line = ("[rank3]: RuntimeError: Timed out initializing process group in store based barrier on rank: 3, "
            "for key: store_based_barrier_key:1 (world_size=8, worker_count=4, timeout=0:00:30)")
    [ev] = [e for e in c10d.match_line(line.split(": ", 1)[1], Origin(rank=5)) if isinstance(e, ErrorEvent)]
    assert ev.kind == "store-timeout" and ev.origin.rank == 5


def test_waiting_line_is_no_timeout():
    line = ("Waiting in store based barrier to initialize process group for rank: 0, key: store_based_barrier_key:1 "
            "(world_size=4, worker_count=16, timeout=0:01:00)")
    assert [e.kind for e in c10d.match_line(line, Origin()) if isinstance(e, ErrorEvent)] == []

"""Issue 41 item 4: one collection time in a verdict. The recorder's age sentences ('no progress for 10.0 s
before ...') date the recorder copy against the manifest's collection time (said once, under the VERDICT)
as an offset, not as a second clock time a second (or 32 s with --gdb) later. Real input: the 8-rank NCCL
collection with recorder state (tests/fixtures/nccl/sleep/bundle)."""

from __future__ import annotations

import pytest

from hf_testpaths import FIXTURES
from parsers.gather.evidence import load_path
from parsers.judges.recorder import analyse, wait_edges

BUNDLE = FIXTURES / "nccl" / "sleep" / "bundle"


def _said(collected_unix: float | None) -> list[str]:
    states = load_path(BUNDLE).recorder
    said = [str(e) for st in analyse(states, collected_unix=collected_unix) for s in st.suspects for e in s.evidence]
    return said + [str(v) for e in wait_edges(states, collected_unix=collected_unix) for v in vars(e).values()]


@pytest.mark.parametrize("before_s,words", [(0.2, "before the collection time"),
                                            (1.0, "before the recorder copy, 1 s after the collection time"),
                                            (32.0, "before the recorder copy, 32 s after the collection time")])
def test_the_copy_is_an_offset_from_the_collection_time(before_s: float, words: str) -> None:
    states = load_path(BUNDLE).recorder
    copy = max(st.observed_ns for st in states if st.observed_is_copy) / 1e9
    lines = [x for x in _said(copy - before_s) if "no progress for" in x]
    assert lines and all(words in x and "UTC" not in x for x in lines), lines  # wording is the behaviour


def test_without_a_collection_time_the_copy_keeps_its_clock() -> None:
    lines = [x for x in _said(None) if "no progress for" in x]
    # wording is the behaviour
    assert lines and all("before the collection at " in x and " UTC" in x for x in lines), lines

"""Every real excerpt in tests/fixtures/realworld yields the records its .json lists.

The excerpts were posted by users in public issue threads (URL in each .json); the
records say what a correct reader must see in them, independent of how this
project's readers spell it (mapping in _records.py).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from _load import load
from _records import missing, records_of

CORPUS = Path(__file__).resolve().parents[2] / "fixtures" / "realworld"
CASES = sorted(p.stem for p in CORPUS.glob("*.json"))


def _case(stem: str) -> tuple[dict, list]:
    meta = json.loads((CORPUS / f"{stem}.json").read_text(encoding="utf-8"))
    return meta, load(CORPUS / f"{stem}.log")


def test_corpus_is_big_enough_and_sourced():
    assert len(CASES) >= 45
    for stem in CASES:
        meta = json.loads((CORPUS / f"{stem}.json").read_text(encoding="utf-8"))
        assert meta["source_url"].startswith("https://github.com/"), stem
        assert meta["records"], f"{stem}: an excerpt must state what it contains"
        assert (CORPUS / f"{stem}.log").stat().st_size > 0
        truth = meta["truth"]
        if not truth["known"]:
            assert truth["culprit_rank"] is None and truth["culprit_host"] is None, stem


@pytest.mark.parametrize("stem", CASES)
def test_expected_records_are_yielded(stem, request):
    meta, parsed = _case(stem)
    if meta.get("reader_gap"):  # a gap outside the line readers, stated in the .json: must flip when fixed
        request.node.add_marker(pytest.mark.xfail(strict=True, reason=meta["reader_gap"]))
    assert parsed, f"{stem}: nothing was read"
    lost = missing(meta["records"], records_of(parsed))
    assert not lost, f"{stem}: records not yielded: {lost}"


@pytest.mark.parametrize("stem", CASES)
def test_recognisable_lines_are_read_or_listed_as_gaps(stem):
    """Lines that look like NCCL/PyTorch/launcher/host output but were not understood are
    reported by the reader (Parsed.unread); each must be a gap the .json admits."""
    meta, parsed = _case(stem)
    unread = [text for p in parsed for _, text in getattr(p, "unread", [])]
    gaps = meta.get("known_gaps", [])
    unexplained = [t for t in unread if not any(g in t for g in gaps)]
    assert not unexplained, f"{stem}: recognisable but unread: {unexplained}"
    assert len(unread) <= len(gaps), f"{stem}: more unread lines than listed gaps: {unread}"

"""Issue 13 item 3: verdicts on every real excerpt, alone in a folder.

Where the thread establishes the truth the verdict must reach it (cases in verdicts.GAPS
are known misses, strict xfail; cases in verdicts.BEYOND_EXCERPT are truths the thread took
from outside the excerpt, judged as honest); where it does not, no culprit may be named
(confidence 0.5 or more), and the summary must say what the excerpt shows.
"""

from __future__ import annotations

import json

import pytest

from verdicts import BEYOND_EXCERPT, CORPUS, GAPS, judge, stems


@pytest.mark.parametrize("stem", stems())
def test_verdict_is_right_or_honest(stem, request):
    if stem in GAPS:
        request.node.add_marker(pytest.mark.xfail(strict=True, reason=GAPS[stem]))
    j = judge(stem)
    assert j.ok, (j.outcome, j.culprit, j.summary)
    assert j.summary


@pytest.mark.integration  # a sweep: every real-world case judged again (the per-case tests stay in the fast lane)
def test_no_overclaim_anywhere():
    bad = [(j.stem, j.culprit) for j in map(judge, stems()) if j.outcome == "overclaim"]
    assert bad == []


def test_truths_beyond_the_excerpt_are_known_truths_of_the_corpus():
    """A case moved to 'honest' because its excerpt cannot reach the thread's truth must be a known truth."""
    for stem in BEYOND_EXCERPT:
        assert json.loads((CORPUS / f"{stem}.json").read_text())["truth"]["known"], stem
        assert stem not in GAPS, stem

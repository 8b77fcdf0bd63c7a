"""Whose timeout made a rank dump, from the c10d line itself, on real excerpts (tests/fixtures/realworld)."""

from __future__ import annotations

import shutil

from hf_testpaths import FIXTURES
from parsers import knowledge
from parsers.pipeline.analyze import analyze
from parsers.model.events import ErrorEvent
from parsers.readers.rank_log import parse_lines
from facts import observed, says

CORPUS = FIXTURES / "realworld"


def _dumps(stem: str) -> list:
    with open(CORPUS / f"{stem}.log", encoding="utf-8") as fh:
        return [(e.origin.rank, e.data.from_rank) for e in parse_lines(fh, stem).events
                if isinstance(e, ErrorEvent) and e.kind == "dump-signal"]


def test_a_dump_asked_by_another_rank_names_that_rank():
    """NeMo RL #2140: 'Received a dump signal due to a collective timeout from  rank 107' on rank 31."""
    assert (31, 107) in _dumps("nemo-rl-2140")


def test_a_dump_for_its_own_timeout_names_no_other_rank():
    """accelerate #3861: '... from this local rank': the rank dumps for its own timeout."""
    assert _dumps("accelerate-3861-dump") and all(frm is None for _r, frm in _dumps("accelerate-3861-dump"))


def test_the_summary_says_whose_timeout_asked_for_the_dumps(tmp_path):
    shutil.copy(CORPUS / "nemo-rl-2140.log", tmp_path)
    verdict = analyze(tmp_path, knowledge.load(use_env=False)).verdict
    assert says(observed(verdict, "dump-ask"), "rank 31", "rank 107"), verdict.observations


def test_a_group_rank_other_than_the_global_rank_is_not_the_default_group():
    """prime-rl #3186: '[rank13]:... [Rank 1] Watchdog caught ...' has no PG tag, but global rank 13 is rank 1
    of its group: the line is a subgroup's, keyed apart per rank, never compared as the default group."""
    with open(CORPUS / "prime-rl-3186.log", encoding="utf-8") as fh:
        evs = [e for e in parse_lines(fh, "x").events if isinstance(e, ErrorEvent) and e.kind == "watchdog-timeout"]
    assert [(e.origin.rank, e.comm, e.seq) for e in evs] == [(13, "pg:unnamed@13", 1438)]

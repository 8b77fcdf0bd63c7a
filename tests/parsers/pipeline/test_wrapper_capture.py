"""ProcessGroupWrapper's check in a real run (tests/fixtures/detail/mismatch, torch 2.13 gloo, DETAIL):
every rank raises, the rank that differs is found, and without the job's size it stays a lead."""

from __future__ import annotations

import json

from hf_testpaths import FIXTURES
from parsers import knowledge
from parsers.pipeline.analyze import analyze
from parsers.gather.evidence import load_directory
from parsers.model.events import ErrorEvent

FOLDER = FIXTURES / "detail" / "mismatch"


def test_every_rank_reports_and_names_the_first_rank_that_differs():
    ev = load_directory(FOLDER)
    reports = sorted((e.origin.rank, e.data.sides[1].rank) for a in ev.artifacts if a.parsed
                     for e in a.parsed.events if isinstance(e, ErrorEvent) and e.kind == "collective-mismatch")
    assert reports == [(0, 1), (1, 0), (2, 1), (3, 1)]


def test_the_rank_that_differs_leads_but_is_not_named_without_the_jobs_size():
    truth = json.loads((FOLDER / "truth.json").read_text())
    v = analyze(FOLDER, knowledge.load(use_env=False)).verdict
    assert v.culprit is None
    lead = v.suspects[0]
    assert (lead.rank, str(lead.reason_class), lead.confidence) == (truth["culprit_rank"], "mismatch", 0.45)

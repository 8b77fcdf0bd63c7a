"""The verdict on every real fixture with known truth: culprit global rank, host and reason class.

Fixtures are real jobs (tests/fixtures/README.md); NCCL ones appear under
fixtures/nccl/<scenario>/ once captured on the GPU machine and are picked up here.
"""

import json
from pathlib import Path

import pytest

from parsers.artifacts import load_directory
from parsers.correlate import correlate

FIX = Path(__file__).parents[2] / "fixtures"


def _is_scenario(truth: Path) -> bool:
    """A scenario run of scripts/device/nccl_scenarios.py: its truth names a culprit rank.

    Other fixtures keep a truth.json of another shape (recorder/sigstop8 names a victim
    for the recorder plugin's own tests) and are no job for the log correlation.
    """
    try:
        return "culprit_rank" in json.loads(truth.read_text())
    except ValueError:
        return False


SCENARIOS = sorted(p.parent for p in FIX.glob("*/*/truth.json") if _is_scenario(p))


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[f"{p.parent.name}-{p.name}" for p in SCENARIOS])
def test_culprit_named(scenario):
    truth = json.loads((scenario / "truth.json").read_text())
    analysis = correlate(load_directory(scenario))
    culprit = analysis.culprit
    assert culprit is not None, analysis.sections
    assert culprit.rank == truth["culprit_rank"], [s.to_dict() for s in analysis.suspects]
    assert culprit.host == truth["culprit_host"]
    assert culprit.reason_class in truth["expected_reason_classes"], culprit.to_dict()
    assert culprit.evidence and 0.5 < culprit.confidence <= 0.99
    json.dumps(analysis.to_dict())  # sections are JSON-able


def test_gloo_scenarios_give_the_specific_reason():
    expected = {"sleep": "missing-line", "sigstop": "no-dump", "kill": "no-dump", "mismatch": "mismatch",
                "chain": "wait-root"}
    for name, cls in expected.items():
        assert correlate(load_directory(FIX / "gloo" / name)).culprit.reason_class == cls, name


def test_missing_line_table_names_who_did_not_log():
    analysis = correlate(load_directory(FIX / "gloo" / "sleep"))
    rows = [r for r in analysis.sections["missing_lines"] if r["comm"] == "pg:0" and r["seq"] == 11]
    assert rows and rows[0]["missing"] == "1" and rows[0]["logged"] == "0,2-3"


def test_chain_graph_follows_three_groups():
    analysis = correlate(load_directory(FIX / "gloo" / "chain"))
    g = analysis.graph
    assert {(0, 1), (1, 2), (2, 3)} <= set(g.edges)
    assert {g[u][v]["comm"] for u, v in [(0, 1), (1, 2), (2, 3)]} == {"pg:pg_A", "pg:pg_B", "pg:pg_C"}
    assert analysis.sections["graph"]["roots"] == [3]


def test_absence_of_a_whole_rank_is_evidence(tmp_path):
    """Drop every file of the killed rank: it is still named, as a rank with no evidence at all."""
    import shutil

    src = FIX / "gloo" / "kill"
    for p in src.rglob("*"):
        if p.is_file() and "node03" not in p.parts:
            dst = tmp_path / p.relative_to(src)
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(p, dst)
    analysis = correlate(load_directory(tmp_path))
    # Nothing left states the world size, so the rank number cannot be known: say so, don't guess.
    assert analysis.culprit.rank is None and analysis.culprit.reason_class == "no-dump"
    assert "no evidence" in analysis.culprit.reason


def test_text_rendering_names_culprit_first():
    from parsers.correlate.render import render_text

    text = render_text(correlate(load_directory(FIX / "gloo" / "chain")))
    assert text.startswith("CULPRIT: rank 3 (node03)") and "wait-for graph: 4 ranks" in text


def test_mismatch_explains_the_wait_no_phantom_suspect():
    analysis = correlate(load_directory(FIX / "gloo" / "mismatch"))
    assert [s.rank for s in analysis.suspects] == [1]

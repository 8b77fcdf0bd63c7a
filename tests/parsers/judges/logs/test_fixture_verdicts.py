"""The verdict on every real fixture with known truth: culprit global rank, host and reason class.

Fixtures are real jobs (tests/fixtures/README.md); NCCL ones appear under
fixtures/nccl/<scenario>/ once captured on the GPU machine and are picked up here.
"""

import json
from pathlib import Path

import pytest

from parsers.gather.evidence import load_directory
from parsers.judges.logs import correlate

pytestmark = pytest.mark.integration  # it starts real processes (it was under tests/integration)

FIX = Path(__file__).resolve().parents[3] / "fixtures"


def _is_scenario(truth: Path) -> bool:
    """A scenario run of scripts/device/nccl_scenarios.py: its truth names a culprit rank.

    Other fixtures keep a truth.json of another shape (recorder/sigstop8 names a victim
    for the recorder plugin's own tests) and are no job for the log correlation.
    """
    try:
        data = json.loads(truth.read_text())
    except ValueError:
        return False
    return "culprit_rank" in data and not data.get("lead_only")  # detail/mismatch: a lead, tested on its own


#: scenario folders of loose files (gloo14/* hold a live bundle and post-mortem files apart:
#: tests/parsers/pipeline/test_issue14_verdicts.py judges those with the whole pipeline; issue26/* hold
#: both as archives: tests/parsers/pipeline/test_issue26_cases.py)
SCENARIOS = sorted(p.parent for p in FIX.glob("*/*/truth.json") if _is_scenario(p) and not (p.parent / "live").is_dir()
                   and not (p.parent / "logs.tar.gz").is_file())


def test_the_scenarios_are_there():
    """An empty glob would skip test_culprit_named, not fail it."""
    assert len(SCENARIOS) >= 13, SCENARIOS


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


def _without_rank3(tmp_path):
    import shutil

    src = FIX / "gloo" / "kill"
    for p in src.rglob("*"):
        if p.is_file() and "node03" not in p.parts:
            dst = tmp_path / p.relative_to(src)
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(p, dst)
    return correlate(load_directory(tmp_path))


def test_absence_of_a_whole_rank_is_evidence(tmp_path):
    """Drop every file of the killed rank: the others' Flight Recorder dumps still list their one
    group's ranks ([0, 1, 2, 3]), so rank 3 is known, and it is the rank with no dump they wait on."""
    analysis = _without_rank3(tmp_path)
    c = analysis.culprit
    assert c is not None and (c.rank, str(c.reason_class)) == (3, "no-dump")


def test_mismatch_explains_the_wait_no_phantom_suspect():
    analysis = correlate(load_directory(FIX / "gloo" / "mismatch"))
    assert [s.rank for s in analysis.suspects] == [1]


def _subset(src: Path, dst: Path, keep) -> Path:
    """Copy the loose files of a scenario that `keep(path)` accepts (never the bundle or the truth)."""
    import shutil

    for p in src.rglob("*"):
        if p.is_file() and "bundle" not in p.relative_to(src).parts and p.name != "truth.json" and keep(p):
            out = dst / p.relative_to(src)
            out.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(p, out)
    return dst


def test_nccl_logs_alone_name_the_killed_rank_by_its_ring_neighbours(tmp_path):
    """Only NCCL INFO logs of the kill scenario: every rank logged op 0x40a, so counts cannot tell;
    ranks 0 and 6 logged 'Connection closed by remote peer', and rank 7 is their one shared ring neighbour."""
    src = FIX / "nccl" / "kill"
    analysis = correlate(load_directory(_subset(src, tmp_path, lambda p: p.name.startswith("nccl."))))
    c = analysis.culprit
    assert (c.rank, c.host, c.reason_class) == (7, "node07", "lost-peer") and c.confidence <= 0.5


def test_each_source_alone_still_names_the_chain_root(tmp_path):
    src = FIX / "nccl" / "chain"
    for name, keep in {"fr": lambda p: p.name.startswith("fr_"), "nccl": lambda p: p.name.startswith("nccl."),
                       "stderr": lambda p: p.name.endswith(".stderr")}.items():
        c = correlate(load_directory(_subset(src, tmp_path / name, keep))).culprit
        assert (c.rank, c.host) == (3, "node03"), name


def test_absence_alone_is_a_lead_and_ras_confirms_it_once():
    """SIGSTOPped rank 3 reached op 13 by its own (late) watchdog line and only failed to dump: the
    verdict names it but stays modest, and three RAS answers of one view add one confirmation."""
    c = correlate(load_directory(FIX / "nccl" / "sigstop")).culprit
    assert (c.rank, c.reason_class) == (3, "no-dump") and 0.5 < c.confidence <= 0.8
    ras_lines = [e for e in c.evidence if e.startswith("NCCL RAS")]
    assert ras_lines and len(ras_lines) == len(set(ras_lines))

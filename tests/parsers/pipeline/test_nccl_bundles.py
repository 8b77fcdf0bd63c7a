"""`forensics analyze` on bundles collected live from real NCCL 2.28.9 hangs on an H200.

Captured by scripts/device/run_matrix.sh (part S): 8 ranks as 8 hosts on one GPU,
the NCCL recorder plugin loaded, `forensics collect --native` run while the hang
held. Each scenario's truth.json names the rank that was broken and how.
"""

from __future__ import annotations

import json

import pytest

from hf_testpaths import FIXTURES
from forensics.report.words import analyze

pytestmark = pytest.mark.integration  # it starts real processes (it was under tests/integration)

SCENARIOS = sorted(p.parent.parent.name for p in (FIXTURES / "nccl").glob("*/bundle/manifest.json"))


def test_fixtures_present():
    assert SCENARIOS == ["chain", "kill", "mismatch", "sigstop", "sleep"]


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_culprit_named_from_live_bundle(scenario):
    root = FIXTURES / "nccl" / scenario
    truth = json.loads((root / "truth.json").read_text())
    verdict = analyze(root / "bundle").verdict
    culprit = verdict.culprit
    assert culprit is not None, verdict.summary
    assert culprit.rank == truth["culprit_rank"], (verdict.summary, [s.to_dict() for s in verdict.suspects[:3]])
    assert f"rank {truth['culprit_rank']} " in verdict.summary


def test_stopped_rank_is_named_by_process_state_and_recorder():
    verdict = analyze(FIXTURES / "nccl" / "sigstop" / "bundle").verdict
    assert verdict.culprit.reason_class == "stopped"
    assert verdict.sections["recorder"]["state_files"] == 8
    # the recorder agrees: it entered, then froze (an agreeing finding of another source)
    assert any(a.source == "recorder" and "entered" in a.reason for a in verdict.culprit.agreeing)
    assert {"stacks", "recorder"} <= set(verdict.culprit.sources)


def test_wait_chain_root_beats_the_ranks_that_wait_in_other_groups():
    verdict = analyze(FIXTURES / "nccl" / "chain" / "bundle").verdict
    assert verdict.culprit.rank == 3
    # the ranks that wait on it are its consequences now (issue 26), still demoted: they wait themselves
    by_rank = {s.rank: s for s in verdict.suspects + verdict.culprit.consequences}
    for waiter in (1, 2):
        assert by_rank[waiter].confidence < verdict.culprit.confidence
        assert by_rank[waiter].demotion is not None and by_rank[waiter].demotion.waits_on is not None


X2 = sorted(f"{p.parent.parent.parent.name}/{p.parent.parent.name}"
            for p in (FIXTURES / "nccl_x2").glob("*/*/bundle/manifest.json"))


def test_x2_fixtures_present():
    """Issue 9: two H200s over NVLink (NV18), one rank per GPU (p2p) and 2 GPUs as one host + fake hosts (mixed)."""
    assert X2 == [f"{layout}/{s}" for layout in ("mixed", "p2p") for s in ("kill", "sigstop", "sleep")]


@pytest.mark.parametrize("case", X2)
def test_x2_culprit_named(case):
    root = FIXTURES / "nccl_x2" / case
    truth = json.loads((root / "truth.json").read_text())
    verdict = analyze(root / "bundle").verdict
    assert verdict.culprit is not None and verdict.culprit.rank == truth["culprit_rank"], verdict.summary
    if case.endswith("sigstop"):
        assert verdict.culprit.reason_class == "stopped"


def test_p2p_layout_really_used_nvlink_p2p():
    """The p2p captures ran over NCCL's P2P transport (not sockets), as on a real 8-GPU node."""
    logs = list((FIXTURES / "nccl_x2" / "p2p" / "sleep").glob("node00/nccl.*.log"))
    assert logs and any("via P2P/" in line for line in logs[0].read_text().splitlines())


@pytest.mark.parametrize("scenario", ["mismatch", "chain", "sleep"])
def test_cli_analyzes_a_loose_folder(scenario, forensics_cli, cli_env):
    """Users hand over folders of logs and dumps, not bundles: analyze reads them by content."""
    import subprocess

    root = FIXTURES / "nccl" / scenario
    truth = json.loads((root / "truth.json").read_text())
    done = subprocess.run([*forensics_cli, "analyze", str(root), "--json"], env=cli_env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    culprit = json.loads(done.stdout)["culprit"]
    assert (culprit["rank"], culprit["host"]) == (truth["culprit_rank"], truth["culprit_host"])


@pytest.mark.parametrize("scenario", ["sleep", "sigstop"])
def test_preload_shim_on_real_nccl(scenario):
    """Issue 4 item 6: the LD_PRELOAD shim (for NCCL without a profiler) loaded into real NCCL
    2.28.9 under PyTorch on the H200, no plugin: every rank's ops land in the same state file."""
    root = FIXTURES / "recorder" / "preload_nccl2289" / scenario
    truth = json.loads((root / "truth.json").read_text())
    result = analyze(root / "bundle")
    states, problems = result.evidence.recorder, [p for p in result.evidence.problems if "recorder" in p]
    assert problems == [] and len(states) == 4
    assert {s.writer for s in states} == {"preload-shim"} and {s.abi_version for s in states} == {22809}
    assert all(len(s.colls) >= 10 for s in states)
    assert result.verdict.culprit.rank == truth["culprit_rank"]

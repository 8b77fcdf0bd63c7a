"""Slow, not hung (issue 15), in real 4-rank gloo jobs armed with forensics.arm():

- one rank sleeps 0.3 s in slow_data_step before every all_reduce: rank 0's watch sees it
  arrive last at every step's first collective and fires one 'straggler' incident naming
  it; the leader's collection takes py-spy samples (--samples), whose activity line says
  where the straggler spends its time; the per-rank step series name the same rank;
- a healthy job of the same shape fires nothing and its series name no one.
Timing enters only as generous limits.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from armed_launch import incidents, start, stop, wait_for_bundle
from fleet_simjob import REPO

pytestmark = pytest.mark.integration
RANKS = 4
CULPRIT = 2


def _series(out: Path) -> dict:
    from parsers.steps.series import read_series

    return {r: read_series(out / f"steps-rank{r}.csv") for r in range(RANKS)}


def test_a_rank_late_by_300ms_fires_one_straggler_incident_with_samples(tmp_path):
    pytest.importorskip("torch")
    from parsers.gather.evidence import load_path
    from parsers.judges.activity import rank_activities
    from parsers.judges.step_ranks import compare_ranks

    procs, out = start(tmp_path, "straggle", 29931, "--culprit", str(CULPRIT), "--slow", "0.3", "--steps", "60",
                       "--stall-after", "30", "--slow-factor", "1000", ranks=RANKS, pg_timeout=60.0,
                       env_extra={"FORENSICS_COLLECT_ARGS": "--samples 12 --sample-interval 0.1"})
    try:
        record, summary, _ = wait_for_bundle(out, procs, 90.0, kind="straggler")
        assert record["suspects"] == [CULPRIT] and f"rank {CULPRIT}" in record["message"], record
        assert summary["ranks"] == RANKS
        for proc in procs:
            assert proc.wait(timeout=90) == 0  # slow, never hung: the job finishes
        assert [i["kind"] for i in incidents(out)] == ["straggler"]  # one incident, from rank 0's watch only
        assert "--samples" in record["argv"]

        ev = load_path(record["bundle"])
        activities = rank_activities(ev)
        assert set(activities) == set(range(RANKS)), activities.keys()
        line = activities[CULPRIT]["text"]
        assert "slow_data_step (armed_job.py:" in line and "pyspy-samples.json" in line, line
        top = activities[CULPRIT]["where"][0]
        assert top["label"].startswith("slow_data_step") and top["idle"] == top["count"]  # a sleep: off the CPU
        others = [activities[r]["waiting_share"] for r in range(RANKS) if r != CULPRIT]
        assert min(others) > activities[CULPRIT]["waiting_share"]  # the others wait for it

        analyzed = subprocess.run([sys.executable, "-m", "forensics", "analyze", "--json", record["bundle"]],
                                  capture_output=True,
                                  text=True, env=dict(os.environ, PYTHONPATH=str(REPO)), timeout=120)
        report = json.loads(analyzed.stdout)
        rows = {row["rank"]: row for row in report["sections"]["ranks"]}
        assert "slow_data_step" in rows[CULPRIT]["samples"]["text"]  # analyze --json carries the activity line
        # the step series the alarm was judged on travel in the bundle (steps/steps-rank*.csv): analyze names
        # the straggler from them, with no recorder, Flight Recorder or COLL stamps on gloo
        attached = sorted(p.name for p in Path(record["bundle"], "job", "attached").iterdir())
        assert attached == [f"steps-rank{r}.csv" for r in range(RANKS)], attached
        assert report["sections"]["steps"]["late"] == [CULPRIT], report["sections"]["steps"]
        culprit = report["culprit"]
        assert culprit["rank"] == CULPRIT and culprit["reason_class"] == "straggler", report["summary"]

        steps = compare_ranks(_series(out))
        assert steps.late == [CULPRIT] and steps.source == "first-collective enter times", steps.describe()
        assert f"rank {CULPRIT}" in steps.describe()
    finally:
        stop(procs)


def test_a_healthy_job_fires_nothing_and_names_no_straggler(tmp_path):
    pytest.importorskip("torch")
    from parsers.judges.step_ranks import compare_ranks

    procs, out = start(tmp_path, "none", 29932, "--steps", "150", "--stall-after", "30", "--slow-factor", "1000",
                       ranks=RANKS, pg_timeout=60.0)
    try:
        for proc in procs:
            assert proc.wait(timeout=120) == 0
        assert incidents(out) == []
        steps = compare_ranks(_series(out))
        assert steps.source and steps.found.ops >= 100 and steps.late == [], steps.describe()
        cli = subprocess.run([sys.executable, "-m", "forensics", "steps", "--ranks",
                              *map(str, sorted(out.glob("steps-rank*.csv")))],
                             capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=str(REPO)), timeout=60)
        assert cli.returncode == 0 and "no straggler" in cli.stdout, cli.stdout + cli.stderr
    finally:
        stop(procs)

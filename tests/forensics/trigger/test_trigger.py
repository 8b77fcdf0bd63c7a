"""forensics.arm() in a real 2-rank gloo job: a stall and a slow step each yield a job-wide bundle in time.

The process group timeout is 45 s; the trigger must have collected every rank, alive,
well before that. Exactly one rank (the elected leader) starts the collection.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from armed_launch import incidents as _incidents
from armed_launch import start, stop as _stop, wait_for_bundle as _wait_for_bundle
from fleet_simjob import REPO

pytestmark = pytest.mark.integration
PG_TIMEOUT = 45.0


def _start(tmp_path: Path, fault: str, port: int, *extra: str):
    return start(tmp_path, fault, port, *extra, ranks=2, pg_timeout=PG_TIMEOUT)


def test_stall_collects_every_rank_before_the_watchdog(tmp_path):
    pytest.importorskip("torch")
    procs, out = _start(tmp_path, "stall", 29921, "--slow-factor", "1000")  # only the stall rule can fire
    try:
        record, summary, waited = _wait_for_bundle(out, procs, PG_TIMEOUT)
        assert all(p.poll() is None for p in procs), "a rank died before the collection finished"
        assert record["kind"] == "stall"
        assert summary["ranks"] == 2 and summary["missing_ranks"] == []
        time.sleep(1.0)
        incidents = _incidents(out)
        assert sum(1 for i in incidents if i.get("leader")) == 1  # one leader, no stampede
        assert {i["rank"] for i in incidents} == {0, 1}  # every stuck rank dumped its own stacks
        culprit_stacks = next(Path(i["stacks"]) for i in incidents if i["rank"] == 1).read_text()
        assert "armed_job.py" in culprit_stacks and "main" in culprit_stacks
        analyzed = subprocess.run([sys.executable, "-m", "forensics", "analyze", record["bundle"]], capture_output=True,
                                  text=True,
                                  env=dict(os.environ, PYTHONPATH=str(REPO)), timeout=120)
        assert "rank 1" in analyzed.stdout.splitlines()[0], analyzed.stdout
        # the ranks' own faulthandler files alone (no bundle, no py-spy) are read as their stacks: the file
        # says whose (rank, pid, host), and the main threads show rank 1 outside the all_reduce rank 0 waits in
        dumps = tmp_path / "dumps-only"
        dumps.mkdir()
        for i in incidents:
            (dumps / f"dump{i['rank']}.txt").write_text(Path(i["stacks"]).read_text())
        by_dumps = subprocess.run([sys.executable, "-m", "forensics", "analyze", "--json", str(dumps)],
                                  capture_output=True,
                                  text=True, env=dict(os.environ, PYTHONPATH=str(REPO)), timeout=120)
        verdict = json.loads(by_dumps.stdout)
        # the dumps alone are one snapshot with no time in them: no hang culprit (issue 26, 2.1), rank 1 the lead
        assert verdict["hang"] == "not established" and verdict["culprit"] is None, by_dumps.stdout[:2000]
        assert verdict["suspects"][0]["rank"] == 1 and verdict["suspects"][0]["reason_class"] == "outside-collective"
        assert {i["pid"] for i in incidents} <= {r["pid"] for r in verdict["sections"]["ranks"]}, by_dumps.stdout[:2000]
        header = "step,seconds,end_unix_time,collective_seconds,first_enter_unix,rank\n"
        assert (out / "steps-rank0.csv").read_text().startswith(header)
        env_set = (out / "logs").is_dir()
        assert env_set
    finally:
        _stop(procs)


def test_slow_step_collects_while_the_step_runs_and_the_job_goes_on(tmp_path):
    pytest.importorskip("torch")
    procs, out = _start(tmp_path, "slow", 29922)
    try:
        record, summary, _ = _wait_for_bundle(out, procs, PG_TIMEOUT)
        assert record["kind"] == "slow-step"
        assert summary["ranks"] == 2
        manifest = json.loads((Path(record["bundle"]) / "manifest.json").read_text())
        assert all(r["state_before"] is not None for r in manifest["ranks"])  # collected alive
        for proc in procs:
            assert proc.wait(timeout=PG_TIMEOUT) == 0  # the slow step passed; the job finished normally
        assert (out / "rank0.progress").read_text() == "finished\n"
        incidents = _incidents(out)
        assert sum(1 for i in incidents if i.get("leader")) == 1
    finally:
        _stop(procs)

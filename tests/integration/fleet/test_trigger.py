"""forensics.arm() in a real 2-rank gloo job: a stall and a slow step each yield a job-wide bundle in time.

The process group timeout is 45 s; the trigger must have collected every rank, alive,
well before that. Exactly one rank (the elected leader) starts the collection.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fleet_simjob import REPO

pytestmark = pytest.mark.integration
HERE = Path(__file__).resolve().parent
PG_TIMEOUT = 45.0


def _start(tmp_path: Path, fault: str, port: int, *extra: str) -> tuple[list[subprocess.Popen], Path]:
    out = tmp_path / "trigger"
    out.mkdir()
    procs = []
    for rank in range(2):
        env = {k: v for k, v in os.environ.items() if not k.startswith(("NCCL_", "TORCH_FR", "TORCH_NCCL", "FORENSICS_"))}
        env.update(RANK=str(rank), WORLD_SIZE="2", LOCAL_RANK=str(rank), LOCAL_WORLD_SIZE="2", MASTER_ADDR="127.0.0.1",
                   MASTER_PORT=str(port), PYTHONPATH=str(REPO), OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")
        argv = [sys.executable, str(HERE / "armed_job.py"), "--fault", fault, "--out", str(out), "--pg-timeout", str(PG_TIMEOUT), *extra]
        with open(out / f"rank{rank}.log", "wb") as log:
            procs.append(subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True))
    return procs, out


def _stop(procs: list[subprocess.Popen]) -> None:
    for proc in procs:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)


def _wait_for_bundle(out: Path, procs: list[subprocess.Popen], limit: float) -> tuple[dict, dict, float]:
    """Wait for the leader's incident record and its collector's JSON summary; returns both and the time taken."""
    start = time.monotonic()
    while time.monotonic() - start < limit:
        for incident in out.glob("incident-*.json"):
            record = json.loads(incident.read_text())
            if record.get("leader"):
                summary_path = Path(record["bundle"] + ".json")
                text = summary_path.read_text() if summary_path.exists() else ""
                if text.strip().endswith("}"):
                    return record, json.loads(text), time.monotonic() - start
        if all(p.poll() is not None for p in procs):
            break
        time.sleep(0.2)
    logs = "\n".join((out / f"rank{r}.log").read_text()[-1500:] for r in range(2))
    raise AssertionError(f"no job-wide bundle within {limit} s; incidents: {[p.name for p in out.glob('incident-*')]}\n{logs}")


def _incidents(out: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(out.glob("incident-*.json"))]


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
        analyzed = subprocess.run([sys.executable, "-m", "forensics", "analyze", record["bundle"]], capture_output=True, text=True,
                                  env=dict(os.environ, PYTHONPATH=str(REPO)), timeout=120)
        assert "rank 1" in analyzed.stdout.splitlines()[0], analyzed.stdout
        assert (out / "steps-rank0.csv").read_text().startswith("step,seconds,end_unix_time\n")
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

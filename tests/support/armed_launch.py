"""Starts and always stops real gloo jobs of armed_job.py (forensics.arm() inside), for the trigger tests."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from fleet_simjob import REPO

HERE = Path(__file__).resolve().parent


def start(tmp_path: Path, fault: str, port: int, *extra: str, ranks: int = 2, pg_timeout: float = 45.0,
          env_extra: dict[str, str] | None = None) -> tuple[list[subprocess.Popen], Path]:
    """`ranks` processes of armed_job.py, each in its own session (so a stop takes its children too)."""
    out = tmp_path / "trigger"
    out.mkdir()
    procs = []
    for rank in range(ranks):
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("NCCL_", "TORCH_FR", "TORCH_NCCL", "FORENSICS_"))}
        env.update(RANK=str(rank), WORLD_SIZE=str(ranks), LOCAL_RANK=str(rank), LOCAL_WORLD_SIZE=str(ranks),
                   MASTER_ADDR="127.0.0.1",
                   MASTER_PORT=str(port), PYTHONPATH=str(REPO), OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1",
                   **(env_extra or {}))
        argv = [sys.executable, str(HERE / "armed_job.py"), "--fault", fault, "--out", str(out), "--pg-timeout",
                str(pg_timeout), *extra]
        with open(out / f"rank{rank}.log", "wb") as log:
            procs.append(subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True))
    return procs, out


def stop(procs: list[subprocess.Popen]) -> None:
    """SIGKILL every job process group still running, and reap them."""
    for proc in procs:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)


def incidents(out: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(out.glob("incident-*.json"))]


def wait_for_bundle(out: Path, procs: list[subprocess.Popen], limit: float,
                    kind: str | None = None) -> tuple[dict, dict, float]:
    """Wait for the leader's incident record (of `kind` if given) and its collector's JSON summary."""
    start_at = time.monotonic()
    while time.monotonic() - start_at < limit:
        for record in incidents(out):
            if record.get("leader") and (kind is None or record["kind"] == kind):
                summary_path = Path(record["bundle"] + ".json")
                text = summary_path.read_text() if summary_path.exists() else ""
                if text.strip().endswith("}"):
                    return record, json.loads(text), time.monotonic() - start_at
        if all(p.poll() is not None for p in procs):
            break
        time.sleep(0.2)
    logs = "\n".join(p.read_text()[-1500:] for p in sorted(out.glob("rank*.log")))
    raise AssertionError(f"no job-wide bundle within {limit} s; incidents: "
                         f"{[p.name for p in out.glob('incident-*')]}\n{logs}")

"""A real gloo job spread over simulated hosts: each rank carries FORENSICS_SIM_HOST=<address>.

All "hosts" are this machine, so the collector on host X is told (--match-env
FORENSICS_SIM_HOST={host}) to take only the ranks marked X. On a real cluster each
host only sees its own processes and no such filter is needed.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from forensics.demo.launcher import JOB_MODULE, DemoJob, RankProc, _watch_exits, stop_job, wait_for_hang  # noqa: F401

REPO = Path(__file__).resolve().parents[3]


def start_sim_job(run_dir: Path, hosts: list[str], ranks_per_host: int, culprit: int, port: int, fault: str = "sleep", pg_timeout: float = 600.0) -> DemoJob:
    """Start len(hosts) x ranks_per_host ranks of forensics.demo.job; rank r lives on hosts[r // ranks_per_host]."""
    import threading

    run_dir.mkdir(parents=True, exist_ok=True)
    world = len(hosts) * ranks_per_host
    job = DemoJob(run_dir=run_dir, world=world, fault=fault, culprit=culprit, fault_step=3)
    base = {k: v for k, v in os.environ.items() if not k.startswith(("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_", "TORCHELASTIC_", "GROUP_RANK"))}
    base["PYTHONPATH"] = str(REPO)
    for rank in range(world):
        node = rank // ranks_per_host
        env = dict(base, RANK=str(rank), LOCAL_RANK=str(rank % ranks_per_host), WORLD_SIZE=str(world),
                   LOCAL_WORLD_SIZE=str(ranks_per_host), GROUP_RANK=str(node), MASTER_ADDR="127.0.0.1",
                   MASTER_PORT=str(port), TORCHELASTIC_RUN_ID=f"fleet-{port}", FORENSICS_SIM_HOST=hosts[node],
                   PYTHONUNBUFFERED="1", OMP_NUM_THREADS="1")
        argv = [sys.executable, "-m", JOB_MODULE, "--fault", fault, "--culprit", str(culprit), "--fault-step", "3",
                "--steps", "6", "--progress-dir", str(run_dir), "--pg-timeout", str(pg_timeout)]
        with open(run_dir / f"rank{rank}.out", "wb") as out, open(run_dir / f"rank{rank}.err", "wb") as err:
            proc = subprocess.Popen(argv, env=env, stdout=out, stderr=err, stdin=subprocess.DEVNULL, start_new_session=True)
        job.ranks.append(RankProc(rank=rank, proc=proc, started_at=time.time()))
    job._watch = threading.Thread(target=_watch_exits, args=(job,), daemon=True)
    job._watch.start()
    return job

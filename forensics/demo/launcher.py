"""Starts the demo job as real processes (one per rank, torchrun-style env), watches them, ends them.

It also keeps what a launcher knows and a collector cannot see afterwards: each
rank's pid, and when and how it exited. That record goes into the bundle.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from forensics.discover.ranks import host_name

JOB_MODULE = "forensics.demo.job"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class RankProc:
    rank: int
    proc: subprocess.Popen
    started_at: float
    exited_at: float | None = None


@dataclass
class DemoJob:
    run_dir: Path
    world: int
    fault: str
    culprit: int
    fault_step: int
    ranks: list[RankProc] = field(default_factory=list)
    _watch: threading.Thread | None = None
    _stop: threading.Event = field(default_factory=threading.Event)

    @property
    def pids(self) -> list[int]:
        return [r.proc.pid for r in self.ranks]

    def alive_pids(self) -> list[int]:
        return [r.proc.pid for r in self.ranks if r.proc.poll() is None]

    def progress(self, rank: int) -> str:
        try:
            return (self.run_dir / f"rank{rank}.progress").read_text().strip()
        except OSError:
            return ""

    def record(self) -> dict:
        """The launcher record (see parsers.readers.launcher)."""
        host = host_name()
        return {
            "launcher": "forensics demo",
            "fault": self.fault,
            "culprit": self.culprit,
            "ranks": [
                {
                    "rank": r.rank,
                    "pid": r.proc.pid,
                    "host": host,
                    "started_at": r.started_at,
                    "returncode": r.proc.returncode,
                    "exited_at": r.exited_at,
                    "stdout": str(self.run_dir / f"rank{r.rank}.out"),
                    "stderr": str(self.run_dir / f"rank{r.rank}.err"),
                }
                for r in self.ranks
            ],
        }


def start_job(
    run_dir: Path,
    world: int,
    fault: str,
    culprit: int,
    fault_step: int = 3,
    steps: int = 6,
    pg_timeout: float = 600.0,
    ranks_per_host: int | None = None,
    port: int | None = None,
    rank_env: Callable[[int], dict[str, str]] | None = None,
    run_id: str = "demo",
) -> DemoJob:
    """Start `world` ranks of the demo job on 127.0.0.1; their stdout/stderr go to files in run_dir.

    With `ranks_per_host`, rank r is local rank r % ranks_per_host of group (host) r // ranks_per_host,
    as torchrun numbers them across nodes; `rank_env(r)` adds variables per rank (e.g. a simulated host).
    """
    run_dir.mkdir(parents=True, exist_ok=True)
    job = DemoJob(run_dir=run_dir, world=world, fault=fault, culprit=culprit, fault_step=fault_step)
    port = port or free_port()
    per_host = ranks_per_host or world
    base = {k: v for k, v in os.environ.items()
            if not k.startswith(("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_", "TORCHELASTIC_", "GROUP_RANK"))}
    for rank in range(world):
        env = dict(
            base,
            RANK=str(rank), LOCAL_RANK=str(rank % per_host), WORLD_SIZE=str(world), LOCAL_WORLD_SIZE=str(per_host),
            GROUP_RANK=str(rank // per_host), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port),
            TORCHELASTIC_RUN_ID=f"{run_id}-{port}", PYTHONUNBUFFERED="1", OMP_NUM_THREADS="1",
            **(rank_env(rank) if rank_env else {}),
        )
        argv = [sys.executable, "-m", JOB_MODULE, "--fault", fault, "--culprit", str(culprit), "--fault-step",
                str(fault_step),
                "--steps", str(steps), "--progress-dir", str(run_dir), "--pg-timeout", str(pg_timeout)]
        with open(run_dir / f"rank{rank}.out", "wb") as out, open(run_dir / f"rank{rank}.err", "wb") as err:
            proc = subprocess.Popen(argv, env=env, stdout=out, stderr=err, stdin=subprocess.DEVNULL,
                                    start_new_session=True)
        job.ranks.append(RankProc(rank=rank, proc=proc, started_at=time.time()))
    job._watch = threading.Thread(target=_watch_exits, args=(job,), daemon=True)
    job._watch.start()
    return job


def _watch_exits(job: DemoJob) -> None:
    """Note when each rank exits, to 50 ms, so the first to die can be told from the rest."""
    while not job._stop.is_set():
        for r in job.ranks:
            if r.exited_at is None and r.proc.poll() is not None:
                r.exited_at = time.time()
        if all(r.exited_at is not None for r in job.ranks):
            return
        time.sleep(0.05)


def hang_formed(job: DemoJob) -> bool:
    """The culprit injected its fault and every other rank entered the fault step's collective."""
    culprit_state = job.progress(job.culprit)
    culprit_ready = culprit_state.startswith("fault") or job.ranks[job.culprit].proc.poll() is not None
    peers_ready = all(
        job.progress(r.rank) == f"enter step {job.fault_step}" for r in job.ranks if r.rank != job.culprit
    )
    return culprit_ready and peers_ready


def wait_for_hang(job: DemoJob, timeout: float = 120.0, settle: float = 1.0) -> None:
    """Block until the hang has formed and held for `settle` seconds; raise RuntimeError otherwise."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if hang_formed(job):
            time.sleep(settle)
            if hang_formed(job):
                return
        dead = [r for r in job.ranks if r.rank != job.culprit and r.proc.poll() is not None]
        if dead:
            tail = _tail(job.run_dir / f"rank{dead[0].rank}.err")
            raise RuntimeError(f"rank {dead[0].rank} exited ({dead[0].proc.returncode}) before the hang "
                               f"formed:\n{tail}")
        time.sleep(0.1)
    states = {r.rank: job.progress(r.rank) for r in job.ranks}
    raise RuntimeError(f"no hang formed within {timeout:.0f} s; progress: {states}")


def stop_job(job: DemoJob, grace: float = 5.0) -> None:
    """End every rank: resume stopped ones, SIGKILL (a hung collective ignores SIGTERM), reap."""
    for r in job.ranks:
        if r.proc.poll() is None:
            for sig in (signal.SIGCONT, signal.SIGKILL):
                try:
                    os.kill(r.proc.pid, sig)
                except ProcessLookupError:
                    pass
    for r in job.ranks:
        try:
            r.proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            pass
    job._stop.set()


def write_record(job: DemoJob, path: Path) -> None:
    path.write_text(json.dumps(job.record(), indent=1) + "\n")


def _tail(path: Path, lines: int = 15) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""

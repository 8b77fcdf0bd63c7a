"""A real N-rank gloo job that leaves a post-mortem logs folder: one folder per rank (`nodeNN/rankN.stderr`).

(A module of tests/support: integration tests import it by name, and it runs as a script for one rank.)

Cases, each a mechanism that gloo runs as NCCL would:
- `monbarrier`: the ranks in `absent` sleep past the timeout; the others call `dist.monitored_barrier`
  (rank 0 raises "[Rank 0]: Ranks 1, 6 failed to pass monitoredBarrier in N ms"; with `wait_all` every
  missing rank is listed, else the first);
- `monbarrier-sub`: the same inside `dist.new_group(ranks 1..world-1)`: the group's rank 0 (global rank 1)
  reports, and the ranks it names are the group's (global rank r+1);
- `teardown`: every rank finishes its collectives and returns without `destroy_process_group()`: torch warns
  at exit ("ProcessGroupNCCL/Gloo ... destroy_process_group() was not called"), and every rank exits 0,
  except the ranks in `absent`, which raise a RuntimeError of their own after the last collective.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

#: how long one job may run before the driver kills it (a test never waits longer)
JOB_LIMIT_S = 90


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_job(out: Path, case: str, world: int, absent: tuple[int, ...], timeout_ms: int = 3000,
            wait_all: bool = True) -> dict[int, int]:
    """Run the job to its end; returns rank -> exit code. Logs land in out/nodeNN/rankN.stderr."""
    port = free_port()
    procs = {}
    for rank in range(world):
        folder = out / f"node{rank:02d}"
        folder.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, "RANK": str(rank), "WORLD_SIZE": str(world), "MASTER_ADDR": "127.0.0.1",
               "MASTER_PORT": str(port), "OMP_NUM_THREADS": "1"}
        argv = [sys.executable, __file__, case, ",".join(map(str, absent)), str(timeout_ms), str(int(wait_all))]
        with open(folder / f"rank{rank}.stderr", "wb") as err, open(folder / f"rank{rank}.stdout", "wb") as std:
            procs[rank] = subprocess.Popen(argv, env=env, stdout=std, stderr=err, start_new_session=True)
    return reap(procs, time.monotonic() + JOB_LIMIT_S)


def reap(procs: dict[int, subprocess.Popen], deadline: float) -> dict[int, int]:
    """rank -> exit code of each process, waited for until `deadline` (monotonic), killed past it."""
    codes = {}
    for rank, p in procs.items():
        try:
            codes[rank] = p.wait(timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()
            codes[rank] = p.wait()
    return codes


def _rank_main(case: str, absent: set[int], timeout_ms: int, wait_all: bool) -> int:
    import torch
    import torch.distributed as dist

    rank = int(os.environ["RANK"])
    dist.init_process_group("gloo", timeout=timedelta(seconds=30))
    t = torch.ones(64)
    for _ in range(3):
        dist.all_reduce(t)
    if case in ("monbarrier", "monbarrier-sub"):
        world = dist.get_world_size()
        group = dist.new_group(list(range(1, world))) if case == "monbarrier-sub" else None
        if rank in absent or (group is not None and rank == 0):
            time.sleep(timeout_ms / 1000 + 4)  # never reaches the barrier in time (rank 0: not in the subgroup)
            return 0
        dist.monitored_barrier(group=group, timeout=timedelta(milliseconds=timeout_ms), wait_all_ranks=wait_all)
        return 0
    if case == "teardown":
        if rank in absent:
            raise RuntimeError(f"rank {rank} found a corrupt shard after the last step")
        return 0  # no destroy_process_group(): torch warns at exit
    raise SystemExit(f"unknown case {case}")


if __name__ == "__main__":
    _case, _absent, _ms, _all = sys.argv[1:5]
    sys.exit(_rank_main(_case, {int(x) for x in _absent.split(",") if x}, int(_ms), _all == "1"))

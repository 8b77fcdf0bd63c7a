"""A real N-rank gloo job whose ranks each bind their own address, one of them killed mid-collective.

(A module of tests/support: integration tests import it by name, and it runs as a script for one rank.)

Why its own addresses: on one machine every gloo rank binds 127.0.0.1, so 'Connection closed by peer
[127.0.0.1]:port' names no one; across hosts each rank's address is its host's. Here each rank binds its gloo
device to 127.0.0.(rank + 2), as ranks on separate hosts bind theirs, and writes its output under a folder named
by that address (`out/127.0.0.N/rankR.stderr`), as a logs folder gathered per host address is laid out. Rank
`victim` is SIGKILLed by the driver while every rank loops over large all_reduces; the others print gloo's real
'Connection closed by peer [127.0.0.N]:port' (or 'Connection reset by peer').
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

from barrier_job import JOB_LIMIT_S, free_port, reap


def address(rank: int) -> str:
    return f"127.0.0.{rank + 2}"


def run_kill(out: Path, world: int, victim: int, after_s: float = 3.0) -> dict[int, int]:
    """Run the job, SIGKILL `victim` once every rank has started its collectives; rank -> exit code."""
    port = free_port()
    procs = {}
    for rank in range(world):
        folder = out / address(rank)
        folder.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, "RANK": str(rank), "WORLD_SIZE": str(world), "MASTER_ADDR": "127.0.0.1",
               "MASTER_PORT": str(port), "OMP_NUM_THREADS": "1"}
        with open(folder / f"rank{rank}.stderr", "wb") as err, open(folder / f"rank{rank}.stdout", "wb") as std:
            procs[rank] = subprocess.Popen([sys.executable, __file__, str(folder / f"rank{rank}.started")], env=env,
                                           stdout=std, stderr=err, start_new_session=True)
    deadline = time.monotonic() + JOB_LIMIT_S
    while not all((out / address(r) / f"rank{r}.started").exists() for r in range(world)):
        if time.monotonic() > deadline or any(p.poll() is not None for p in procs.values()):
            break
        time.sleep(0.1)
    time.sleep(after_s)
    procs[victim].send_signal(signal.SIGKILL)
    codes = reap(procs, deadline)
    for r in range(world):
        (out / address(r) / f"rank{r}.started").unlink(missing_ok=True)
    return codes


def _rank_main(started: str) -> int:
    import torch
    import torch.distributed as dist

    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    store = dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), world, rank == 0,
                          timeout=timedelta(seconds=30))
    opts = dist.ProcessGroupGloo._Options()
    opts._devices = [dist.ProcessGroupGloo.create_device(hostname=address(rank))]
    opts._timeout = timedelta(seconds=20)
    pg = dist.ProcessGroupGloo(store, rank, world, opts)
    t = torch.ones(1 << 20)
    pg.allreduce([t]).wait()
    print(f"rank {rank} of {world} on {address(rank)}: training", flush=True)  # what a training script prints
    Path(started).touch()
    while True:
        pg.allreduce([t]).wait()


if __name__ == "__main__":
    sys.exit(_rank_main(sys.argv[1]))

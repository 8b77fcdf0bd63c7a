"""A real mp.spawn job on gloo whose process 1 fails after the first all_reduce (test_spawn_launcher.py).

`raise`: process 1 raises RuntimeError; `segv`: process 1 kills itself with SIGSEGV (faulthandler on, it
prints a dump). mp.spawn then stops the others (SIGTERM) and raises in the parent.

The others sleep rather than wait in a second collective: a gloo peer waiting when process 1 ends raises
'Connection closed by peer' itself, and mp.spawn then names whichever process it reaped first (seen here:
process 0 or 2 in 2 of 12 runs). That race is real and is kept as a capture in tests/fixtures/spawn/; a live
test needs one answer.
"""

import datetime
import os
import signal
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def worker(i: int, world: int, mode: str, port: int) -> None:
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=i, world_size=world,
                            timeout=datetime.timedelta(seconds=30))
    t = torch.ones(4)
    dist.all_reduce(t)
    print(f"[worker {i}] pid {os.getpid()} ready", flush=True)
    if i == 1:
        time.sleep(1)
        if mode == "raise":
            raise RuntimeError("bad batch on process 1")
        os.kill(os.getpid(), signal.SIGSEGV)
    time.sleep(60)


if __name__ == "__main__":
    mp.spawn(worker, args=(3, sys.argv[1], int(sys.argv[2])), nprocs=3, join=True)

"""One worker of a real torchrun --tee job on NCCL that hangs. SCENARIO=sleep: rank CULPRIT never joins the
4th collective; SCENARIO=diverge: rank CULPRIT calls a broadcast from another function where the others
call an all_reduce (a code path that differs on one rank).

Why: the console a user pastes after such a hang is torchrun's labelled output (`[default3]:`), c10d's
watchdog lines, every aborting worker's faulthandler dump (PYTHONFAULTHANDLER=1) and torchelastic's
failure table; scripts/device/tee_console.sh runs it and keeps the console as a fixture. Each rank
acts as its own host on one GPU (NCCL_HOSTID, set before NCCL starts).
"""

from __future__ import annotations

import datetime
import os
import time

import torch
import torch.distributed as dist


def stuck_outside_collectives() -> None:
    time.sleep(3600)


def train_step(t: torch.Tensor) -> None:
    dist.all_reduce(t)
    torch.cuda.synchronize()


def evaluate(t: torch.Tensor) -> None:
    dist.broadcast(t, 0)
    torch.cuda.synchronize()


def main() -> None:
    rank = int(os.environ["RANK"])
    os.environ["NCCL_HOSTID"] = f"node{rank:02d}"
    torch.cuda.set_device(0)
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "20")))
    dist.init_process_group("nccl", timeout=timeout, device_id=torch.device("cuda:0"))
    t = torch.ones(1024, device="cuda")
    for _ in range(3):
        train_step(t)
    print(f"rank {rank} pid {os.getpid()} warmed up", flush=True)
    if rank == int(os.environ.get("CULPRIT", "2")):
        if os.environ.get("SCENARIO", "sleep") == "diverge":
            evaluate(t)
        else:
            stuck_outside_collectives()
    train_step(t)


if __name__ == "__main__":
    main()

"""A small data-parallel training loop on torch.distributed (gloo, CPU) that can be made to hang.

Run one process per rank with torchrun's variables (RANK, WORLD_SIZE, MASTER_ADDR, ...).
At step --fault-step the culprit rank injects the fault:
  sleep  it blocks in its data loader (time.sleep) before the all_reduce; peers wait in all_reduce
  stop   it stops itself with SIGSTOP before the all_reduce; peers wait in all_reduce
  crash  it exits with code 17 just before the job builds a new process group; peers block in new_group
  none   no fault (the job finishes)
Each rank writes a progress file so a launcher can tell when the hang has formed.
"""

from __future__ import annotations

import argparse
import datetime
import os
import signal
import time
from pathlib import Path

import torch
import torch.distributed as dist

CRASH_CODE = 17


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--fault", choices=["sleep", "stop", "crash", "none"], default="sleep")
    parser.add_argument("--culprit", type=int, default=1)
    parser.add_argument("--fault-step", type=int, default=3)
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--progress-dir", type=Path, required=True)
    parser.add_argument("--pg-timeout", type=float, default=600.0, help="process group timeout, seconds")
    return parser.parse_args()


def mark(progress: Path, text: str) -> None:
    """Replace this rank's progress line (atomic rename: a reader never sees half a line)."""
    tmp = progress.with_suffix(".tmp")
    tmp.write_text(text + "\n")
    os.replace(tmp, progress)


def slow_data_loader(seconds: float) -> torch.Tensor:
    """Stands in for a data loader stuck on storage: the classic lone straggler."""
    time.sleep(seconds)
    return torch.ones(1024)


def train_step(grad: torch.Tensor) -> None:
    dist.all_reduce(grad)
    grad /= dist.get_world_size()


def main() -> None:
    args = parse_args()
    rank = int(os.environ["RANK"])
    progress = args.progress_dir / f"rank{rank}.progress"
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=args.pg_timeout))
    culprit = rank == args.culprit
    for step in range(args.steps):
        grad = torch.full((1024,), float(rank))
        if step == args.fault_step and args.fault != "none":
            if culprit:
                mark(progress, f"fault {args.fault} step {step}")
                if args.fault == "sleep":
                    grad = slow_data_loader(3600)
                elif args.fault == "stop":
                    os.kill(os.getpid(), signal.SIGSTOP)
                elif args.fault == "crash":
                    os._exit(CRASH_CODE)
            else:
                mark(progress, f"enter step {step}")
            if args.fault == "crash":
                dist.new_group(list(range(dist.get_world_size())))
        else:
            mark(progress, f"enter step {step}")
        train_step(grad)
        mark(progress, f"done step {step}")
    dist.destroy_process_group()
    mark(progress, "finished")


if __name__ == "__main__":
    main()

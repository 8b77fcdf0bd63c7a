"""A small gloo training loop armed with forensics.arm(), for the trigger tests.

--fault stall: the culprit sleeps for an hour before its all_reduce at --fault-step (a hang)
--fault slow:  the culprit sleeps --slow seconds there, then the job carries on (a slow step)
--fault straggle: the culprit sleeps --slow seconds before every all_reduce (slow, never hung)
--fault none:  a healthy job
"""

from __future__ import annotations

import argparse
import datetime
import os
import shlex
import time
from pathlib import Path

import torch
import torch.distributed as dist

import forensics


def slow_data_step(seconds: float) -> None:
    """The straggler's extra work before each collective (a slow input pipeline, say)."""
    time.sleep(seconds)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--fault", choices=["stall", "slow", "straggle", "none"], required=True)
    parser.add_argument("--culprit", type=int, default=1)
    parser.add_argument("--fault-step", type=int, default=8)
    parser.add_argument("--steps", type=int, default=14)
    parser.add_argument("--slow", type=float, default=10.0)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--pg-timeout", type=float, default=45.0)
    parser.add_argument("--stall-after", type=float, default=5.0)
    parser.add_argument("--slow-factor", type=float, default=5.0)
    parser.add_argument("--straggler-ms", type=float, default=50.0, help="arm(straggler_ms=...); 0: no straggler watch")
    parser.add_argument("--work", type=float, default=0.05, help="seconds of 'compute' per step on every rank")
    args = parser.parse_args()
    trigger = forensics.arm(stall_after=args.stall_after, pg_timeout=args.pg_timeout, out=args.out,
                            slow_factor=args.slow_factor, min_slow=2.0, poll=0.2,
                            straggler_ms=args.straggler_ms or None,
                            collect_args=shlex.split(os.environ.get("FORENSICS_COLLECT_ARGS", "")))
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=args.pg_timeout))
    rank = dist.get_rank()
    progress = args.out / f"rank{rank}.progress"
    for step in range(args.steps):
        progress.write_text(f"step {step}\n")
        if step == args.fault_step and rank == args.culprit and args.fault in ("stall", "slow"):
            time.sleep(3600 if args.fault == "stall" else args.slow)
        if args.fault == "straggle" and rank == args.culprit:
            slow_data_step(args.slow)
        grad = torch.ones(1024) * rank
        dist.all_reduce(grad)
        time.sleep(args.work)
        trigger.step()
    progress.write_text("finished\n")
    forensics.disarm()
    dist.destroy_process_group()


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    main()

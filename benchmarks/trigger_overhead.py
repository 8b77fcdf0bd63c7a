"""What forensics.arm()'s collective wrapper costs per call, now that it also stamps arrivals (issue 15).

A one-rank gloo group (real torch.distributed, CPU), a tiny all_reduce in a loop: the
bare call vs the same call through arm()'s wrapper (progress count, arrival stamp, time
inside collectives), interleaved rounds, median of rounds. Goal: the wrapper adds under
5 us per collective (a real collective takes 100 us and more).

    PYTHONPATH=. python benchmarks/trigger_overhead.py [--calls 20000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

GOAL_US = 5.0


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=20000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    os.environ.update(RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT="29977", OMP_NUM_THREADS="1")
    import torch
    import torch.distributed as dist

    import forensics

    bare = dist.all_reduce
    with tempfile.TemporaryDirectory() as out:
        trigger = forensics.arm(out=out, collect=False, set_env=False, stall_after=3600, slow_factor=1e9)
        wrapped = dist.all_reduce
        assert getattr(wrapped, "_forensics_wrapped", False)
        dist.init_process_group("gloo")
        x = torch.ones(4)
        per: dict[str, list[float]] = {"bare": [], "wrapped": []}
        for _ in range(args.rounds):
            for name, fn in (("bare", bare), ("wrapped", wrapped)):
                start = time.perf_counter()
                for i in range(args.calls):
                    fn(x)
                    if i % 10 == 9:
                        trigger.step()
                per[name].append((time.perf_counter() - start) / args.calls * 1e6)
        forensics.disarm()
        dist.destroy_process_group()
    b, w = statistics.median(per["bare"]), statistics.median(per["wrapped"])
    print(f"bare all_reduce {b:.1f} us/call, through arm()'s wrapper {w:.1f} us/call: ratio {w / b:.3f}, "
          f"added {w - b:.2f} us/call (goal < {GOAL_US:g} us): {'met' if w - b < GOAL_US else 'NOT met'}")
    sys.stdout.flush()


if __name__ == "__main__":
    main()

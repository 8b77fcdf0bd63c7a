"""One rank of a device run (GPU + NCCL): all_reduce streams for the recorder's demos.

Started by sigstop_scenario.py and benchmarks/recorder_overhead.py with the
environment they choose (NCCL_HOSTID per rank so many ranks share one GPU, and
NCCL_PROFILER_PLUGIN when the recorder is on). Modes:
  stream  all_reduce a large tensor forever, synchronising each time, printing 'iter N'
  bench   time all_reduce for each size, print one JSON line of results on rank 0
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from datetime import timedelta


def _init(backend: str = "nccl"):
    import torch
    import torch.distributed as dist

    if backend == "nccl":
        dist.init_process_group("nccl", device_id=torch.device("cuda:0"), timeout=timedelta(seconds=600))
    else:  # CPU dry runs of the orchestration (no recorder files: gloo has no NCCL)
        dist.init_process_group(backend, timeout=timedelta(seconds=600))
    return torch, dist


def stream(numel: int, backend: str = "nccl") -> None:
    torch, dist = _init(backend)
    gpu = backend == "nccl"
    x = torch.ones(numel, device="cuda:0" if gpu else "cpu")
    i = 0
    while True:
        dist.all_reduce(x)
        if gpu:
            torch.cuda.synchronize()
        i += 1
        if i % 5 == 0 or i < 5:
            print(f"iter {i}", flush=True)


def bench(sizes: list[int], budget_s: float, backend: str = "nccl") -> None:
    torch, dist = _init(backend)
    rank, world = dist.get_rank(), dist.get_world_size()
    dev = "cuda:0" if backend == "nccl" else "cpu"
    if backend != "nccl":  # CPU dry run: synchronising is a no-op
        torch.cuda.synchronize = lambda *a, **k: None  # type: ignore[assignment]
    results = []
    for nbytes in sizes:
        numel = max(1, nbytes // 4)
        x = torch.ones(numel, device=dev)
        for _ in range(3):  # warm-up, and settle algorithm/protocol choice
            dist.all_reduce(x)
        torch.cuda.synchronize()
        # pick an iteration count from one timed call, same on every rank (rank 0 decides)
        t0 = time.perf_counter()
        dist.all_reduce(x)
        torch.cuda.synchronize()
        one = time.perf_counter() - t0
        iters = torch.tensor([max(5, min(1000, int(budget_s / max(one, 1e-6))))], device=dev)
        dist.broadcast(iters, 0)
        n = int(iters.item())
        dist.barrier()
        torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(n):
            dist.all_reduce(x)
        torch.cuda.synchronize()
        elapsed = time.perf_counter() - start
        lat = elapsed / n
        busbw = (numel * 4) / lat * 2 * (world - 1) / world / 1e9
        results.append({"bytes": numel * 4, "iters": n, "latency_us": lat * 1e6, "busbw_GBps": busbw})
    if rank == 0:
        print("RESULTS " + json.dumps(results), flush=True)
    dist.destroy_process_group()


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["stream", "bench"])
    ap.add_argument("--numel", type=int, default=16 << 20)
    ap.add_argument("--sizes", default="")
    ap.add_argument("--budget", type=float, default=0.5, help="bench: seconds per size")
    ap.add_argument("--backend", default="nccl", help="gloo: a CPU dry run of the orchestration")
    args = ap.parse_args()
    if args.mode == "stream":
        stream(args.numel, args.backend)
    else:
        bench([int(s) for s in args.sizes.split(",")], args.budget, args.backend)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""One rank of benchmarks/recorder_gpu.py: runs the collectives it is told to on stdin, times them.

A group of these (1 rank, or 8 ranks on one GPU as 8 hosts) stays up for the whole run, so a
group with the recorder and one without can be timed in turns, batch after batch, without
relaunching. Commands, one JSON object per line, sent to every rank of the group:
  {"cmd": "op", "op": "all_reduce"|"all_gather"|"sendrecv", "bytes": B, "iters": N, "warm": W}
  {"cmd": "train", "steps": N, "warm": W}     a DDP training step on a small MLP (one-rank group)
  {"cmd": "seq"}                              a fixed sequence of ops (the chaining test counts its events)
  {"cmd": "quit"}                             destroy the process group (NCCL finalizes its profiler) and exit
Rank 0 answers each with one line `RESULT {json}`: seconds per op (or per step), or an error.
Every rank prints `READY` once its communicator is up. With --backend gloo it runs on the CPU (the
dry run of the orchestration; no NCCL, so no recorder).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from datetime import timedelta

SEQ_SIZES = (8, 64 << 10, 4 << 20)  # the chaining test's ops: small, medium, large
SEQ_REPEAT = 3


class Bench:
    """The group's state: process group, device, cached buffers and model."""

    def __init__(self, backend: str) -> None:
        import torch
        import torch.distributed as dist

        self.torch, self.dist, self.backend = torch, dist, backend
        self.gpu = backend == "nccl"
        self.dev = torch.device("cuda:0") if self.gpu else torch.device("cpu")
        if self.gpu:
            torch.cuda.set_device(0)
            dist.init_process_group("nccl", device_id=self.dev, timeout=timedelta(seconds=300))
        else:
            dist.init_process_group(backend, timeout=timedelta(seconds=300))
        self.rank, self.world = dist.get_rank(), dist.get_world_size()
        self.key: tuple | None = None
        self.bufs: tuple = ()
        self.model = None

    def sync(self) -> None:
        if self.gpu:
            self.torch.cuda.synchronize()

    def buffers(self, op: str, nbytes: int) -> tuple:
        """Send and receive tensors for `op` of `nbytes` (all_gather: the output is nbytes), kept for reuse."""
        if self.key != (op, nbytes):
            self.bufs = ()
            n = max(1, nbytes // 4)
            if op == "all_gather":
                part = max(1, n // self.world)
                sent = self.torch.ones(part, device=self.dev)
                self.bufs = (sent, self.torch.empty(part * self.world, device=self.dev))
            else:
                self.bufs = (self.torch.ones(n, device=self.dev), self.torch.empty(n, device=self.dev))
            self.key = (op, nbytes)
        return self.bufs

    def one(self, op: str, nbytes: int) -> None:
        x, y = self.buffers(op, nbytes)
        dist = self.dist
        if op == "all_reduce":
            dist.all_reduce(x)
        elif op == "all_gather":
            dist.all_gather_into_tensor(y, x)
        elif op == "sendrecv":  # a ring: send to the next rank, receive from the previous one
            ops = [dist.P2POp(dist.isend, x, (self.rank + 1) % self.world),
                   dist.P2POp(dist.irecv, y, (self.rank - 1) % self.world)]
            for w in dist.batch_isend_irecv(ops):
                w.wait()
        else:
            raise ValueError(f"unknown op {op!r}")

    def timed(self, body, iters: int, warm: int) -> float:
        """Seconds per call of body(), back to back: what a training loop's launches see."""
        for _ in range(warm):
            body()
        self.sync()
        self.dist.barrier()
        self.sync()
        t0 = time.perf_counter()
        for _ in range(iters):
            body()
        self.sync()
        return (time.perf_counter() - t0) / iters

    def train_step(self) -> None:
        torch = self.torch
        if self.model is None:
            from torch.nn.parallel import DistributedDataParallel as DDP

            width, depth, batch = (4096, 6, 256) if self.gpu else (64, 2, 8)
            layers = []
            for _ in range(depth):
                layers += [torch.nn.Linear(width, width), torch.nn.GELU()]
            net = torch.nn.Sequential(*layers).to(self.dev)
            self.model = DDP(net, device_ids=[0] if self.gpu else None)
            self.opt = torch.optim.SGD(self.model.parameters(), lr=1e-4)
            self.batch = torch.randn(batch, width, device=self.dev)
        self.opt.zero_grad(set_to_none=True)
        self.model(self.batch).square().mean().backward()
        self.opt.step()

    def seq(self) -> None:
        """The chaining test's workload: the same ops in the same order on every run."""
        for op in ("all_reduce", "all_gather", "sendrecv"):
            for nbytes in SEQ_SIZES:
                for _ in range(SEQ_REPEAT):
                    self.one(op, nbytes)
        self.sync()


def answer(bench: Bench, cmd: dict) -> dict:
    """One command's result (rank 0 prints it)."""
    kind = cmd.get("cmd")
    try:
        if kind == "op":
            op, nbytes = cmd["op"], int(cmd["bytes"])
            sec = bench.timed(lambda: bench.one(op, nbytes), int(cmd["iters"]), int(cmd.get("warm", 2)))
            return {"sec": sec}
        if kind == "train":
            return {"sec": bench.timed(bench.train_step, int(cmd["steps"]), int(cmd.get("warm", 2)))}
        if kind == "seq":
            bench.seq()
            return {"done": True}
    except Exception as err:  # reported, not fatal: a layout may not support an op (send to oneself)
        return {"error": f"{type(err).__name__}: {err}"[:500]}
    return {"error": f"unknown command {cmd!r}"}


def pin_from_env() -> None:
    """HF_BENCH_CPUS ("4,5"): this process and every thread it starts later (NCCL's proxy among them) run
    on those CPUs only, so the groups timed in turns do not take each other's cores or caches."""
    cpus = os.environ.get("HF_BENCH_CPUS", "")
    if cpus and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {int(c) for c in cpus.split(",") if c.strip().isdigit()})


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--backend", default="nccl")
    args = ap.parse_args()
    pin_from_env()  # before torch starts its threads
    bench = Bench(args.backend)
    bench.sync()
    print("READY", flush=True)
    for line in sys.stdin:
        cmd = json.loads(line)
        if cmd.get("cmd") == "quit":
            break
        result = answer(bench, cmd)
        if bench.rank == 0:
            print("RESULT " + json.dumps(result), flush=True)
    bench.sync()
    bench.dist.destroy_process_group()
    print("BYE", flush=True)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())

#!/usr/bin/env python3
"""Hangs that say why (issue 14) and stragglers in running jobs (issue 15), with their truth.

Why: the verdicts for OOM, GPU-side waits, busy ranks, DataLoader workers, ranks that never
joined, mp.spawn jobs and slow-but-running ranks must be built and tested on what real
NCCL jobs leave behind, collected the way a user would (`forensics collect` while it runs,
the logs and Flight Recorder dumps after). Each case starts a real job of N ranks as N fake
hosts on one machine, with the environment `forensics env` prints plus the recorder plugin,
breaks or slows one known rank (or host), collects, kills every process it started, and
writes `truth.json`.

Hang cases (issue 14), each collected live once, then left to the watchdog:
  gpusleep    the culprit runs `torch.cuda._sleep` (minutes of GPU cycles) right before its all_reduce
  oom         the culprit raises a real CUDA OOM (allocates 4096 GiB) before its all_reduce
  busy        the culprit's main thread spins in `preprocess_shard` (state R)
  dataloader  the culprit's DataLoader worker sleeps in `ShardDataset.__getitem__`
  lateinit    the culprit never calls init_process_group (sleeps in `load_checkpoint`)
  spawn       torch.multiprocessing.spawn job (RANK not in the environment); the culprit
              sleeps in `evaluate` outside the collective
Hang cases of issue 26 (each needs several judges put together):
  subgroup    groups A (ranks 0-3) and B (4-7) train apart; rank 6 sleeps in `validate_shard` before
              B's all_reduce; A keeps training (it must not be blamed)
  pipeline    send/recv chain 0 -> 1 -> ... -> 7; stage 3 sleeps in `stage_forward` before its send
  order       rank 2 calls broadcast then all_reduce, the others all_reduce then broadcast
  deadlock    groups {0,1}, {1,2}, {0,2} called in a different order by ranks 0, 1, 2 (a cycle);
              ranks 3-7 wait in the world group
  lock        rank 5's main thread waits on a threading.Lock its thread `ckpt-writer` holds
  ahead       rank 0 alone calls an extra all_reduce in `log_metrics` (a rank-0-only collective), then every
              rank waits on the store for the key rank 0 sets after it: rank 0 went ahead (issue 26 item 2.5)
  twosinks    groups A (first half) and B (second half) train apart and both hang, each on its own rank for
              its own reason: rank 1 sleeps in `validate_shard`, the last rank's main thread waits on a lock
              its thread `ckpt-writer` holds (two independent culprits, issue 26 item 2.4)
Running cases (issue 15), collected mid-run in rounds while the job keeps stepping:
  slow300 / slow30 / slow5   one rank sleeps 300 / 30 / 5 ms before every all_reduce
  slowhost                    ranks run 2 per (UTS) host, each with its own NCCL_HOSTID
                              (NCCL refuses two ranks of one GPU with one host id); both
                              ranks of one host are 30 ms slow
  healthy                     nobody is slow (false-alarm check), collected more rounds
  slowlink                    a slow link: rank 3's socket sends are paced (slow_send.so, LD_PRELOAD,
                              --slow-send-ns per byte); its GPU and CPU run at full speed
  slownet                     every rank's sends paced alike: a job-wide network slowdown
  slowtree                    slowlink with NCCL_ALGO=Tree: rank 3's sends go to up to three peers
  slow300norec                slow300 without the recorder plugin (issue 26: py-spy, RAS, NCCL logs only)
  armed                       rank 5 300 ms slow in a job armed with forensics.arm() (straggler
                              trigger on): its own incident bundle, with the attached step series

Layout: OUT/<case>/<host>/{rank<r>.stdout,rank<r>.stderr,nccl.*.log,fr_*}, OUT/<case>/bundle
(live collect), OUT/<case>/round<i>/{rec_a,rec_b,ras_*,pyspy,bundle} (running cases),
OUT/<case>/recorder_final, OUT/<case>/truth.json, OUT/summary.json.

    python live_scenarios.py --out-dir OUT --plugin /path/libnccl-profiler-forensics.so
    python live_scenarios.py --backend gloo --world 4 --out-dir OUT --cases busy,slow30   # CPU dry run
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable, NamedTuple

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from nccl_scenarios import _torch_version, become_host, fr_dump, host_name, ras_query  # noqa: E402

HANG_CASES = ("gpusleep", "oom", "spawn", "lateinit", "dataloader", "busy",  # run in this order
              # issue 26: causes that need judges combined
              "subgroup", "pipeline", "order", "deadlock", "lock", "twosinks", "ahead")
RUN_CASES = ("slow30", "healthy", "slow300", "slowhost", "slow5", "slowlink", "slownet", "slowtree", "armed",
             "slow300norec")
#: issue 26 cases whose truth is not one culprit rank: case -> the ranks of a deadlock cycle
CYCLES = {"deadlock": (0, 1, 2)}
#: cases run without the recorder plugin (what a user without it collects)
NO_RECORDER = ("slow300norec",)
#: issue 26: the op index (after warm-up) at which a causal case's fault happens
FAULT_STEP = 3
CAUSAL_CASES = ("subgroup", "pipeline", "order", "deadlock", "lock", "twosinks", "ahead")
#: issue 26 item 2.4: cases with several independent culprits (each hangs its own group): case -> culprit ranks
SINKS = {"twosinks": lambda world: (1, world - 1)}
WARM_OPS = 10
CULPRIT8 = {"gpusleep": 5, "oom": 7, "busy": 3, "dataloader": 2, "lateinit": 6, "spawn": 1,
            "subgroup": 6, "pipeline": 3, "order": 2, "deadlock": 0, "lock": 5, "twosinks": 1, "ahead": 0}
SLOW = {  # case -> (slow ranks, extra seconds before every all_reduce)
    "slow300": ((5,), 0.300), "slow30": ((2,), 0.030), "slow5": ((6,), 0.005),
    "slowhost": ((2, 3), 0.030), "healthy": ((), 0.0), "slowlink": ((), 0.0), "slownet": ((), 0.0),
    "slowtree": ((), 0.0), "armed": ((5,), 0.300), "slow300norec": ((5,), 0.300),
}
#: case -> ranks whose socket sends are paced by slow_send.so (a slow link out of them); "all": every rank
SLOW_SENDS = {"slowlink": (3,), "slownet": "all", "slowtree": (3,)}
#: case -> extra environment of every rank
CASE_ENV = {"slowtree": {"NCCL_ALGO": "Tree"}}  # a tree: rank 3 sends to up to three peers, not one
STEP_COMPUTE_S = 0.020  # every rank's stand-in for forward/backward (CPU sleep: no GPU contention)
FAULTS = {
    "gpusleep": "runs torch.cuda._sleep({cycles:.0e} cycles) on its stream right before all_reduce {n}: GPU-side wait",
    "oom": "raises torch.OutOfMemoryError (allocates 4096 GiB) right before all_reduce {n}; exits",
    "busy": "main thread spins in preprocess_shard (Python, state R) instead of all_reduce {n}",
    "dataloader": "its DataLoader worker (a child process) sleeps in ShardDataset.__getitem__ at index 3",
    "lateinit": "never calls init_process_group: sleeps in load_checkpoint",
    "spawn": "mp.spawn job (rank is an argument, RANK not in /proc/PID/environ); sleeps in evaluate "
             "before all_reduce {n}",
    "subgroup": "groups A=ranks 0-3 and B=ranks 4-7 train apart; in B, rank 6 sleeps in validate_shard before its "
                "all_reduce at step 3 (ranks 4,5,7 wait in B); group A keeps training until the driver ends it",
    "pipeline": "a send/recv pipeline 0 -> 1 -> ... -> 7 (rank r receives from r-1, sends to r+1) of 5 micro-batches, "
                "then a world all_reduce; at micro-batch 3 stage 3 sleeps in stage_forward after its "
                "recv, before its send",
    "order": "rank 2 calls broadcast (4M floats) then all_reduce (1024 floats) while the others call all_reduce then "
             "broadcast (same world group), then each syncs",
    "deadlock": "groups (0,1), (1,2), (0,2): rank 0 calls (0,1) then (0,2), rank 1 (1,2) then (0,1), rank 2 (0,2) "
                "then (1,2), each with a host sync: 0 waits on 1, 1 on 2, 2 on 0; ranks 3-7 wait in a world all_reduce",
    "ahead": "rank 0 alone calls an extra all_reduce in log_metrics (a collective the others skip), then every rank "
             "waits on the store for the key rank 0 sets after it: rank 0 is one collective ahead of ranks 1.. in the "
             "world group, and they wait for it outside any collective",
    "twosinks": "groups A = the first half of the ranks and B = the second half train apart; at step 3 rank 1 sleeps "
                "in validate_shard before A's all_reduce, and the last rank's main thread blocks on ckpt_lock (held by "
                "its thread ckpt-writer, stuck in write_shard_to_storage) before B's: two independent culprits",
    "lock": "rank 5's thread ckpt-writer holds ckpt_lock while stuck in write_shard_to_storage (sleep); its main "
            "thread blocks on ckpt_lock in save_optimizer_state before all_reduce {n}",
}
PGIDS_FILE = "pgids.txt"


def culprit_of(case: str, world: int) -> int:
    r = CULPRIT8[case]
    return r if r < world else world - 1


def slow_ranks(case: str, world: int) -> list[int]:
    return sorted({r if r < world else world - 1 for r in SLOW[case][0]})


def slow_senders(case: str, world: int) -> list[int]:
    which = SLOW_SENDS.get(case, ())
    return list(range(world)) if which == "all" else sorted({r if r < world else world - 1 for r in which})


def logical_host(case: str, rank: int) -> str:
    """slowhost: 2 ranks per host name (node00: ranks 0,1; node01: 2,3; ...); else one host per rank."""
    return host_name(rank // 2) if case == "slowhost" else host_name(rank)


def nccl_hostid(case: str, rank: int) -> str:
    """Always distinct per rank (one GPU); in slowhost it names host and slot, e.g. node01-1."""
    return f"{logical_host(case, rank)}-{rank % 2}" if case == "slowhost" else host_name(rank)


# --------------------------------------------------------------------------- worker side


def watch_triggers(out: Path, rank: int, nccl: bool, numbered: bool, tag: str = "live") -> None:
    """Dump FR from a side thread when the driver drops a trigger: the main thread may hang. `tag` 'trace'
    writes fr_trace_rank_N, the name the job's TORCH_FR_DUMP_TEMP_FILE gives (what `collect` picks up)."""

    def watch() -> None:
        n = 0
        while True:
            trig = out / (f"dump.trigger.{n}" if numbered else "dump.trigger")
            if trig.exists():
                fr_dump(out / os.environ["HF_HOSTDIR"], rank, f"{tag}{n}" if numbered else tag, nccl)
                if not numbered:
                    return
                n += 1
            time.sleep(0.05)

    threading.Thread(target=watch, name="fr-dump-watcher", daemon=True).start()


def prewarm_fr(nccl: bool) -> None:
    """Take one Flight Recorder dump and drop it: the first dump imports much of torch (seconds,
    holding the GIL), which must not land in the middle of a timed running job."""
    import torch

    c10d = torch._C._distributed_c10d
    for kind in ("", "_json"):
        names = ("_dump_nccl_trace", "_dump_fr_trace") if nccl else ("_dump_fr_trace", "_dump_nccl_trace")
        for api in (n + kind for n in names):
            fn = getattr(c10d, api, None)
            if fn is not None:
                try:
                    fn()
                    break
                except Exception:  # noqa: BLE001 - only a warm-up
                    continue


def preprocess_shard(seconds: float) -> int:
    """A CPU-bound Python loop (the 'busy' culprit): state R, one core."""
    end, acc = time.monotonic() + seconds, 0
    while time.monotonic() < end:
        for i in range(10000):
            acc = (acc * 31 + i) % 1000003
    return acc


def load_checkpoint(seconds: float) -> None:
    """The 'lateinit' culprit: busy elsewhere, never reaches init_process_group."""
    time.sleep(seconds)


def evaluate(seconds: float) -> None:
    """The 'spawn' culprit: sleeps outside any collective."""
    time.sleep(seconds)


def augment_batch(seconds: float) -> None:
    """The straggler's extra work before each all_reduce (running cases)."""
    time.sleep(seconds)


def forward_backward(seconds: float) -> None:
    """Every rank's step work (running cases)."""
    time.sleep(seconds)


class ShardDataset:
    """Map-style dataset whose item `slow_index` takes `hang_s` (only on the culprit)."""

    def __init__(self, slow_index: int, hang_s: float) -> None:
        self.slow_index, self.hang_s = slow_index, hang_s

    def __len__(self) -> int:
        return 100000

    def __getitem__(self, index: int):
        import torch

        if index == self.slow_index:
            time.sleep(self.hang_s)
        return torch.full((1024,), float(index))


def init_pg(backend: str, pg_timeout: float, rank: int | None = None, world: int | None = None):
    import torch
    import torch.distributed as dist

    timeout = datetime.timedelta(seconds=pg_timeout)
    kw = {} if rank is None else {"rank": rank, "world_size": world}
    if backend == "nccl":
        dev = torch.device("cuda:0")
        torch.cuda.set_device(dev)
        dist.init_process_group("nccl", device_id=dev, timeout=timeout, **kw)
        return torch, dist, dev, torch.cuda.synchronize
    dist.init_process_group("gloo", timeout=timeout, **kw)
    return torch, dist, torch.device("cpu"), (lambda: None)


def validate_shard(seconds: float) -> None:
    """The 'subgroup' culprit: busy outside its group's collective."""
    time.sleep(seconds)


def stage_forward(seconds: float) -> None:
    """The 'pipeline' culprit: its stage's compute never ends, so its send never comes."""
    time.sleep(seconds)


def write_shard_to_storage(seconds: float) -> None:
    """The 'lock' holder: stuck on storage while holding the checkpoint lock."""
    time.sleep(seconds)


def async_checkpoint_writer(lock: threading.Lock, seconds: float) -> None:
    with lock:
        write_shard_to_storage(seconds)


def log_metrics(dist, tensor) -> None:
    """The 'ahead' culprit: a collective only rank 0 calls (a rank-0-only branch), which the others skip."""
    dist.all_reduce(tensor)


def save_optimizer_state(lock: threading.Lock) -> None:
    """The 'lock' culprit's main thread: waits for the lock its own writer thread holds."""
    with lock:
        pass


class _Causal(NamedTuple):
    """What a causal case's body needs: the run's options, this rank and the world, torch and its device, the
    groups made for the case, the case's culprit and a small tensor to reduce."""

    args: argparse.Namespace
    rank: int
    world: int
    torch: Any
    dist: Any
    dev: Any
    sync: Callable[[], None]
    groups: dict
    culprit: int
    small: Any


def causal_body(args: argparse.Namespace, rank: int, world: int, torch, dist, dev, sync, groups: dict) -> None:
    """Issue 26's cases after warm-up: each needs more than one judge to explain (one function a case: _CAUSAL)."""
    body = _CAUSAL.get(args.case)
    if body is None:
        raise ValueError(f"no causal body for {args.case}")
    body(_Causal(args, rank, world, torch, dist, dev, sync, groups, culprit_of(args.case, world),
                 torch.ones(1024 * 1024, device=dev)))


def _subgroup(c: _Causal) -> None:
    args, rank, world = c.args, c.rank, c.world
    mine = c.groups["A"] if rank < world // 2 else c.groups["B"]
    end = time.monotonic() + args.pg_timeout + args.dump_wait_ms / 1000 + args.post_s + 8
    step = 0
    while time.monotonic() < end:
        if rank == c.culprit and step == FAULT_STEP:
            validate_shard(args.hang_s)
        c.dist.all_reduce(c.small, group=mine)
        c.sync()
        if step % 100 == 0:
            print(f"[step] rank={rank} group={'A' if rank < world // 2 else 'B'} step={step} t={time.time():.3f}",
                  flush=True)
        step += 1
        time.sleep(0.01)


def _ahead(c: _Causal) -> None:
    store = c.dist.distributed_c10d._get_default_store()
    if c.rank == c.culprit:
        log_metrics(c.dist, c.small)
        store.set("metrics_logged", "1")
    store.wait(["metrics_logged"], datetime.timedelta(seconds=c.args.pg_timeout))
    c.dist.all_reduce(c.small)
    c.sync()


def _twosinks(c: _Causal) -> None:
    rank, world = c.rank, c.world
    mine = c.groups["A"] if rank < world // 2 else c.groups["B"]
    for step in range(FAULT_STEP + 2):
        if step == FAULT_STEP and rank == 1:
            validate_shard(c.args.hang_s)
        if step == FAULT_STEP and rank == world - 1:
            lock = threading.Lock()
            threading.Thread(target=async_checkpoint_writer, args=(lock, c.args.hang_s), name="ckpt-writer",
                             daemon=True).start()
            time.sleep(0.3)
            save_optimizer_state(lock)
        c.dist.all_reduce(c.small, group=mine)
        c.sync()


def _pipeline(c: _Causal) -> None:
    rank, dist = c.rank, c.dist
    for mb in range(FAULT_STEP + 2):
        if rank > 0:
            dist.recv(c.small, src=rank - 1)
            c.sync()
        if rank == c.culprit and mb == FAULT_STEP:
            stage_forward(c.args.hang_s)
        if rank < c.world - 1:
            dist.send(c.small, dst=rank + 1)
            c.sync()
    dist.all_reduce(c.small)  # the step's gradient sync over the world: stages ahead of the stall wait here
    c.sync()


def _order(c: _Causal) -> None:
    # a small all_reduce (NCCL's LL protocol) and a large broadcast (Simple) use different buffers, so
    # the swapped pair cannot pair up by accident (same-sized tensors completed on NCCL 2.28.9)
    tiny, big = c.torch.ones(1024, device=c.dev), c.torch.ones(4 * 1024 * 1024, device=c.dev)
    if c.rank == c.culprit:
        c.dist.broadcast(big, src=0)
        c.dist.all_reduce(tiny)
    else:
        c.dist.all_reduce(tiny)
        c.dist.broadcast(big, src=0)
    c.sync()


def _deadlock(c: _Causal) -> None:
    order = {0: ("g01", "g02"), 1: ("g12", "g01"), 2: ("g02", "g12")}.get(c.rank, ())
    for name in order:
        c.dist.all_reduce(c.small, group=c.groups[name])
        c.sync()
    c.dist.all_reduce(c.small)
    c.sync()


def _lock(c: _Causal) -> None:
    if c.rank == c.culprit:
        lock = threading.Lock()
        threading.Thread(target=async_checkpoint_writer, args=(lock, c.args.hang_s), name="ckpt-writer",
                         daemon=True).start()
        time.sleep(0.3)
        save_optimizer_state(lock)
    c.dist.all_reduce(c.small)
    c.sync()


#: issue 26's causal cases -> the body each rank runs after warm-up
_CAUSAL: dict[str, Callable[[_Causal], None]] = {
    "subgroup": _subgroup, "ahead": _ahead, "twosinks": _twosinks, "pipeline": _pipeline, "order": _order,
    "deadlock": _deadlock, "lock": _lock,
}


def make_groups(dist, case: str, world: int, pg_timeout: float) -> dict:
    """Every rank creates every group, in one order (new_group is collective over the world).

    new_group does not inherit init_process_group's timeout (NCCL's default is 10 minutes): pass it."""
    t = datetime.timedelta(seconds=pg_timeout)
    if case in ("subgroup", "twosinks"):
        return {"A": dist.new_group(list(range(world // 2)), timeout=t),
                "B": dist.new_group(list(range(world // 2, world)), timeout=t)}
    if case == "deadlock":
        return {name: dist.new_group(list(ranks), timeout=t) for name, ranks in
                (("g01", (0, 1)), ("g12", (1, 2)), ("g02", (0, 2)))}
    return {}


def warm_groups(dist, torch, dev, sync, case: str, rank: int, world: int, groups: dict) -> None:
    """One op in each of a rank's groups, in an order that cannot deadlock (communicators made now)."""
    t = torch.ones(1024, device=dev)
    members = {"A": range(world // 2), "B": range(world // 2, world), "g01": (0, 1), "g12": (1, 2), "g02": (0, 2)}
    for name in ("A", "B", "g01", "g12", "g02"):
        if name in groups and rank in members[name]:
            dist.all_reduce(t, group=groups[name])
            sync()


def hang_body(args: argparse.Namespace, rank: int, world: int) -> int:
    """Warm up, then break the culprit the way the case says (others wait in all_reduce)."""
    out = Path(args.dir)
    nccl = args.backend == "nccl"
    culprit = culprit_of(args.case, world)
    if args.case == "lateinit":
        (out / f"started.{rank}").write_text(str(os.getpid()))
        print(f"[case] rank {rank} pid {os.getpid()} host {socket.gethostname()} before init", flush=True)
        if rank == culprit:
            load_checkpoint(args.hang_s)
            return 0
    torch, dist, dev, sync = init_pg(args.backend, args.pg_timeout, *((rank, world) if args.case == "spawn" else ()))
    groups = make_groups(dist, args.case, world, args.pg_timeout)
    small = torch.ones(1024 * 1024, device=dev)
    for _ in range(WARM_OPS):
        dist.all_reduce(small)
        sync()
    warm_groups(dist, torch, dev, sync, args.case, rank, world, groups)
    prewarm_fr(nccl)
    watch_triggers(out, rank, nccl, numbered=False, tag="trace" if args.case in SINKS else "live")
    (out / f"ready.{rank}").write_text(str(os.getpid()))
    print(f"[case] rank {rank} pid {os.getpid()} host {socket.gethostname()} warm", flush=True)
    try:
        if args.case in CAUSAL_CASES:
            causal_body(args, rank, world, torch, dist, dev, sync, groups)
        elif args.case == "dataloader":
            loader = torch.utils.data.DataLoader(ShardDataset(3 if rank == culprit else -1, args.hang_s),
                                                 batch_size=None, num_workers=1)
            for step, batch in enumerate(loader):
                dist.all_reduce(batch.to(dev))
                sync()
                if step > 20:
                    break
        else:
            if rank == culprit:
                if args.case == "gpusleep":
                    if nccl:
                        torch.cuda._sleep(int(args.gpu_cycles))
                    else:
                        time.sleep(args.hang_s)  # CPU dry run: no GPU to keep busy
                elif args.case == "oom":
                    big = torch.empty(4096 * 2**30, dtype=torch.uint8, device=dev)
                    del big  # only reached on a CPU dry run where the kernel overcommits
                    raise RuntimeError("dry run: a 4096 GiB allocation succeeded (overcommit); raising instead")
                elif args.case == "busy":
                    preprocess_shard(args.hang_s)
                elif args.case == "spawn":
                    evaluate(args.hang_s)
            dist.all_reduce(small)
            sync()
    except Exception:
        if not list((out / os.environ["HF_HOSTDIR"]).glob("fr_live_rank_*")):
            fr_dump(out / os.environ["HF_HOSTDIR"], rank, "error", nccl)
        raise
    print(f"[case] rank {rank} finished (unexpected for a hang)", flush=True)
    return 0


def run_body(args: argparse.Namespace, rank: int, world: int) -> int:
    """Step until killed (or --max-s): compute, straggle if slow, all_reduce, sync; print each step."""
    out = Path(args.dir)
    nccl = args.backend == "nccl"
    trigger = None
    if args.case == "armed":  # forensics.arm() as a user arms a job: before init_process_group
        import forensics

        trigger = forensics.arm(out=str(out / "trigger"), pg_timeout=args.pg_timeout, stall_after=args.pg_timeout - 5,
                                straggler_ms=50.0, samples=10, set_env=False)
    torch, dist, dev, sync = init_pg(args.backend, args.pg_timeout)
    buf = torch.ones(256 * 1024, device=dev)
    for _ in range(WARM_OPS):
        dist.all_reduce(buf)
        sync()
    prewarm_fr(nccl)
    watch_triggers(out, rank, nccl, numbered=True)
    (out / f"ready.{rank}").write_text(str(os.getpid()))
    print(f"[case] rank {rank} pid {os.getpid()} host {socket.gethostname()} warm", flush=True)
    ranks, extra = SLOW[args.case]
    me_slow = rank in slow_ranks(args.case, world)
    end = time.monotonic() + args.max_s
    step = 0
    while time.monotonic() < end:
        t0 = time.time()
        forward_backward(STEP_COMPUTE_S)
        if me_slow:
            augment_batch(extra)
        t_enter = time.time()
        dist.all_reduce(buf)
        sync()
        t_done = time.time()
        print(f"[step] rank={rank} step={step} start={t0:.6f} enter={t_enter:.6f} done={t_done:.6f} "
              f"step_ms={(t_done - t0) * 1e3:.3f} wait_ms={(t_done - t_enter) * 1e3:.3f}", flush=True)
        if trigger is not None:
            trigger.step()
        step += 1
    dist.destroy_process_group()
    return 0


def worker(args: argparse.Namespace) -> int:
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    become_host(os.environ["HF_HOST"])
    return (run_body if args.case in RUN_CASES else hang_body)(args, rank, world)


def spawn_entry(index: int, argv: list[str], world: int, case_env: dict[str, dict[str, str]]) -> None:
    """One mp.spawn child: rank = index (an argument); per-rank env set in-process, as users do."""
    args = parse_args(argv)
    os.environ.update(case_env[str(index)])  # NCCL_HOSTID, NCCL_DEBUG_FILE, ...: not RANK
    become_host(os.environ["HF_HOST"])
    sys.exit(hang_body(args, index, world))


def spawn_main(args: argparse.Namespace) -> int:
    import torch.multiprocessing as mp

    case_env = json.loads(Path(args.dir, "spawn_env.json").read_text())
    argv = [a for a in sys.argv[1:] if a != "--spawn-main"]
    mp.spawn(spawn_entry, args=(argv, args.world, case_env), nprocs=args.world, join=True)
    return 0


# --------------------------------------------------------------------------- driver side


def forensics_env(repo: Path) -> tuple[dict[str, str], str]:
    """The variables `forensics env` recommends, with @DIR@ for the log folder (a clean env: nothing 'already set')."""
    clean = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONPATH": os.environ.get("PYTHONPATH", str(repo))}
    try:
        done = subprocess.run([sys.executable, "-m", "forensics", "env", "--json", "--dir", "@DIR@"], cwd=repo,
                              env=clean, capture_output=True, text=True, timeout=60)
        items = json.loads(done.stdout)
        return {i["name"]: str(i["value"]) for i in items}, "forensics env --json"
    except (OSError, ValueError, subprocess.TimeoutExpired, KeyError, TypeError) as err:
        return {
            "NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT,NET,RAS", "NCCL_DEBUG_FILE": "@DIR@/nccl.%h.%p.log",
            "TORCH_FR_BUFFER_SIZE": "2000", "TORCH_NCCL_DUMP_ON_TIMEOUT": "1",
            "TORCH_FR_DUMP_TEMP_FILE": "@DIR@/fr_trace_rank_", "NCCL_PROXY_DUMP_SIGNAL": "10",
            "NCCL_RAS_ENABLE": "1", "PYTHONFAULTHANDLER": "1",
        }, f"fallback list (forensics env failed: {err})"


def rank_env(args, case: str, rank: int, sdir: Path, port: int, fenv: dict[str, str]) -> dict[str, str]:
    hostdir = sdir / logical_host(case, rank)
    env = {k: v.replace("@DIR@", str(hostdir)) for k, v in fenv.items()}
    env.update(
        RANK=str(rank), LOCAL_RANK="0", WORLD_SIZE=str(args.world), LOCAL_WORLD_SIZE="1",
        MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), PYTHONUNBUFFERED="1", OMP_NUM_THREADS="1",
        HF_HOST=logical_host(case, rank), HF_HOSTDIR=logical_host(case, rank), TZ="UTC",
        TORCH_NCCL_WAIT_TIMEOUT_DUMP_MILSEC=str(args.dump_wait_ms),
        TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC=str(int(args.pg_timeout) + 30),
    )
    if args.backend == "nccl":
        env.update(NCCL_HOSTID=nccl_hostid(case, rank), NCCL_SOCKET_IFNAME="lo", NCCL_IB_DISABLE="1",
                   NCCL_NVLS_ENABLE="0")
        if args.plugin and case not in NO_RECORDER:
            env.update(NCCL_PROFILER_PLUGIN=args.plugin, FORENSICS_RECORDER_DIR=str(recorder_dir(args, case)),
                       FORENSICS_RECORDER_KEEP="1")
    if case in RUN_CASES:  # issue 15: every collective in the NCCL log, with a precise timestamp
        subsys = env.get("NCCL_DEBUG_SUBSYS", "INIT,NET,RAS")
        env["NCCL_DEBUG_SUBSYS"] = subsys if "COLL" in subsys.split(",") else subsys + ",COLL"
        env.update(NCCL_DEBUG_TIMESTAMP_LEVELS="WARN,INFO", NCCL_DEBUG_TIMESTAMP_FORMAT="[%F %T.%6f] ")
    env.update(CASE_ENV.get(case, {}))
    if case == "armed":  # every rank really runs on this machine: the trigger's leader collects them by pid here
        env["FORENSICS_HOST"] = socket.gethostname()
        # the job imports forensics (arm) and its collector runs py-spy: the driver's paths, as a user's job has them
        env.update(PYTHONPATH=os.environ.get("PYTHONPATH", args.repo), PATH=os.environ.get("PATH", "/usr/bin:/bin"))
    if rank in slow_senders(case, args.world) and args.slow_send_so:
        env.update(LD_PRELOAD=args.slow_send_so, HF_SLOW_SEND_NS_PER_BYTE=str(args.slow_send_ns))
    for kv in args.extra_env:
        key, _, value = kv.partition("=")
        env[key] = value
    return env


def build_slow_send(out: Path) -> str:
    """Compile slow_send.c (the slow-link injector) next to the results; '' when no compiler works."""
    so = out / "slow_send.so"
    try:
        done = subprocess.run(["gcc", "-O2", "-shared", "-fPIC", str(HERE / "slow_send.c"), "-o", str(so), "-ldl"],
                              capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as err:
        print(f"slow_send.c not built: {err}", flush=True)
        return ""
    if done.returncode != 0:
        print(f"slow_send.c not built: {done.stderr[-400:]}", flush=True)
        return ""
    return str(so)


def recorder_dir(args, case: str) -> Path:
    return Path(args.recorder_root) / case


def proc_state(pid: int) -> str:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        return stat.rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return "gone"


def alive(pid: int) -> bool:
    return proc_state(pid) not in ("gone", "Z", "X")


def children_of(pid: int) -> list[int]:
    out = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            out += [int(c) for c in (task / "children").read_text().split()]
        except (OSError, ValueError):
            pass
    return out


def kill_groups(pgids: list[int]) -> list[str]:
    """SIGCONT then SIGKILL each process group we started; report any process that survives."""
    for g in pgids:
        for sig in (signal.SIGCONT, signal.SIGKILL):
            try:
                os.killpg(g, sig)
            except (ProcessLookupError, PermissionError):
                pass
    time.sleep(0.5)
    left = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            if int(fields[2]) in pgids and fields[0] not in ("Z", "X"):
                left.append(f"pid {stat.parent.name} pgid {fields[2]} state {fields[0]}")
        except (OSError, IndexError, ValueError):
            pass
    return left


def run_collect(args, pids: list[int], out: Path, native: bool, timeout_s: int = 12, discover: bool = False,
                samples: int = 0) -> str:
    """`forensics collect` as a user runs it: by pid, or (discover) with no --pid at all; `samples`: py-spy
    samples per rank over about a second (issue 15: what a straggler does between collectives)."""
    argv = [sys.executable, "-m", "forensics", "collect", "-o", str(out), "--json", "-q", "--timeout", str(timeout_s)]
    if samples:
        argv += ["--samples", str(samples), "--sample-interval", "0.1"]
    if not discover:
        argv[4:4] = ["--pid", ",".join(map(str, pids))]
    if native:
        argv.append("--native")
    t = time.monotonic()
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s * 3 + 20, cwd=args.repo)
    except (OSError, subprocess.TimeoutExpired) as err:
        return f"collect {'(discover) ' if discover else ''}failed: {err}"
    out.mkdir(parents=True, exist_ok=True)
    (out.parent / f"{out.name}.collect.stdout").write_text(done.stdout)
    (out.parent / f"{out.name}.collect.stderr").write_text(done.stderr[-20000:])
    return f"collect {'(discover) ' if discover else ''}exit {done.returncode} in {time.monotonic() - t:.1f} s"


def copy_recorder(src: Path, dst: Path) -> dict:
    """Raw copy of the recorder's state files with the time they were copied (their 'observed' time)."""
    dst.mkdir(parents=True, exist_ok=True)
    copied = {}
    for f in sorted(src.glob("nccl-recorder.*")) if src.is_dir() else []:
        try:
            shutil.copyfile(f, dst / f.name)
            copied[f.name] = time.time_ns()
        except OSError:
            pass
    (dst / "copied_ns.json").write_text(json.dumps(copied, indent=1) + "\n")
    return copied


def ras_pair(args, dst: Path, tag: str, notes: list[str]) -> None:
    if args.backend != "nccl":
        return
    for name, js in ((f"ras_{tag}.txt", False), (f"ras_{tag}.json", True)):
        t = time.monotonic()
        try:
            text = ras_query(args.ras_port, "STATUS", js, timeout=3)
            (dst / name).write_text(f"# asked at {time.time():.6f}\n" + text)
        except OSError as err:
            notes.append(f"RAS {name} failed: {err}")
        else:
            notes.append(f"RAS {name}: {time.monotonic() - t:.2f} s")


def pyspy_samples(args, pids: dict[int, int], dst: Path, samples: int, gap_s: float) -> str:
    """`py-spy dump --nonblocking` of every rank, `samples` times `gap_s` apart (never pauses a rank)."""
    exe = args.py_spy or shutil.which("py-spy")
    if not exe:
        return "py-spy not found"
    dst.mkdir(parents=True, exist_ok=True)
    fails = 0
    for s in range(samples):
        t = time.monotonic()
        procs = {r: subprocess.Popen([exe, "dump", "--pid", str(p), "--nonblocking"], stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True) for r, p in pids.items()}
        stamp = time.time()
        for r, p in procs.items():
            try:
                text, _ = p.communicate(timeout=5)
            except subprocess.TimeoutExpired:
                p.kill()
                text, _ = p.communicate()
            fails += p.returncode != 0
            (dst / f"s{s}_rank{r}.txt").write_text(f"# sample {s} at {stamp:.6f} rc={p.returncode}\n{text}")
        time.sleep(max(0.0, gap_s - (time.monotonic() - t)))
    return f"py-spy {samples}x{len(pids)} dumps, {fails} failed"


def start_ranks(args, case: str, sdir: Path, port: int, fenv: dict[str, str]) -> tuple[list, list, list[int]]:
    procs, files, pgids = [], [], []
    me = [sys.executable, os.path.abspath(__file__), "--case", case, "--dir", str(sdir), "--backend", args.backend,
          "--pg-timeout", str(args.pg_timeout), "--hang-s", str(args.hang_s), "--gpu-cycles", str(args.gpu_cycles),
          "--max-s", str(args.max_s), "--world", str(args.world)]
    if case == "spawn":
        envs = {str(r): {k: v for k, v in rank_env(args, case, r, sdir, port, fenv).items()
                         if k.startswith(("NCCL_", "TORCH_FR_", "HF_"))} for r in range(args.world)}
        (sdir / "spawn_env.json").write_text(json.dumps(envs, indent=1))
        for r in range(args.world):
            (sdir / host_name(r)).mkdir(exist_ok=True)
        env = rank_env(args, case, 0, sdir, port, fenv)
        for k in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "NCCL_HOSTID", "HF_HOST", "HF_HOSTDIR",
                  "NCCL_DEBUG_FILE", "TORCH_FR_DUMP_TEMP_FILE"):
            env.pop(k, None)
        so, se = open(sdir / "launcher.stdout", "wb"), open(sdir / "launcher.stderr", "wb")
        files += [so, se]
        procs.append(subprocess.Popen(me + ["--spawn-main"], env=env, stdout=so, stderr=se, stdin=subprocess.DEVNULL,
                                      start_new_session=True, cwd=args.repo))
    else:
        for r in range(args.world):
            hdir = sdir / logical_host(case, r)
            hdir.mkdir(exist_ok=True)
            so, se = open(hdir / f"rank{r}.stdout", "wb"), open(hdir / f"rank{r}.stderr", "wb")
            files += [so, se]
            procs.append(subprocess.Popen(me + ["--worker"], env=rank_env(args, case, r, sdir, port, fenv), stdout=so,
                                          stderr=se, stdin=subprocess.DEVNULL, start_new_session=True, cwd=args.repo))
    pgids = [p.pid for p in procs]
    with open(Path(args.out_dir) / PGIDS_FILE, "a") as f:  # the shell kills these too, whatever happens here
        f.write("".join(f"{g}\n" for g in pgids))
    return procs, files, pgids


def wait_marks(sdir: Path, mark: str, world: int, procs: list, timeout: float) -> dict[int, int]:
    """Rank -> pid from the marker files the ranks write once warm (or started)."""
    deadline = time.monotonic() + timeout
    while True:
        found = {}
        for r in range(world):
            try:
                found[r] = int((sdir / f"{mark}.{r}").read_text())
            except (OSError, ValueError):
                pass
        if len(found) == world:
            return found
        if time.monotonic() > deadline or all(p.poll() is not None for p in procs):
            raise RuntimeError(f"only {len(found)}/{world} ranks wrote {mark} (see the rank stderr files)")
        time.sleep(0.2)


def finish_case(args, case: str, sdir: Path, procs, files, pgids, notes: list[str]) -> dict[str, int | None]:
    left = kill_groups(pgids)
    if left:
        notes.append("survivors after SIGKILL: " + "; ".join(left[:10]))
    for p in procs:
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            notes.append(f"pid {p.pid} did not exit after SIGKILL")
    for f in files:
        f.close()
    for m in list(sdir.glob("ready.*")) + list(sdir.glob("started.*")) + list(sdir.glob("dump.trigger*")):
        m.unlink(missing_ok=True)
    rdir = recorder_dir(args, case)
    if rdir.is_dir():
        copy_recorder(rdir, sdir / "recorder_final")
        shutil.rmtree(rdir, ignore_errors=True)
    return {str(p.pid): p.returncode for p in procs}


def run_hang_case(args, case: str, index: int, fenv: dict[str, str]) -> dict:
    sdir = Path(args.out_dir) / case
    shutil.rmtree(sdir, ignore_errors=True)
    sdir.mkdir(parents=True)
    port = args.port_base + index
    world = args.world
    culprit = culprit_of(case, world)
    notes: list[str] = []
    t0 = time.monotonic()
    procs, files, pgids = start_ranks(args, case, sdir, port, fenv)
    pids: dict[int, int] = {}
    states: dict[str, dict[str, str]] = {}
    interrupted: BaseException | None = None
    try:
        mark = "started" if case == "lateinit" else "ready"
        pids = wait_marks(sdir, mark, world, procs, args.warm_timeout)
        t_ready = time.monotonic()
        notes.append(f"{mark} after {t_ready - t0:.1f} s")
        time.sleep(args.settle_s)
        states["before_collect"] = {str(r): proc_state(p) for r, p in pids.items()}
        if case == "dataloader":
            kids = {str(r): children_of(p) for r, p in pids.items()}
            states["children"] = {r: ",".join(map(str, k)) for r, k in kids.items()}
        # every rank's pid, as a user names the job's ranks: a rank that already died and is a
        # zombie stays in the list (issue 14: it must be found with how it ended)
        live = [p for p in pids.values() if alive(p) or proc_state(p) == "Z"]
        if case in SINKS:  # the job's own Flight Recorder dump while hung, before collect (collect copies it)
            (sdir / "dump.trigger").write_text("now")
            time.sleep(2.0)
            notes.append(f"FR dump (fr_trace_rank_N) before collect at +{time.monotonic() - t_ready:.1f} s")
        if case == "spawn":
            live = [procs[0].pid] + live
        notes.append(run_collect(args, live, sdir / "bundle", native=args.native))
        if case == "spawn" and time.monotonic() - t_ready < args.pg_timeout - 8:
            notes.append(run_collect(args, [], sdir / "bundle_discover", native=False, timeout_s=8, discover=True))
        if case != "lateinit" and case not in SINKS:
            (sdir / "dump.trigger").write_text("now")
            notes.append(f"FR live dump trigger at +{time.monotonic() - t_ready:.1f} s")
        if args.backend == "nccl":
            ras_pair(args, sdir, "after_collect", notes)
        # post-mortem: let the watchdog (or store timeout) fire and the peers end
        end = t_ready + args.pg_timeout + args.dump_wait_ms / 1000 + args.post_s
        sinks = set(SINKS[case](world)) if case in SINKS else {culprit}
        peers = [p for r, p in pids.items() if r not in sinks or case in CYCLES]
        while time.monotonic() < end and any(alive(p) for p in peers):
            time.sleep(0.5)
        states["at_end"] = {str(r): proc_state(p) for r, p in pids.items()}
        notes.append(f"peers {'all ended' if not any(alive(p) for p in peers) else 'still alive'} at "
                     f"+{time.monotonic() - t_ready:.1f} s")
    except BaseException as err:  # noqa: BLE001 - one failed case must not stop the others
        notes.append(f"case error: {type(err).__name__}: {err}")
        interrupted = err if isinstance(err, (SystemExit, KeyboardInterrupt)) else None
    finally:
        exit_codes = finish_case(args, case, sdir, procs, files, pgids, notes)
    cycle = list(CYCLES.get(case, ()))
    if cycle:  # a deadlock: no one culprit, every member of the cycle is one
        culprit = None
    truth = {
        "case": case, "issue": 26 if case in CAUSAL_CASES else 14, "backend": args.backend, "world_size": world,
        "culprit_rank": culprit, "cycle_ranks": cycle,
        "culprit_ranks": list(SINKS[case](world)) if case in SINKS else ([culprit] if culprit is not None else []),
        "healthy_ranks": list(range(world // 2)) if case == "subgroup" else [],
        "culprit_host": logical_host(case, culprit) if culprit is not None else None,
        "culprit_pid": pids.get(culprit) if culprit is not None else None,
        "fault": FAULTS[case].format(n=WARM_OPS + 1, cycles=args.gpu_cycles),
        "hosts": {str(r): logical_host(case, r) for r in range(world)},
        "nccl_hostids": {str(r): nccl_hostid(case, r) for r in range(world)} if args.backend == "nccl" else {},
        "pids": {str(r): p for r, p in pids.items()}, "launcher_pid": procs[0].pid if case == "spawn" else None,
        "proc_states": states, "exit_codes_by_launched_pid": exit_codes, "pg_timeout_s": args.pg_timeout,
        "recorder": bool(args.plugin), "env_source": args.env_source,
        "seconds": round(time.monotonic() - t0, 1), "notes": notes, "torch_version": args.torch_version,
    }
    (sdir / "truth.json").write_text(json.dumps(truth, indent=2) + "\n")
    if interrupted is not None:  # the shell's timeout: truth written, ranks killed; now stop
        raise interrupted
    return truth


def step_stats(sdir: Path, world: int) -> dict:
    """Per-rank median step and wait times from the ranks' own [step] lines (the job's step series)."""
    per: dict[str, dict] = {}
    for f in sorted(sdir.glob("*/rank*.stdout")):
        steps, waits = [], []
        for line in f.read_text(errors="replace").splitlines():
            if line.startswith("[step] "):
                kv = dict(x.split("=", 1) for x in line[7:].split() if "=" in x)
                try:
                    steps.append(float(kv["step_ms"]))
                    waits.append(float(kv["wait_ms"]))
                except (KeyError, ValueError):
                    pass
        if steps:
            per[f.stem] = {"steps": len(steps), "median_step_ms": round(statistics.median(steps), 2),
                           "median_wait_ms": round(statistics.median(waits), 2)}
    return per


def collection_round(args, case: str, sdir: Path, i: int, pids: dict[int, int], notes: list[str]) -> None:
    rdir = sdir / f"round{i}"
    rdir.mkdir()
    t = time.monotonic()
    copy_recorder(recorder_dir(args, case), rdir / "rec_a")
    ras_pair(args, rdir, "a", notes)
    notes.append(f"round {i}: " + pyspy_samples(args, pids, rdir / "pyspy", args.samples, args.sample_gap))
    (sdir / f"dump.trigger.{i}").write_text("now")
    time.sleep(max(0.0, args.pair_gap - (time.monotonic() - t)))
    copy_recorder(recorder_dir(args, case), rdir / "rec_b")
    ras_pair(args, rdir, "b", notes)
    notes.append(f"round {i}: rec_a->rec_b {time.monotonic() - t:.2f} s; "
                 + run_collect(args, list(pids.values()), rdir / "bundle", native=False, timeout_s=8, samples=10))


def run_running_case(args, case: str, index: int, fenv: dict[str, str]) -> dict:
    sdir = Path(args.out_dir) / case
    shutil.rmtree(sdir, ignore_errors=True)
    sdir.mkdir(parents=True)
    world = args.world
    notes: list[str] = []
    t0 = time.monotonic()
    procs, files, pgids = start_ranks(args, case, sdir, args.port_base + index, fenv)
    pids: dict[int, int] = {}
    interrupted: BaseException | None = None
    rounds = args.healthy_rounds if case == "healthy" else args.rounds
    try:
        pids = wait_marks(sdir, "ready", world, procs, args.warm_timeout)
        t_ready = time.monotonic()
        notes.append(f"warm after {t_ready - t0:.1f} s")
        time.sleep(args.lead_s)
        for i in range(rounds):
            if not all(alive(p) for p in pids.values()):
                notes.append(f"round {i}: a rank ended early; stop collecting")
                break
            notes.append(f"round {i} at +{time.monotonic() - t_ready:.1f} s")
            collection_round(args, case, sdir, i, pids, notes)
            time.sleep(args.round_gap)
        if case == "armed":
            notes.append(wait_for_trigger(sdir / "trigger", args.trigger_wait_s))
        notes.append(f"all ranks alive at the end: {all(alive(p) for p in pids.values())}")
    except BaseException as err:  # noqa: BLE001
        notes.append(f"case error: {type(err).__name__}: {err}")
        interrupted = err if isinstance(err, (SystemExit, KeyboardInterrupt)) else None
    finally:
        exit_codes = finish_case(args, case, sdir, procs, files, pgids, notes)
    slow = slow_ranks(case, world)
    senders = slow_senders(case, world)
    kind = "host" if case == "slowhost" else ("rank" if slow else "none")
    if senders:
        kind = "network" if len(senders) == world else "link"
    truth = {
        "case": case, "issue": 15, "backend": args.backend, "world_size": world, "hang": False,
        "slow_ranks": slow, "slow_by_ms_per_step": SLOW[case][1] * 1000,
        "slow_hosts": sorted({logical_host(case, r) for r in slow}),
        "slow_kind": kind,
        "slow_senders": senders, "send_ns_per_byte": args.slow_send_ns if senders else 0,
        "send_pacing": ("slow_send.so (LD_PRELOAD): every socket send of >= 4 KiB sleeps ns-per-byte x bytes"
                        if senders else None),
        "step_work_ms_every_rank": STEP_COMPUTE_S * 1000,
        "where_slow_rank_spends_it": "augment_batch (time.sleep) before all_reduce" if slow else None,
        "hosts": {str(r): logical_host(case, r) for r in range(world)},
        "nccl_hostids": {str(r): nccl_hostid(case, r) for r in range(world)} if args.backend == "nccl" else {},
        "pids": {str(r): p for r, p in pids.items()}, "rounds": rounds,
        "recorder_loaded": bool(args.plugin) and case not in NO_RECORDER,
        "exit_codes_by_launched_pid": exit_codes, "ended_by": "SIGKILL from the driver after collection",
        "step_stats": step_stats(sdir, world), "recorder": bool(args.plugin), "env_source": args.env_source,
        "seconds": round(time.monotonic() - t0, 1), "notes": notes, "torch_version": args.torch_version,
    }
    (sdir / "truth.json").write_text(json.dumps(truth, indent=2) + "\n")
    if interrupted is not None:  # the shell's timeout: truth written, ranks killed; now stop
        raise interrupted
    return truth


def wait_for_trigger(folder: Path, wait_s: float) -> str:
    """armed: wait until forensics.arm()'s straggler incident's collection has written its JSON summary."""
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        done = [p for p in folder.glob("bundle-*-straggler.json") if p.stat().st_size > 0]
        if done:
            waited = time.monotonic() - deadline + wait_s
            return f"armed: straggler incident collected ({done[0].name}) with {waited:.1f} s of waiting"
        time.sleep(0.5)
    seen = sorted(p.name for p in folder.glob("*"))[:12]
    return f"armed: no straggler incident collected within {wait_s:.0f} s: {seen}"


def estimate_s(args, case: str) -> float:
    if case in HANG_CASES:
        return args.warm_est + args.pg_timeout + args.dump_wait_ms / 1000 + args.post_s + 3
    rounds = args.healthy_rounds if case == "healthy" else args.rounds
    armed = args.trigger_wait_s if case == "armed" else 0.0
    return args.warm_est + args.lead_s + rounds * (args.round_est + args.round_gap) + 3 + armed


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out-dir", default="live-out")
    p.add_argument("--cases", default=",".join(HANG_CASES + RUN_CASES))
    p.add_argument("--backend", choices=("nccl", "gloo"), default="nccl")
    p.add_argument("--world", type=int, default=None, help="ranks (default 8 nccl, 4 gloo)")
    p.add_argument("--plugin", default="", help="recorder plugin .so (NCCL_PROFILER_PLUGIN); empty = none")
    p.add_argument("--recorder-root", default="/dev/shm/hf-live")
    p.add_argument("--extra-env", action="append", default=[], metavar="K=V")
    p.add_argument("--port-base", type=int, default=29710)
    p.add_argument("--ras-port", type=int, default=28028)
    p.add_argument("--pg-timeout", type=float, default=None, help="process-group timeout, s (nccl 20, gloo 12)")
    p.add_argument("--dump-wait-ms", type=int, default=3000)
    p.add_argument("--hang-s", type=float, default=150.0, help="how long a culprit sleeps/spins (it is killed sooner)")
    p.add_argument("--gpu-cycles", type=float, default=3e11, help="gpusleep: torch.cuda._sleep cycles (~2.5 min)")
    p.add_argument("--settle-s", type=float, default=4.0)
    p.add_argument("--post-s", type=float, default=4.0, help="post-mortem slack after timeout + dump wait")
    p.add_argument("--native", action=argparse.BooleanOptionalAction, default=True, help="live collect --native")
    p.add_argument("--max-s", type=float, default=150.0, help="running cases: a rank stops stepping after this")
    p.add_argument("--rounds", type=int, default=2, help="collection rounds of a straggler job")
    p.add_argument("--healthy-rounds", type=int, default=4)
    p.add_argument("--samples", type=int, default=5, help="py-spy dumps per round")
    p.add_argument("--sample-gap", type=float, default=0.2)
    p.add_argument("--pair-gap", type=float, default=1.5, help="seconds between the two recorder/RAS reads")
    p.add_argument("--lead-s", type=float, default=3.0, help="running time before the first round")
    p.add_argument("--round-gap", type=float, default=1.0)
    p.add_argument("--round-est", type=float, default=7.0)
    p.add_argument("--warm-est", type=float, default=14.0)
    p.add_argument("--warm-timeout", type=float, default=60.0)
    p.add_argument("--total-s", type=float, default=500.0, help="skip cases that would end past this budget")
    p.add_argument("--py-spy", default=None)
    p.add_argument("--slow-send-ns", type=float, default=4.0, help="slowlink/slownet: ns of sleep per byte sent")
    p.add_argument("--trigger-wait-s", type=float, default=40.0, help="armed: the longest wait for arm()'s incident")
    p.add_argument("--dry-run", action="store_true", help="print the plan; run nothing")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--spawn-main", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--case", help=argparse.SUPPRESS)
    p.add_argument("--dir", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    nccl = args.backend == "nccl"
    args.world = args.world or (8 if nccl else 4)
    args.pg_timeout = args.pg_timeout or (20.0 if nccl else 12.0)
    args.wanted = [c.strip() for c in args.cases.split(",") if c.strip()]
    bad = [c for c in args.wanted if c not in HANG_CASES + RUN_CASES]
    if bad:
        p.error(f"unknown case(s) {bad}")
    args.repo = str(HERE.parents[1])
    args.env_source = ""
    args.slow_send_so = ""
    return args


def unwind_on_sigterm() -> None:
    """The shell's `timeout` sends SIGTERM: unwind, so every case's `finally` kills the ranks it started."""

    def on_term(signum, _frame):
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, on_term)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.worker:
        return worker(args)
    if args.spawn_main:
        return spawn_main(args)

    unwind_on_sigterm()
    out = Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    fenv, args.env_source = forensics_env(Path(args.repo))
    args.torch_version = _torch_version()  # imports torch here, once: never inside a case's cleanup
    if any(c in SLOW_SENDS for c in args.wanted):
        args.slow_send_so = build_slow_send(out)
        if not args.slow_send_so:
            args.wanted = [c for c in args.wanted if c not in SLOW_SENDS]
    if args.dry_run:
        plan = {c: {"estimate_s": estimate_s(args, c),
                    "rank_env": [{k: v for k, v in rank_env(args, c, r, out / c, 0, fenv).items()
                                  if k not in os.environ} for r in range(args.world)]} for c in args.wanted}
        print(json.dumps(plan, indent=1))
        return 0
    summary: dict[str, dict] = {"_env": {"source": args.env_source, "vars": fenv}}
    start = time.monotonic()
    for i, case in enumerate(args.wanted):
        if time.monotonic() - start + estimate_s(args, case) > args.total_s:
            summary[case] = {"skipped": f"would pass the {args.total_s:.0f} s budget"}
            print(f"== {case}: skipped (time budget)", flush=True)
            continue
        print(f"== {case} ({args.backend}, {args.world} ranks) at +{time.monotonic() - start:.0f} s", flush=True)
        runner = run_hang_case if case in HANG_CASES else run_running_case
        truth = runner(args, case, i, fenv)
        keep = ("culprit_rank", "slow_ranks", "seconds", "exit_codes_by_launched_pid", "proc_states", "step_stats",
                "notes")
        summary[case] = {k: truth[k] for k in keep if k in truth}
        print(json.dumps(summary[case]), flush=True)
        (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

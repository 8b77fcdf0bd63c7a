#!/usr/bin/env python3
"""Run real hang scenarios and keep every artifact they leave, with the known truth.

Why: the parsers and the correlation must be tested on what NCCL and PyTorch really
print when a job hangs, and on nothing typed from memory. Each scenario starts a
real job (N ranks as N fake hosts on one machine), breaks one known rank in one
known way, waits until the hang has formed, asks for every kind of evidence
(Flight Recorder dumps, proxy dumps, NCCL RAS text and JSON), lets the watchdog
fire, kills what is left, and writes `truth.json` beside the artifacts.

Self-contained on purpose (stdlib + torch only) so it can be copied to a GPU host.

    python nccl_scenarios.py --out-dir OUT                      # NCCL, 8 ranks, all scenarios
    python nccl_scenarios.py --backend gloo --world 4 --out-dir OUT --scenarios sleep,kill
    python nccl_scenarios.py --extra-env NCCL_PROFILER_PLUGIN=/path/lib.so ...

Scenarios: sleep (a rank sleeps before collective 11), sigstop (a rank is SIGSTOPped
in a stream of large all_reduces), kill (a rank is SIGKILLed in that stream),
mismatch (a rank calls all_gather where the others call all_reduce), chain (a wait
chain through three process groups whose root is a sleeping rank).
Issue 14 (`--scenarios issue14`): oom (a rank raises torch.OutOfMemoryError and exits 1;
on CUDA a real 4 TiB allocation), busy (a rank spins in pure Python in
preprocess_shard, state R), dataloader (a rank's DataLoader worker sleeps in
ShardDataset.__getitem__), lateinit (a rank sleeps before init_process_group; the
others time out in the store), spawn (the job is launched with
torch.multiprocessing.spawn: RANK is set inside each process, not in its exec
environment; one rank sleeps outside the collective).

Layout: OUT/<scenario>/<host>/{rank<r>.stdout,rank<r>.stderr,nccl.<host>.<pid>.log,fr_*}
and OUT/<scenario>/{ras_*,truth.json}.

Every rank runs in its own UTS namespace with hostname nodeXX when the kernel lets
it (root), so host names in NCCL logs differ per fake host as on a real cluster.
"""

from __future__ import annotations

import argparse
import ctypes
import datetime
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

SCENARIOS = ("sleep", "sigstop", "kill", "mismatch", "chain")
ISSUE14 = ("oom", "busy", "dataloader", "lateinit", "spawn")
ALL_SCENARIOS = SCENARIOS + ISSUE14
WARM_OPS = 10
CLONE_NEWUTS = 0x04000000


# --------------------------------------------------------------------------- truth


def culprit_of(scenario: str, world: int) -> int:
    """The rank each scenario breaks: never 0 (rank 0 is often blamed by accident)."""
    if scenario == "chain":
        return 3
    rank = {"sleep": world - 3, "sigstop": world // 2 - 1 or 1, "kill": world - 1, "mismatch": 1,
            "oom": world - 1, "busy": 1, "dataloader": world // 2, "lateinit": world - 2, "spawn": world - 3}[scenario]
    return rank if 0 < rank < world else world - 1


EXPECTED = {
    "sleep": ["missing-line", "wait-root", "behind"],
    "sigstop": ["stopped", "no-dump", "missing-line", "wait-root", "behind"],
    "kill": ["no-dump", "gone", "missing-line", "wait-root", "error-first"],
    "mismatch": ["mismatch"],
    "chain": ["wait-root", "missing-line", "behind"],
    # issue 14: classes the new judges are meant to give (names proposed, judged by the lead)
    "oom": ["exception", "exited", "gone", "no-dump", "missing-line", "wait-root", "error-first"],
    "busy": ["busy", "outside-collective", "missing-line", "wait-root", "behind"],
    "dataloader": ["dataloader-wait", "child-wait", "outside-collective", "missing-line", "wait-root", "behind"],
    "lateinit": ["never-joined", "rendezvous", "missing"],
    "spawn": ["outside-collective", "missing-line", "wait-root", "behind"],
}

FAULTS = {
    "sleep": "sleeps in Python before collective {n}",
    "sigstop": "SIGSTOPped in a stream of large all_reduces",
    "kill": "SIGKILLed in a stream of large all_reduces",
    "mismatch": "calls all_gather where every other rank calls all_reduce (collective {n})",
    "chain": "sleeps before its op in PG C; rank 2 waits on it in PG C, rank 1 on rank 2 in PG B, rank 0 "
             "on rank 1 in PG A",
    "oom": "raises torch.OutOfMemoryError (CUDA out of memory. Tried to allocate 4096.00 GiB) in load_giant_batch "
           "before collective {n} and exits 1 (on gloo after its non-daemon metrics-flush thread ends, --linger-s)",
    "busy": "spins in pure Python in preprocess_shard (state R) before collective {n}",
    "dataloader": "waits in DataLoader Queue.get for its worker, which sleeps in ShardDataset.__getitem__, "
                  "before collective {n}",
    "lateinit": "sleeps before init_process_group and never joins the rendezvous; the others time out in the store",
    "spawn": "launched by torch.multiprocessing.spawn (no RANK in /proc/PID/environ); sleeps in slow_data_loader "
             "before collective {n}",
}


def host_name(rank: int) -> str:
    return f"node{rank:02d}"


# --------------------------------------------------------------------------- worker


def become_host(name: str) -> str:
    """Enter a new UTS namespace named `name`; keep the real hostname if not allowed."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.unshare(CLONE_NEWUTS) == 0:
            socket.sethostname(name)
    except (OSError, AttributeError):
        pass
    return socket.gethostname().split(".")[0]


def fr_dump(out: Path, rank: int, tag: str, nccl: bool = False) -> None:
    """Write this rank's Flight Recorder buffer as pickle and JSON (whichever API exists).

    NCCL process groups record into the NCCL trace (`_dump_nccl_trace*`), gloo ones into
    the generic recorder (`_dump_fr_trace*`): ask the backend's own first.
    """
    import torch

    c10d = torch._C._distributed_c10d
    pickles = ("_dump_nccl_trace", "_dump_fr_trace") if nccl else ("_dump_fr_trace", "_dump_nccl_trace")
    jsons = ("_dump_nccl_trace_json", "_dump_fr_trace_json") if nccl else ("_dump_fr_trace_json",
                                                                           "_dump_nccl_trace_json")
    for api, suffix in ((a, "") for a in pickles):
        fn = getattr(c10d, api, None)
        if fn is None:
            continue
        try:
            (out / f"fr_{tag}_rank_{rank}{suffix}").write_bytes(fn())
            break
        except Exception as err:  # noqa: BLE001 - evidence gathering must not kill the rank
            print(f"[scenario] rank {rank}: {api} failed: {err}", flush=True)
    for api in jsons:
        fn = getattr(c10d, api, None)
        if fn is None:
            continue
        try:
            data = fn()
            (out / f"fr_{tag}_rank_{rank}.json").write_bytes(data if isinstance(data, bytes) else data.encode())
            break
        except Exception as err:  # noqa: BLE001
            print(f"[scenario] rank {rank}: {api} failed: {err}", flush=True)


def start_dump_watcher(out: Path, rank: int, nccl: bool) -> None:
    """Dump FR when the driver creates `dump.trigger`: a hung main thread cannot do it."""
    import threading

    def watch() -> None:
        while not (out / "dump.trigger").exists():
            time.sleep(0.2)
        fr_dump(out / host_name(rank), rank, "live", nccl)

    threading.Thread(target=watch, name="fr-dump-watcher", daemon=True).start()


OOM_MESSAGE = (
    "CUDA out of memory. Tried to allocate 4096.00 GiB. GPU 0 has a total capacity of 139.81 GiB of which"
    " 138.92 GiB is free. Including non-PyTorch memory, this process has 912.00 MiB memory in use. Of the"
    " allocated memory 4.00 MiB is allocated by PyTorch, and 2.00 MiB is reserved by PyTorch but unallocated."
    " If reserved but unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True"
    " to avoid fragmentation.  See documentation for Memory Management "
    " (https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)"
)


def load_giant_batch(torch, dev):
    """The OOM culprit: on CUDA a real 4 TiB allocation; on CPU the real error type, raised with CUDA's words."""
    if dev.type == "cuda":
        return torch.empty(4096 * 2**30, dtype=torch.uint8, device=dev)
    raise torch.OutOfMemoryError(OOM_MESSAGE)


def start_metrics_flush(seconds: float) -> None:
    """A non-daemon thread, as training scripts start for metrics: when the main thread dies of
    an exception, Python prints the traceback and then waits for this thread before exiting 1.

    Why (gloo only by default): gloo peers see a dead rank's sockets close and fail at once;
    a rank whose main thread died but whose process lingers keeps them waiting, which is the
    hang a live collection meets. NCCL peers wait for the watchdog anyway (--linger-s 0).
    """
    import threading

    threading.Thread(target=time.sleep, args=(seconds,), name="metrics-flush", daemon=False).start()


def preprocess_shard(seconds: float) -> int:
    """The busy culprit: pure-Python work that holds the CPU (state R) and never yields to the collective."""
    end = time.monotonic() + seconds
    count = 0
    while time.monotonic() < end:
        for _ in range(10000):
            count += 1
    return count


def slow_data_loader(seconds: float) -> None:
    """The spawn culprit: sleeps outside any collective."""
    time.sleep(seconds)


class ShardDataset:
    """A map-style dataset whose items take `delay` seconds each (the DataLoader worker hang)."""

    def __init__(self, delay: float) -> None:
        self.delay = delay

    def __len__(self) -> int:
        return 8

    def __getitem__(self, index: int):
        time.sleep(self.delay)
        return index


def read_shards(torch, delay: float) -> list:
    """Iterate a DataLoader with one worker process; the main thread waits in Queue.get for it."""
    from torch.utils.data import DataLoader

    loader = DataLoader(ShardDataset(delay), batch_size=1, num_workers=1)
    return [batch for batch in loader]


def run_fault(args, rank, world, culprit, dist, torch, dev, groups, small, sync) -> None:
    """The scenario proper, after warm-up: break `culprit` or wait on it."""
    if args.scenario in ("sleep", "oom", "busy", "dataloader", "spawn"):
        if rank == culprit:
            if args.scenario == "sleep":
                time.sleep(args.hang_s)
            elif args.scenario == "oom":
                if args.linger_s > 0:
                    start_metrics_flush(args.linger_s)
                time.sleep(1.0)  # let the driver see every rank warm first
                load_giant_batch(torch, dev)
            elif args.scenario == "busy":
                preprocess_shard(args.hang_s)
            elif args.scenario == "dataloader":
                read_shards(torch, args.hang_s)
            else:
                slow_data_loader(args.hang_s)
        dist.all_reduce(small)
        sync()
    elif args.scenario in ("sigstop", "kill"):
        big = torch.ones(args.big_numel, device=dev)
        for _ in range(100000):
            dist.all_reduce(big)
    elif args.scenario == "mismatch":
        if rank == culprit:
            outs = [torch.empty_like(small) for _ in range(world)]
            dist.all_gather(outs, small)
        else:
            dist.all_reduce(small)
        sync()
    elif args.scenario == "chain":
        a, b, c = groups
        if rank == 3:
            time.sleep(args.hang_s)
            dist.all_reduce(small, group=c)
            sync()
        if rank == 2:
            dist.all_reduce(small, group=c)
            sync()
            dist.all_reduce(small, group=b)
            sync()
        if rank == 1:
            dist.all_reduce(small, group=b)
            sync()
            dist.all_reduce(small, group=a)
            sync()
        if rank == 0:
            dist.all_reduce(small, group=a)
            sync()
        dist.all_reduce(small)  # every rank ends in the world group
        sync()


def worker(args: argparse.Namespace) -> int:
    """One rank launched with RANK/WORLD_SIZE in its environment (torchrun style)."""
    return rank_main(args, int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]))


def spawned_rank(index: int, args: argparse.Namespace, world: int, port: int) -> None:
    """One rank of the spawn scenario, called by torch.multiprocessing.spawn as fn(i, *args).

    As notebooks and Lightning's ddp_spawn do, the rank arrives as an argument and is put
    into os.environ here: /proc/PID/environ (the environment at exec) never holds it.
    """
    sdir = Path(args.dir)
    env = {"RANK": str(index), "LOCAL_RANK": str(index), "WORLD_SIZE": str(world), "LOCAL_WORLD_SIZE": str(world),
           "TORCH_FR_DUMP_TEMP_FILE": str(sdir / "node00" / "fr_trace_rank_")}
    if args.backend == "nccl":
        env.update(NCCL_HOSTID=f"spawn{index:02d}", HF_GPU=str(index % args.gpus),
                   NCCL_DEBUG_FILE=str(sdir / "node00" / "nccl.%h.%p.log"))
    os.environ.update(env)
    code = rank_main(args, index, world)
    if code:
        sys.exit(code)


def spawn_main(args: argparse.Namespace) -> int:
    """The spawn scenario's launcher process: sets the store address, then mp.spawn's the ranks."""
    import torch.multiprocessing as mp

    world, port = args.world, int(os.environ["HF_SPAWN_PORT"])
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    mp.spawn(spawned_rank, args=(args, world, port), nprocs=world, join=True)
    return 0


def rank_main(args: argparse.Namespace, rank: int, world: int) -> int:
    """One rank: warm up, then break (or wait) the way the scenario says."""
    out = Path(args.dir)
    become_host(os.environ.get("HF_HOST") or host_name(rank))
    import torch
    import torch.distributed as dist

    nccl = args.backend == "nccl"
    timeout = datetime.timedelta(seconds=args.pg_timeout)
    culprit = culprit_of(args.scenario, world)
    if args.scenario == "lateinit":
        # every rank is "ready" before the rendezvous; the culprit never reaches it in time
        (out / f"ready.{rank}").write_text(str(os.getpid()))
        print(f"[scenario] rank {rank} pid {os.getpid()} host {socket.gethostname()} before init", flush=True)
        if rank == culprit:
            time.sleep(args.hang_s)
    if nccl:
        dev = torch.device(f"cuda:{int(os.environ.get('HF_GPU', '0'))}")
        torch.cuda.set_device(dev)
        dist.init_process_group("nccl", device_id=dev, timeout=timeout)
    else:
        dev = torch.device("cpu")
        dist.init_process_group("gloo", timeout=timeout)

    def sync() -> None:
        if nccl:
            torch.cuda.synchronize()

    groups = []
    if args.scenario == "chain":
        groups = [dist.new_group(r, timeout=timeout, group_desc=d)
                  for r, d in (([0, 1], "pg_A"), ([1, 2], "pg_B"), ([2, 3], "pg_C"))]
    small = torch.ones(1024 * 1024, device=dev)
    for _ in range(WARM_OPS):
        dist.all_reduce(small)
        sync()
    for g, members in zip(groups, ([0, 1], [1, 2], [2, 3])):
        if rank in members:
            dist.all_reduce(small, group=g)
            sync()
    start_dump_watcher(out, rank, nccl)
    if args.scenario != "lateinit":
        (out / f"ready.{rank}").write_text(str(os.getpid()))
    print(f"[scenario] rank {rank} pid {os.getpid()} host {socket.gethostname()} warm", flush=True)

    try:
        run_fault(args, rank, world, culprit, dist, torch, dev, groups, small, sync)
    except Exception:
        # A failed collective ends this rank: keep its Flight Recorder first, as
        # TORCH_NCCL_DUMP_ON_TIMEOUT does for NCCL (gloo has no such dump).
        if not list((out / host_name(rank)).glob("fr_live_rank_*")):
            fr_dump(out / host_name(rank), rank, "error", nccl)
        raise
    print(f"[scenario] rank {rank} finished the scenario (unexpected for a hang)", flush=True)
    dist.destroy_process_group()
    return 0


# --------------------------------------------------------------------------- RAS


def _line(sock: socket.socket) -> bytes:
    buf = b""
    while not buf.endswith(b"\n"):
        chunk = sock.recv(1)
        if not chunk:
            break
        buf += chunk
    return buf


def ras_query(port: int, command: str, json_format: bool = False, timeout: float = 10.0) -> str:
    """Ask the local NCCL RAS server (same exchange as forensics.ras_client, kept here to stay self-contained)."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout + 3) as sock:
        sock.sendall(b"CLIENT PROTOCOL 2\n")
        greeting = _line(sock)
        sock.sendall(f"TIMEOUT {int(timeout)}\n".encode())
        ok = _line(sock)
        if json_format:
            sock.sendall(b"SET FORMAT json\n")
            ok += _line(sock)
        sock.sendall(command.encode() + b"\n")
        chunks = []
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                break
            chunks.append(chunk)
    if b"OK" not in ok:
        chunks.insert(0, b"# unexpected reply to settings: " + ok)
    return (greeting + b"".join(chunks)).decode(errors="replace")


# --------------------------------------------------------------------------- driver


def rank_env(args: argparse.Namespace, rank: int, sdir: Path, port: int) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        RANK=str(rank), LOCAL_RANK="0", WORLD_SIZE=str(args.world), LOCAL_WORLD_SIZE="1",
        MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), PYTHONUNBUFFERED="1", OMP_NUM_THREADS="1",
        TORCH_FR_BUFFER_SIZE="2000", TORCH_FR_DUMP_TEMP_FILE=str(sdir / host_name(rank) / "fr_trace_rank_"),
    )
    if args.backend == "nccl":
        env.update(
            NCCL_SOCKET_IFNAME="lo", NCCL_IB_DISABLE="1", NCCL_NVLS_ENABLE="0",
            NCCL_DEBUG="INFO", NCCL_DEBUG_SUBSYS="INIT,COLL,NET,PROXY,RAS",
            NCCL_DEBUG_FILE=str(sdir / host_name(rank) / "nccl.%h.%p.log"),
            NCCL_PROXY_DUMP_SIGNAL="10", TORCH_NCCL_DUMP_ON_TIMEOUT="1",
            TORCH_NCCL_WAIT_TIMEOUT_DUMP_MILSEC=str(args.dump_wait_ms), TORCH_NCCL_ASYNC_ERROR_HANDLING="1",
            TORCH_NCCL_ENABLE_MONITORING="1", TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC=str(args.pg_timeout + 20),
        )
    env.update(layout_env(args, rank))
    for kv in args.extra_env:
        key, _, value = kv.partition("=")
        env[key] = value
    return env


def spawn_env(args: argparse.Namespace, port: int) -> dict[str, str]:
    """The spawn launcher's environment: no rank variables, no store address (it sets those itself)."""
    env = rank_env(args, 0, Path(args.out_dir) / "spawn", port)
    for key in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
                "TORCH_FR_DUMP_TEMP_FILE", "NCCL_HOSTID", "NCCL_DEBUG_FILE", "HF_GPU"):
        env.pop(key, None)
    env.update(HF_SPAWN_PORT=str(port), HF_HOST="node00")
    return env


def logical_host(args: argparse.Namespace, rank: int) -> str:
    """The host a rank belongs to. fake: one host per rank (NCCL's network transport between
    ranks sharing one GPU); p2p: every rank on one host, one GPU each (P2P/NVLink);
    mixed: the first --gpus ranks share host node00 on their own GPUs, the rest are fake hosts."""
    if args.layout == "p2p" or getattr(args, "scenario_now", None) == "spawn":
        return "node00"
    if args.layout == "mixed":
        return "node00" if rank < args.gpus else host_name(rank - args.gpus + 1)
    return host_name(rank)


def layout_env(args: argparse.Namespace, rank: int) -> dict[str, str]:
    env = {"HF_HOST": logical_host(args, rank), "HF_GPU": str(rank % args.gpus)}
    if args.backend == "nccl" and args.layout != "p2p":
        env["NCCL_HOSTID"] = logical_host(args, rank)
    return env


def run_scenario(args: argparse.Namespace, scenario: str, index: int) -> dict:
    """Run one scenario to its end and write its artifacts and truth.json."""
    sdir = Path(args.out_dir) / scenario
    args.scenario_now = scenario
    sdir.mkdir(parents=True, exist_ok=True)
    for old in sorted(sdir.rglob("*"), reverse=True):
        old.unlink() if old.is_file() else old.rmdir()
    port = args.port_base + index
    culprit = culprit_of(scenario, args.world)
    t0 = time.monotonic()
    notes: list[str] = []
    for rank in range(args.world):
        (sdir / host_name(rank)).mkdir(exist_ok=True)
    procs, files, outputs = _start_ranks(args, scenario, sdir, port)
    pids = {r: p.pid for r, p in enumerate(procs)}
    launcher_pid = procs[0].pid if scenario == "spawn" else None
    try:
        _drive(args, scenario, sdir, procs, pids, culprit, port, t0, notes)
    except Exception as err:  # noqa: BLE001 - one failed scenario must not stop the others
        notes.append(f"scenario error: {type(err).__name__}: {err}")
    finally:
        _stop(procs, files, pids)
    for r in range(args.world):
        (sdir / f"ready.{r}").unlink(missing_ok=True)
    (sdir / "dump.trigger").unlink(missing_ok=True)
    truth = {
        "scenario": scenario,
        "backend": args.backend,
        "world_size": args.world,
        "culprit_rank": culprit,
        "culprit_host": logical_host(args, culprit),
        "layout": args.layout,
        "gpus": args.gpus,
        "culprit_pid": pids[culprit],
        "fault": FAULTS[scenario].format(n=WARM_OPS + 1),
        "expected_reason_classes": EXPECTED[scenario],
        "hosts": {str(r): logical_host(args, r) for r in range(args.world)},
        "pids": {str(r): pids[r] for r in range(args.world)},
        "exit_codes": ({"launcher": procs[0].returncode} if scenario == "spawn"
                       else {str(r): p.returncode for r, p in enumerate(procs)}),
        "launcher_pid": launcher_pid,
        "outputs": {str(r): list(v) for r, v in outputs.items()},
        "seconds": round(time.monotonic() - t0, 1),
        "notes": notes,
        "torch_version": _torch_version(),
    }
    (sdir / "truth.json").write_text(json.dumps(truth, indent=2) + "\n")
    write_launcher_record(sdir, truth, scenario)
    return truth


def _start_ranks(args: argparse.Namespace, scenario: str, sdir: Path,
                 port: int) -> tuple[list[subprocess.Popen], list, dict[int, tuple[str, str]]]:
    """Start the scenario's processes (one per rank, or spawn's one launcher): (processes, their open output
    files, each rank's stdout/stderr paths under sdir)."""
    procs: list[subprocess.Popen] = []
    files = []
    outputs: dict[int, tuple[str, str]] = {}
    base_cmd = [sys.executable, os.path.abspath(__file__), "--scenario", scenario, "--dir", str(sdir),
                "--backend", args.backend, "--pg-timeout", str(args.pg_timeout), "--hang-s", str(args.hang_s),
                "--big-numel", str(args.big_numel), "--world", str(args.world), "--gpus", str(args.gpus),
                "--linger-s", str(args.linger_s)]
    if scenario == "spawn":
        # one launcher process; every rank shares its output files, as in a notebook
        so, se = open(sdir / "node00" / "spawn.stdout", "wb"), open(sdir / "node00" / "spawn.stderr", "wb")
        files += [so, se]
        procs.append(subprocess.Popen(base_cmd + ["--spawn-main"], env=spawn_env(args, port), stdout=so, stderr=se,
                                      stdin=subprocess.DEVNULL, start_new_session=True))
        outputs = {r: ("node00/spawn.stdout", "node00/spawn.stderr") for r in range(args.world)}
        return procs, files, outputs
    for rank in range(args.world):
        hdir = sdir / host_name(rank)  # logs gathered per host, as users keep them
        so, se = open(hdir / f"rank{rank}.stdout", "wb"), open(hdir / f"rank{rank}.stderr", "wb")
        files += [so, se]
        procs.append(subprocess.Popen(base_cmd + ["--worker"], env=rank_env(args, rank, sdir, port), stdout=so,
                                      stderr=se, stdin=subprocess.DEVNULL, start_new_session=True))
        outputs[rank] = (f"{host_name(rank)}/rank{rank}.stdout", f"{host_name(rank)}/rank{rank}.stderr")
    return procs, files, outputs


def _drive(args: argparse.Namespace, scenario: str, sdir: Path, procs: list[subprocess.Popen], pids: dict[int, int],
           culprit: int, port: int, t0: float, notes: list[str]) -> None:
    """Wait for the ranks to warm up (pids then holds the ranks' own word on their pids), inject the fault, ask for
    the dumps (Flight Recorder, RAS, proxy), run the collector, and let the scenario run its course."""
    deadline = t0 + args.warm_timeout
    while not all((sdir / f"ready.{r}").exists() for r in range(args.world)):
        if time.monotonic() > deadline or any(p.poll() is not None for p in procs):
            raise RuntimeError("ranks did not all get warm (see rank*.stderr)")
        time.sleep(0.2)
    time.sleep(0.3)
    pids.update({r: int((sdir / f"ready.{r}").read_text()) for r in range(args.world)})  # the ranks' own word
    t_ready = time.monotonic()
    notes.append(f"warm after {t_ready - t0:.1f} s")
    if scenario in ("sigstop", "kill"):
        time.sleep(args.stream_s)
        os.kill(pids[culprit], signal.SIGSTOP if scenario == "sigstop" else signal.SIGKILL)
        notes.append(f"{'SIGSTOP' if scenario == 'sigstop' else 'SIGKILL'} to rank {culprit} pid {pids[culprit]} "
                     f"at +{time.monotonic() - t_ready:.1f} s")
    time.sleep(args.settle_s)
    (sdir / "dump.trigger").write_text("now")
    notes.append(f"FR dump trigger at +{time.monotonic() - t_ready:.1f} s")
    if args.backend == "nccl":
        _nccl_dumps(args, scenario, sdir, procs, culprit, t_ready, notes)
    if args.collect_cmd:
        notes.append(run_collect(args.collect_cmd, pids, sdir, f"127.0.0.1:{port}"))
    end = t_ready + args.scenario_s
    while time.monotonic() < end and any(p.poll() is None for r, p in enumerate(procs)
                                         if not (scenario == "sigstop" and r == culprit)):
        time.sleep(0.5)


def _nccl_dumps(args: argparse.Namespace, scenario: str, sdir: Path, procs: list[subprocess.Popen], culprit: int,
                t_ready: float, notes: list[str]) -> None:
    """Ask NCCL's RAS for the job's status, then the live ranks for their proxy state (SIGUSR1)."""
    # RAS first: it lives only as long as the processes, and the watchdog fires at pg_timeout.
    for name, command, js in (("ras_status.txt", "STATUS", False), ("ras_verbose.txt", "VERBOSE STATUS", False),
                              ("ras_status.json", "STATUS", True)):
        for attempt in (1, 2):
            t = time.monotonic()
            try:
                (sdir / name).write_text(ras_query(args.ras_port, command, js, timeout=args.ras_timeout))
                notes.append(f"RAS {command}{' json' if js else ''}: {time.monotonic() - t:.1f} s")
                break
            except OSError as err:
                notes.append(f"RAS {command}{' json' if js else ''} attempt {attempt} failed: {err}")
    for r, p in enumerate(procs):
        if p.poll() is None and not (scenario == "sigstop" and r == culprit):
            try:
                os.kill(p.pid, signal.SIGUSR1)
            except ProcessLookupError:
                pass
    notes.append(f"SIGUSR1 (NCCL_PROXY_DUMP_SIGNAL) to live ranks at +{time.monotonic() - t_ready:.1f} s")


def _stop(procs: list[subprocess.Popen], files: list, pids: dict[int, int]) -> None:
    """End every process of the scenario (a stopped one is continued first, so that it can die) and close files."""
    for p in procs:
        if p.poll() is None:
            try:
                os.killpg(p.pid, signal.SIGCONT)
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    for p in procs:
        p.wait()
    for f in files:
        f.close()
    for pid in pids.values():  # spawn's ranks are not our children: make sure they are gone
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def write_launcher_record(sdir: Path, truth: dict, scenario: str) -> None:
    """What a launcher knows (pid, host, exit, output files) in the format of parsers.readers.launcher."""
    ranks = []
    for r in range(truth["world_size"]):
        code = truth["exit_codes"].get(str(r)) if scenario != "spawn" else None
        out, err = truth["outputs"][str(r)]
        ranks.append({"rank": r, "pid": truth["pids"][str(r)], "host": truth["hosts"][str(r)], "returncode": code,
                      "exited_at": None, "stdout": out, "stderr": err})
    record = {"launcher": "nccl_scenarios.py" + (" (torch.multiprocessing.spawn)" if scenario == "spawn" else ""),
              "fault": scenario, "culprit": truth["culprit_rank"], "ranks": ranks}
    (sdir / "launcher.json").write_text(json.dumps(record, indent=1) + "\n")


def run_collect(template: str, pids: dict[int, int], sdir: Path, job: str) -> str:
    """Run the user's collector (e.g. forensics collect) against the live ranks; say how it went.

    {pids}: the ranks whose process still exists and is no zombie; {job}: MASTER_ADDR:PORT
    (forensics collect --job), the way to find spawn-launched ranks without naming pids.
    """
    import shlex

    live = ",".join(str(pid) for pid in pids.values() if _alive(pid))
    argv = [a.replace("{pids}", live).replace("{dir}", str(sdir / "bundle")).replace("{job}", job)
            for a in shlex.split(template)]
    t = time.monotonic()
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=90)
    except (OSError, subprocess.TimeoutExpired) as err:
        return f"collect failed: {err}"
    (sdir / "collect.stdout").write_text(done.stdout)
    (sdir / "collect.stderr").write_text(done.stderr)
    return f"collect exit {done.returncode} in {time.monotonic() - t:.1f} s"


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rfind(")") + 2] not in "ZX"


def _torch_version() -> str:
    try:
        import torch

        nccl = ".".join(map(str, torch.cuda.nccl.version())) if torch.cuda.is_available() else None
        return f"{torch.__version__} nccl {nccl}" if nccl else torch.__version__
    except Exception:  # noqa: BLE001
        return "unknown"


def plan(args: argparse.Namespace) -> dict:
    """What a run would do, without starting anything (for checking on a machine without GPU)."""
    base = set(os.environ)
    out = {}
    for i, scenario in enumerate(args.wanted):
        sdir = Path(args.out_dir) / scenario
        envs = [rank_env(args, r, sdir, args.port_base + i) for r in range(args.world)]
        out[scenario] = {
            "culprit_rank": culprit_of(scenario, args.world), "fault": FAULTS[scenario].format(n=WARM_OPS + 1),
            "expected_reason_classes": EXPECTED[scenario], "dir": str(sdir),
            "rank_env": [{k: v for k, v in e.items() if k not in base or k in ("RANK", "WORLD_SIZE")} for e in envs],
        }
    return out


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out-dir", default=os.environ.get("OUT_DIR", "scenario-out"))
    p.add_argument("--scenarios", default=",".join(SCENARIOS),
                   help="comma list of " + ",".join(ALL_SCENARIOS) + "; 'issue14' = " + ",".join(ISSUE14) + "; 'all'")
    p.add_argument("--backend", choices=("nccl", "gloo"), default="nccl")
    p.add_argument("--world", type=int, default=None, help="ranks (default 8 for nccl, 4 for gloo)")
    p.add_argument("--extra-env", action="append", default=[], metavar="K=V")
    p.add_argument("--port-base", type=int, default=29610)
    p.add_argument("--ras-port", type=int, default=28028)
    p.add_argument("--ras-timeout", type=int, default=4, help="RAS TIMEOUT and per-read wait, s")
    p.add_argument("--pg-timeout", type=int, default=None, help="process-group timeout, s (nccl 30, gloo 15)")
    p.add_argument("--dump-wait-ms", type=int, default=5000)
    p.add_argument("--hang-s", type=float, default=600.0, help="how long a sleeping culprit sleeps")
    p.add_argument("--linger-s", type=float, default=None,
                   help="oom: the culprit's process outlives its dead main thread this long (gloo settle+12, nccl 0)")
    p.add_argument("--stream-s", type=float, default=2.0, help="stream time before SIGSTOP/SIGKILL")
    p.add_argument("--settle-s", type=float, default=None, help="wait for the hang to form before dumps")
    p.add_argument("--scenario-s", type=float, default=None, help="hard end of a scenario after warm-up")
    p.add_argument("--warm-timeout", type=float, default=90.0)
    p.add_argument("--total-s", type=float, default=400.0, help="skip scenarios that would end past this budget")
    p.add_argument("--dry-run", action="store_true",
                   help="print the plan (culprits, per-rank env) as JSON; run nothing")
    p.add_argument("--big-numel", type=int, default=None)
    p.add_argument("--layout", choices=("fake", "p2p", "mixed"), default="fake",
                   help="fake: a host per rank on one GPU; p2p: one host, a GPU per rank; mixed: --gpus ranks on one "
                        "host + fake hosts")
    p.add_argument("--gpus", type=int, default=1, help="GPUs to spread ranks over (rank %% gpus)")
    p.add_argument("--collect-cmd", default=None, metavar="CMD",
                   help="run while the hang holds, after RAS: {pids} = comma list of live pids, {dir} = "
                        "OUT/<scenario>/bundle")
    # worker-only
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--spawn-main", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--scenario", help=argparse.SUPPRESS)
    p.add_argument("--dir", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    nccl = args.backend == "nccl"
    args.world = args.world or (8 if nccl else 4)
    args.pg_timeout = args.pg_timeout or (30 if nccl else 15)
    args.settle_s = args.settle_s if args.settle_s is not None else (6.0 if nccl else 5.0)
    args.linger_s = args.linger_s if args.linger_s is not None else (0.0 if nccl else args.settle_s + 12)
    args.scenario_s = args.scenario_s or (args.pg_timeout + args.dump_wait_ms / 1000 + 15)
    args.big_numel = args.big_numel or (16 * 1024 * 1024 if nccl else 256 * 1024)
    wanted = []
    for name in (s.strip() for s in args.scenarios.split(",")):
        wanted += (list(ISSUE14) if name == "issue14" else list(ALL_SCENARIOS) if name == "all"
                   else [name] if name else [])
    bad = [s for s in wanted if s not in ALL_SCENARIOS]
    if bad:
        p.error(f"unknown scenario(s) {bad}; known: {', '.join(ALL_SCENARIOS)}")
    if "chain" in wanted and args.world < 4 and not args.worker:  # a worker runs one --scenario, not the list
        p.error("chain needs at least 4 ranks")
    args.wanted = wanted
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.worker:
        return worker(args)
    if args.spawn_main:
        return spawn_main(args)
    if args.dry_run:
        print(json.dumps(plan(args), indent=2))
        return 0
    summary = {}
    start = time.monotonic()
    for i, scenario in enumerate(args.wanted):
        if time.monotonic() - start + 20 + args.scenario_s > args.total_s:
            summary[scenario] = {"skipped": f"would pass the {args.total_s:.0f} s budget"}
            print(f"== {scenario}: skipped (time budget)", flush=True)
            continue
        print(f"== {scenario} ({args.backend}, {args.world} ranks)", flush=True)
        truth = run_scenario(args, scenario, i)
        summary[scenario] = {k: truth[k] for k in ("culprit_rank", "seconds", "exit_codes", "notes")}
        print(json.dumps(summary[scenario]), flush=True)
    Path(args.out_dir).mkdir(parents=True, exist_ok=True)
    (Path(args.out_dir) / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

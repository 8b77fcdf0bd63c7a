#!/usr/bin/env python3
"""Issue 39's matrix: point-to-point faults, barriers, aborts and locks, each as a live bundle and a logs folder.

Why: the verdict on a pipeline, a pair or a barrier must be built and checked on what real
NCCL jobs leave, live (`forensics collect`) and post-mortem (the logs folder the recommended
env makes: NCCL logs, Flight Recorder dumps with timing, the recorder's copy of its state).
The project passed its own captures while other captures of the same fault failed, so each
case draws its culprit rank(s), world size, message size and fault step from a seed, and
writes that truth to truth.json.

Cases (the culprit and the sizes come from the seed):
  wrongpeer      pipeline of dist.send/recv 0 -> 1 -> ...; at micro-batch m stage c posts recv(src=c-2), not c-1
  wrongpeersend  pipeline; at micro-batch m stage c sends to c+2, not c+1 (c+2 waits for c+1, c+1 for c)
  sendsend       ranks a and b both send S MB to each other, then receive; the others wait in the next all_reduce
  recvrecv       ranks a and b exchange once a step (a sends first); at step m both post recv from the other
                 first (then would send); the others wait in that step's all_reduce
  pipestall      pipeline; stage c sleeps in stage_forward (after its recv, before its send) at micro-batch m
  monbarrier     monitored_barrier (gloo group) with a timeout; rank c never arrives (sleeps in load_shard)
  ordermismatch  rank c calls broadcast(n2 floats) where the others call all_reduce(n1 floats), n1 != n2
  lock           rank c's main thread waits on ckpt_lock, held by its thread ckpt-writer (in write_shard_to_storage)
  subgroup       groups A (first half) and B (second half); rank c sleeps in validate_shard before its group's
                 all_reduce; the other group runs its steps, then exits 0 without destroy_process_group
  gpusleep       rank c runs torch.cuda._sleep right before all_reduce (a long kernel on its stream)

Each case: N ranks as N hosts on one GPU (distinct NCCL_HOSTID, lo, no IB, no NVLS), the env
`forensics env --recorder` prints with @DIR@ = OUT/<case>/logs/<host>, a live `forensics collect`
into OUT/<case>/bundle, then the watchdog fires (short timeout) and leaves the logs folder;
every process is killed; torch's fr_trace runs on the dumps (OUT/<case>/fr_trace.txt); the
case is packed into $OUT/I39-<case>.tar.gz at once (a run cut at its limit keeps what is done).

    python i39_scenarios.py --out-dir /tmp/i39 --plugin /path/libnccl-profiler-forensics.so --seed 39
    python i39_scenarios.py --backend gloo --world 8 --out-dir /tmp/i39 --cases lock,pipestall   # CPU dry run
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import random
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import live_scenarios as ls  # noqa: E402
from nccl_scenarios import _torch_version, become_host, host_name  # noqa: E402
from pack_out import pack  # noqa: E402

CASES = ("wrongpeer", "wrongpeersend", "sendsend", "recvrecv", "pipestall", "monbarrier", "ordermismatch", "lock",
         "subgroup", "gpusleep")
#: cases of point-to-point traffic (NCCL warms each rank's neighbours' p2p communicators before them)
P2P_CASES = ("wrongpeer", "wrongpeersend", "sendsend", "recvrecv", "pipestall")
#: cases that mean nothing on gloo (no GPU stream; gloo has no size check that aborts)
NCCL_ONLY = ("gpusleep",)
WARM_OPS = 6
PGIDS_FILE = "pgids.txt"


# --------------------------------------------------------------------------- the plan (from the seed)


def case_plan(case: str, seed: int, backend: str, world: int | None) -> dict:
    """World size, culprit(s), sizes and step of one case, drawn from (seed, case): its truth."""
    rnd = random.Random(f"{seed}:{case}")
    w = world or rnd.choice((4, 6, 8))
    p: dict = {"case": case, "world": w, "fault_step": rnd.randint(1, 3), "culprits": [], "healthy": []}
    floats = rnd.choice((64 * 1024, 256 * 1024, 1024 * 1024))
    if case == "wrongpeer":
        c = rnd.randint(2, w - 1)
        p.update(culprits=[c], floats=floats, fault_class="p2p-wrong-peer",
                 why=f"rank {c} posts recv from rank {c - 2}, which never sends to it (its sender is rank {c - 1})")
    elif case == "wrongpeersend":
        c = rnd.randint(1, w - 3)  # a stage with a sender before it and two stages after it
        p.update(culprits=[c], floats=floats, fault_class="p2p-wrong-peer",
                 why=f"rank {c} sends to rank {c + 2}, which never receives from it (its receiver is rank {c + 1}, "
                     f"which waits for it)")
    elif case == "sendsend":
        a, b = sorted(rnd.sample(range(w), 2))
        mb = rnd.choice((48, 64, 96))
        p.update(culprits=[a, b], floats=mb * 2**20 // 4, fault_class="p2p-send-send-deadlock",
                 why=f"ranks {a} and {b} both send {mb} MB to each other before receiving: neither posts its recv")
    elif case == "recvrecv":
        a, b = sorted(rnd.sample(range(w), 2))
        p.update(culprits=[a, b], floats=floats, fault_class="p2p-recv-recv-deadlock",
                 why=f"ranks {a} and {b} both post recv from each other before sending: neither posts its send")
    elif case == "pipestall":
        c = rnd.randint(1, w - 2)
        p.update(culprits=[c], floats=floats, fault_class="pipeline-stall",
                 why=f"stage {c} stalls in stage_forward after its recv, before its send to rank {c + 1}")
    elif case == "monbarrier":
        c = rnd.randint(1, w - 1)
        p.update(culprits=[c], fault_class="barrier-absent",
                 why=f"rank {c} never reaches monitored_barrier (sleeps in load_shard); rank 0 reports it")
    elif case == "ordermismatch":
        c = rnd.randint(1, w - 1)
        n1 = rnd.choice((16 * 1024, 32 * 1024, 64 * 1024))
        p.update(culprits=[c], floats=n1, floats_culprit=n1 * rnd.choice((2, 4)), fault_class="collective-mismatch",
                 why=f"rank {c} calls broadcast where the others call all_reduce (different sizes): NCCL aborts")
    elif case == "lock":
        c = rnd.randrange(w)
        p.update(culprits=[c], floats=floats, fault_class="lock-held-by-thread",
                 why=f"rank {c}'s main thread waits on ckpt_lock, held by its thread ckpt-writer in "
                     f"write_shard_to_storage")
    elif case == "subgroup":
        hung_b = rnd.random() < 0.5
        half = w // 2
        group = list(range(half, w)) if hung_b else list(range(half))
        c = rnd.choice(group)
        p.update(culprits=[c], floats=floats, hung_group=group,
                 healthy=[r for r in range(w) if r not in group], fault_class="subgroup-stall",
                 why=f"rank {c} sleeps in validate_shard before its group's all_reduce; the other group "
                     f"finished (exit 0)")
    elif case == "gpusleep":
        c = rnd.randrange(w)
        p.update(culprits=[c], floats=floats, fault_class="gpu-long-kernel",
                 why=f"rank {c} runs a long kernel (torch.cuda._sleep) on its stream before all_reduce")
    if backend == "gloo" and case == "sendsend":
        p["floats"] = 16 * 2**20 // 4  # gloo on the CPU: 16 MB is past every socket buffer already
    return p


# --------------------------------------------------------------------------- worker side


def load_shard(seconds: float) -> None:
    """monbarrier's culprit: busy before the barrier it never reaches."""
    time.sleep(seconds)


def pipeline(dist, sync, buf, rank: int, world: int, plan: dict, hang_s: float) -> None:
    """Micro-batches down a chain of stages; the culprit breaks the chain at plan['fault_step'] as its case
    says: a recv from the wrong stage (wrongpeer), a send to the wrong stage (wrongpeersend), a stall between
    its recv and its send (pipestall)."""
    c, case = plan["culprits"][0], plan["case"]
    for mb in range(plan["fault_step"] + 2):
        at_fault = rank == c and mb == plan["fault_step"]
        if rank > 0:
            dist.recv(buf, src=rank - 2 if case == "wrongpeer" and at_fault else rank - 1)
            sync()
        if case == "pipestall" and at_fault:
            ls.stage_forward(hang_s)
        if rank < world - 1:
            dist.send(buf, dst=rank + 2 if case == "wrongpeersend" and at_fault else rank + 1)
            sync()
    dist.all_reduce(buf)  # the step's gradient sync: stages ahead of the break wait here
    sync()


def send_send(dist, sync, torch, dev, rank: int, plan: dict) -> None:
    """The pair both send first; everyone else goes on to the next all_reduce."""
    a, b = plan["culprits"]
    if rank in (a, b):
        peer = b if rank == a else a
        out, into = torch.ones(plan["floats"], device=dev), torch.empty(plan["floats"], device=dev)
        dist.send(out, dst=peer)
        dist.recv(into, src=peer)
        sync()
    dist.all_reduce(torch.ones(1024, device=dev))
    sync()


def recv_recv(dist, sync, torch, dev, rank: int, plan: dict) -> None:
    """The pair exchanges once a step, `a` sending first, and everyone joins the step's all_reduce; at the fault
    step both post their recv first: each waits for a send the other would post only after its own recv."""
    a, b = plan["culprits"]
    out, into = torch.ones(plan["floats"], device=dev), torch.empty(plan["floats"], device=dev)
    small = torch.ones(1024, device=dev)
    for step in range(plan["fault_step"] + 1):
        if rank in (a, b):
            peer = b if rank == a else a
            if rank == a and step < plan["fault_step"]:
                dist.send(out, dst=peer)
                dist.recv(into, src=peer)
            else:  # b always receives first; a too at the fault step
                dist.recv(into, src=peer)
                dist.send(out, dst=peer)
            sync()
        dist.all_reduce(small)
        sync()


def case_body(args, rank: int, world: int, plan: dict, torch, dist, dev, sync, groups: dict) -> None:
    """After warm-up: the fault of the case."""
    case, c = plan["case"], plan["culprits"][0]
    buf = torch.ones(plan.get("floats", 1024), device=dev)
    if case in ("wrongpeer", "wrongpeersend", "pipestall"):
        return pipeline(dist, sync, buf, rank, world, plan, args.hang_s)
    if case == "sendsend":
        return send_send(dist, sync, torch, dev, rank, plan)
    if case == "recvrecv":
        return recv_recv(dist, sync, torch, dev, rank, plan)
    if case == "monbarrier":
        if rank == c:
            load_shard(args.hang_s)
        dist.monitored_barrier(group=groups["gloo"], timeout=datetime.timedelta(seconds=args.pg_timeout))
        dist.all_reduce(buf)
        sync()
        return None
    if case == "ordermismatch":
        if rank == c:
            dist.broadcast(torch.ones(plan["floats_culprit"], device=dev), src=0)
        else:
            dist.all_reduce(buf)
        sync()
        dist.all_reduce(buf)
        sync()
        return None
    if case == "lock":
        if rank == c:
            lock = threading.Lock()
            threading.Thread(target=ls.async_checkpoint_writer, args=(lock, args.hang_s), name="ckpt-writer",
                             daemon=True).start()
            time.sleep(0.3)
            ls.save_optimizer_state(lock)
        dist.all_reduce(buf)
        sync()
        return None
    if case == "subgroup":
        mine = groups["mine"]
        for step in range(plan["fault_step"] + 40):
            if rank == c and step == plan["fault_step"]:
                ls.validate_shard(args.hang_s)
            dist.all_reduce(buf, group=mine)
            sync()
        print(f"[case] rank {rank} finished its steps; exiting without destroy_process_group", flush=True)
        return None
    if case == "gpusleep":
        if rank == c:
            if args.backend == "nccl":
                torch.cuda._sleep(int(args.gpu_cycles))
            else:
                time.sleep(args.hang_s)
        dist.all_reduce(buf)
        sync()
        return None
    raise ValueError(f"no body for {case}")


def make_groups(dist, plan: dict, rank: int, world: int, pg_timeout: float) -> dict:
    """Every rank makes every group, in one order (new_group is collective over the world)."""
    t = datetime.timedelta(seconds=pg_timeout)
    if plan["case"] == "monbarrier":
        return {"gloo": dist.new_group(backend="gloo", timeout=t)}
    if plan["case"] == "subgroup":
        half = world // 2
        a = dist.new_group(list(range(half)), timeout=t)
        b = dist.new_group(list(range(half, world)), timeout=t)
        return {"mine": a if rank < half else b}
    return {}


def worker(args: argparse.Namespace) -> int:
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    become_host(os.environ["HF_HOST"])
    plan = json.loads(Path(args.dir, "plan.json").read_text())
    torch, dist, dev, sync = ls.init_pg(args.backend, args.pg_timeout)
    groups = make_groups(dist, plan, rank, world, args.pg_timeout)
    small = torch.ones(256 * 1024, device=dev)
    for _ in range(WARM_OPS):
        dist.all_reduce(small)
        sync()
    if "mine" in groups:
        dist.all_reduce(small, group=groups["mine"])
        sync()
    if args.backend == "nccl" and plan["case"] in P2P_CASES:
        warm_p2p(dist, sync, torch, dev, rank, world)
    ls.prewarm_fr(args.backend == "nccl")
    Path(args.dir, f"ready.{rank}").write_text(str(os.getpid()))
    print(f"[case] rank {rank} pid {os.getpid()} warm", flush=True)
    case_body(args, rank, world, plan, torch, dist, dev, sync, groups)
    print(f"[case] rank {rank} finished", flush=True)
    return 0


def warm_p2p(dist, sync, torch, dev, rank: int, world: int) -> None:
    """One send/recv with each neighbour, even ranks first (no deadlock): p2p communicators made now."""
    t = torch.ones(1024, device=dev)
    for peer in (rank + 1, rank - 1):
        if not 0 <= peer < world:
            continue
        if rank % 2 == 0:
            dist.send(t, dst=peer)
            dist.recv(t, src=peer)
        else:
            dist.recv(t, src=peer)
            dist.send(t, dst=peer)
        sync()


# --------------------------------------------------------------------------- driver side


def recommended_env(repo: Path, with_recorder: bool) -> tuple[dict[str, str], str]:
    """The variables `forensics env` prints (with --recorder when the plugin is used), @DIR@ for the logs folder."""
    clean = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONPATH": os.environ.get("PYTHONPATH", str(repo))}
    argv = [sys.executable, "-m", "forensics", "env", "--json", "--dir",
            "@DIR@"] + (["--recorder"] if with_recorder else [])
    try:
        done = subprocess.run(argv, cwd=repo, env=clean, capture_output=True, text=True, timeout=60)
        doc = json.loads(done.stdout)
        rows = doc.get("variables") or doc.get("data", {}).get("variables")
        source = "forensics env --json" + (" --recorder" if with_recorder else "")
        return {r["name"]: str(r["value"]) for r in rows}, source
    except (OSError, ValueError, subprocess.TimeoutExpired, KeyError, TypeError, AttributeError) as err:
        env, _ = ls.forensics_env(repo)
        env.update(TORCH_NCCL_ENABLE_TIMING="1", FORENSICS_RECORDER_COPY_DIR="@DIR@")
        return env, f"fallback list (forensics env failed: {err})"


def rank_env(args, plan: dict, rank: int, sdir: Path, port: int, fenv: dict[str, str]) -> dict[str, str]:
    host = host_name(rank)
    logs = sdir / "logs" / host
    env = {k: v.replace("@DIR@", str(logs)) for k, v in fenv.items()}
    env.update(
        PATH=os.environ.get("PATH", "/usr/bin:/bin"), PYTHONPATH=os.environ.get("PYTHONPATH", args.repo),
        RANK=str(rank), LOCAL_RANK="0", WORLD_SIZE=str(plan["world"]), LOCAL_WORLD_SIZE="1",
        MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), PYTHONUNBUFFERED="1", OMP_NUM_THREADS="1",
        HF_HOST=host, TZ="UTC", TORCH_NCCL_WAIT_TIMEOUT_DUMP_MILSEC=str(args.dump_wait_ms),
        TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC=str(int(args.pg_timeout) + 30),
    )
    if args.backend == "nccl":
        env.update(NCCL_HOSTID=host, NCCL_SOCKET_IFNAME="lo", NCCL_IB_DISABLE="1", NCCL_NVLS_ENABLE="0")
        env["FORENSICS_RECORDER_DIR"] = str(Path(args.recorder_root) / plan["case"])
        if args.plugin:
            env["NCCL_PROFILER_PLUGIN"] = args.plugin
        else:
            env.pop("NCCL_PROFILER_PLUGIN", None)
    else:
        env.pop("NCCL_PROFILER_PLUGIN", None)
    for kv in args.extra_env:
        key, _, value = kv.partition("=")
        env[key] = value
    return env


def start_ranks(args, plan: dict, sdir: Path, port: int, fenv: dict[str, str]) -> tuple[list, list, list[int]]:
    me = [sys.executable, os.path.abspath(__file__), "--worker", "--dir", str(sdir), "--backend", args.backend,
          "--pg-timeout", str(args.pg_timeout), "--hang-s", str(args.hang_s), "--gpu-cycles", str(args.gpu_cycles)]
    procs, files = [], []
    for r in range(plan["world"]):
        logs = sdir / "logs" / host_name(r)
        logs.mkdir(parents=True, exist_ok=True)
        so, se = open(logs / f"rank{r}.stdout", "wb"), open(logs / f"rank{r}.stderr", "wb")
        files += [so, se]
        procs.append(subprocess.Popen(me, env=rank_env(args, plan, r, sdir, port, fenv), stdout=so, stderr=se,
                                      stdin=subprocess.DEVNULL, start_new_session=True, cwd=args.repo))
    pgids = [p.pid for p in procs]
    with open(Path(args.out_dir) / PGIDS_FILE, "a") as f:  # the shell kills these too, whatever happens here
        f.write("".join(f"{g}\n" for g in pgids))
    return procs, files, pgids


def collect_live(args, pids: list[int], sdir: Path) -> str:
    """`forensics collect` by pid, as a user runs it on the hung job, timed."""
    argv = [sys.executable, "-m", "forensics", "collect", "--pid", ",".join(map(str, pids)), "-o", str(sdir / "bundle"),
            "--json", "-q", "--timeout", str(args.collect_timeout)] + (["--native"] if args.native else [])
    t = time.monotonic()
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=args.collect_timeout * 3 + 20,
                              cwd=args.repo)
    except (OSError, subprocess.TimeoutExpired) as err:
        return f"collect failed: {err}"
    (sdir / "bundle.collect.stdout").write_text(done.stdout)
    (sdir / "bundle.collect.stderr").write_text(done.stderr[-20000:])
    said = f"collect exit {done.returncode} in {time.monotonic() - t:.1f} s"
    analyzed = run_tool([sys.executable, "-m", "forensics", "analyze", str(sdir / "bundle")],
                        sdir / "bundle.analyze.txt", args.repo, 60)
    return f"{said}; {analyzed}; time to verdict (collect started to verdict printed) {time.monotonic() - t:.1f} s"


def run_tool(argv: list[str], out: Path, cwd: str, timeout: float) -> str:
    """Run an analyzer on what the case left; its output (or why it failed) goes to `out`."""
    t = time.monotonic()
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, cwd=cwd)
        out.write_text(f"# {' '.join(argv)}\n# exit {done.returncode}\n{done.stdout}\n"
                       f"--- stderr\n{done.stderr[-8000:]}")
        return f"{out.name}: exit {done.returncode} in {time.monotonic() - t:.1f} s"
    except (OSError, subprocess.TimeoutExpired) as err:
        out.write_text(f"# {' '.join(argv)}\n# failed: {err}\n")
        return f"{out.name}: failed {err}"


def fr_trace(args, sdir: Path) -> str:
    """torch's own analyzer on the case's Flight Recorder dumps, gathered into one folder."""
    dumps = sdir / "fr_dumps"
    dumps.mkdir(exist_ok=True)
    for f in (sdir / "logs").glob("*/fr_trace_rank_*"):
        shutil.copyfile(f, dumps / f.name)
    if not any(dumps.iterdir()):
        (sdir / "fr_trace.txt").write_text("# no Flight Recorder dump in the logs folder\n")
        return "fr_trace: no dumps"
    argv = [sys.executable, "-m", "torch.distributed.flight_recorder.fr_trace", "--allow-incomplete-ranks",
            "-p", "fr_trace_rank_", str(dumps)]
    return run_tool(argv, sdir / "fr_trace.txt", args.repo, 60)


def run_case(args, case: str, index: int, fenv: dict[str, str]) -> dict:
    sdir = Path(args.out_dir) / case
    shutil.rmtree(sdir, ignore_errors=True)
    sdir.mkdir(parents=True)
    plan = case_plan(case, args.seed, args.backend, args.world)
    (sdir / "plan.json").write_text(json.dumps(plan, indent=1) + "\n")
    notes: list[str] = []
    t0 = time.monotonic()
    procs, files, pgids = start_ranks(args, plan, sdir, args.port_base + index, fenv)
    pids: dict[int, int] = {}
    interrupted: BaseException | None = None
    try:
        pids = ls.wait_marks(sdir, "ready", plan["world"], procs, args.warm_timeout)
        t_ready = time.monotonic()
        notes.append(f"warm after {t_ready - t0:.1f} s")
        time.sleep(args.settle_s)
        live = [p for p in pids.values() if ls.alive(p) or ls.proc_state(p) == "Z"]
        notes.append(f"states before collect: {dict((r, ls.proc_state(p)) for r, p in pids.items())}")
        notes.append(collect_live(args, live, sdir))
        end = t_ready + args.pg_timeout + args.dump_wait_ms / 1000 + args.post_s
        while time.monotonic() < end and any(ls.alive(p) for p in pids.values()):
            time.sleep(0.5)
        notes.append(f"at the end (+{time.monotonic() - t_ready:.1f} s): "
                     f"{dict((r, ls.proc_state(p)) for r, p in pids.items())}")
    except BaseException as err:  # noqa: BLE001 - one failed case must not stop the others
        notes.append(f"case error: {type(err).__name__}: {err}")
        interrupted = err if isinstance(err, (SystemExit, KeyboardInterrupt)) else None
    finally:  # kill every rank, copy what /dev/shm held to recorder_final/ (the live view's source)
        ls.finish_case(args, case, sdir, procs, files, pgids, notes)
    exits = {str(r): p.returncode for r, p in enumerate(procs)}
    if interrupted is None:
        notes.append(fr_trace(args, sdir))
    truth = {
        "case": case, "issue": 39, "seed": args.seed, "backend": args.backend, "world_size": plan["world"],
        "culprit_ranks": plan["culprits"], "culprit_hosts": [host_name(r) for r in plan["culprits"]],
        "healthy_ranks": plan["healthy"], "fault_class": plan["fault_class"], "expected_why": plan["why"],
        "plan": plan, "hosts": {str(r): host_name(r) for r in range(plan["world"])},
        "pids": {str(r): p for r, p in pids.items()}, "exit_codes_by_rank": exits,
        "recorder": bool(args.plugin) and args.backend == "nccl", "env_source": args.env_source,
        "env": {k: v for k, v in fenv.items()}, "pg_timeout_s": args.pg_timeout,
        "layout": {"bundle": "bundle/ (live collect)", "logs": "logs/<host>/ (NCCL logs, FR dumps, recorder copies, "
                   "rank stdout/stderr)", "recorder_final": "recorder_final/ (what /dev/shm held at the end)",
                   "fr_trace": "fr_trace.txt (torch's analyzer on logs/*/fr_trace_rank_*)"},
        "seconds": round(time.monotonic() - t0, 1), "notes": notes, "torch_version": args.torch_version,
    }
    (sdir / "truth.json").write_text(json.dumps(truth, indent=2) + "\n")
    if interrupted is not None:
        raise interrupted
    return truth


def pack_case(args, case: str) -> str:
    """$OUT/I39-<case>.tar.gz right after the case (8 files of at most 64 MiB in all come back)."""
    if not args.pack_to:
        return "not packed"
    out = Path(args.pack_to)
    out.mkdir(parents=True, exist_ok=True)
    scratch = Path(args.out_dir) / ".pack" / case
    shutil.rmtree(scratch, ignore_errors=True)
    shutil.copytree(Path(args.out_dir) / case, scratch, symlinks=True)
    try:
        return pack(f"I39-{case}", scratch, out, int(args.pack_mib * 2**20))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def estimate_s(args) -> float:
    return args.warm_est + args.settle_s + args.pg_timeout + args.dump_wait_ms / 1000 + args.post_s + 8


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out-dir", default="i39-out")
    p.add_argument("--cases", default=",".join(CASES))
    p.add_argument("--seed", type=int, default=39, help="draws each case's culprit, world size, sizes and step")
    p.add_argument("--backend", choices=("nccl", "gloo"), default="nccl")
    p.add_argument("--world", type=int, default=None, help="ranks of every case (default: from the seed, 4-8)")
    p.add_argument("--plugin", default="", help="recorder plugin .so (NCCL_PROFILER_PLUGIN); empty = none")
    p.add_argument("--recorder-root", default="/dev/shm/hf-i39")
    p.add_argument("--extra-env", action="append", default=[], metavar="K=V")
    p.add_argument("--port-base", type=int, default=29810)
    p.add_argument("--pg-timeout", type=float, default=None, help="process-group timeout, s (nccl 20, gloo 15)")
    p.add_argument("--dump-wait-ms", type=int, default=3000)
    p.add_argument("--hang-s", type=float, default=150.0)
    p.add_argument("--gpu-cycles", type=float, default=3e11)
    p.add_argument("--settle-s", type=float, default=3.0)
    p.add_argument("--post-s", type=float, default=None,
                   help="wait after timeout + dump wait for the watchdogs to abort (nccl 15: torch 2.11 took ~12 s "
                        "from the timeout to SIGABRT, and only then does the recorder copy its state; gloo 3)")
    p.add_argument("--collect-timeout", type=int, default=12)
    p.add_argument("--native", action=argparse.BooleanOptionalAction, default=True)
    p.add_argument("--warm-est", type=float, default=14.0)
    p.add_argument("--warm-timeout", type=float, default=60.0)
    p.add_argument("--total-s", type=float, default=520.0, help="skip cases that would end past this budget")
    p.add_argument("--pack-to", default="", help="pack each case into DIR/I39-<case>.tar.gz as it ends ($OUT)")
    p.add_argument("--pack-mib", type=float, default=7.5)
    p.add_argument("--dry-run", action="store_true", help="print the plans; run nothing")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--dir", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    args.pg_timeout = args.pg_timeout or (20.0 if args.backend == "nccl" else 15.0)
    args.post_s = args.post_s if args.post_s is not None else (15.0 if args.backend == "nccl" else 3.0)
    args.wanted = [c.strip() for c in args.cases.split(",") if c.strip()]
    bad = [c for c in args.wanted if c not in CASES]
    if bad:
        p.error(f"unknown case(s) {bad}")
    if args.backend == "gloo":
        args.wanted = [c for c in args.wanted if c not in NCCL_ONLY]
    args.repo = str(HERE.parents[1])
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.worker:
        return worker(args)

    ls.unwind_on_sigterm()
    out = Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    if args.dry_run:
        print(json.dumps({c: case_plan(c, args.seed, args.backend, args.world) for c in args.wanted}, indent=1))
        return 0
    fenv, args.env_source = recommended_env(Path(args.repo), bool(args.plugin) and args.backend == "nccl")
    args.torch_version = _torch_version()
    summary: dict[str, dict] = {"_env": {"source": args.env_source, "vars": fenv}}
    start = time.monotonic()
    for i, case in enumerate(args.wanted):
        if time.monotonic() - start + estimate_s(args) > args.total_s:
            summary[case] = {"skipped": f"would pass the {args.total_s:.0f} s budget"}
            print(f"== {case}: skipped (time budget)", flush=True)
            continue
        print(f"== {case} ({args.backend}) at +{time.monotonic() - start:.0f} s", flush=True)
        truth = run_case(args, case, i, fenv)
        summary[case] = {k: truth[k] for k in ("world_size", "culprit_ranks", "fault_class", "seconds",
                                               "exit_codes_by_rank", "notes")}
        (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
        print(json.dumps(summary[case]), flush=True)
        print(pack_case(args, case), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""What each recommended setting costs a training step: the env `forensics env --recorder` prints, one piece at a time.

Issue 39 item 6: the recommended env must say what it costs. One run launches the same small job (N ranks,
each step: a little CPU work, then all_reduce of a small and of a large tensor, then a sync) once per
configuration, the configurations interleaved round after round (A B C ... A B C ...) so that drift and
neighbours hit all alike, and prints each configuration's median step time as a ratio to the baseline of the
same run (no forensics variable at all):

  baseline      nothing set
  nccl-info     NCCL_DEBUG=INFO, NCCL_DEBUG_SUBSYS=INIT,NET,RAS, NCCL_DEBUG_FILE (per process)
  nccl-coll     the same plus COLL (a line per collective: the costly subsystem the env leaves out)
  fr            TORCH_FR_BUFFER_SIZE=2000, TORCH_NCCL_DUMP_ON_TIMEOUT=1, TORCH_FR_DUMP_TEMP_FILE
  fr-timing     fr plus TORCH_NCCL_ENABLE_TIMING=1 (a CUDA start event per collective)
  recorder      NCCL_PROFILER_PLUGIN (the recorder) with FORENSICS_RECORDER_COPY_DIR
  all           every variable of `forensics env --recorder`

On gloo (CPU, this machine) the NCCL_* and TORCH_NCCL_* variables do nothing and the recorder is not loaded
(it is an NCCL plugin): their rows measure noise, which is what the ratio of two identical settings looks like.
The GPU version (--backend nccl, ranks as separate hosts on one GPU) measures them all.

    python benchmarks/env_cost.py --backend gloo --ranks 4 --rounds 3 --steps 300
    python benchmarks/env_cost.py --backend nccl --ranks 4 --rounds 3 --steps 500 --json env_cost.json   # GPU
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CONFIGS = ("baseline", "nccl-info", "nccl-coll", "fr", "fr-timing", "recorder", "all")
FORENSICS_PREFIXES = ("NCCL_DEBUG", "TORCH_FR_", "TORCH_NCCL_", "NCCL_PROFILER_PLUGIN", "FORENSICS_RECORDER",
                      "NCCL_PROXY_DUMP_SIGNAL", "NCCL_RAS_ENABLE", "PYTHONFAULTHANDLER")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def recommended(log_dir: Path, plugin: str) -> dict[str, str]:
    """`forensics env --recorder --json` of this checkout, for `log_dir`."""
    argv = [sys.executable, "-m", "forensics", "env", "--json", "--dir",
            str(log_dir)] + (["--recorder"] if plugin else [])
    # the checkout first, the caller's path kept: on the device the wheels (loguru...) lie in PYTHONPATH's /tmp/site,
    # and a path of the checkout alone made the child fail at import (its empty stdout: JSONDecodeError, 2026-12-07)
    path = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120, cwd=REPO,
                          env=dict(os.environ, PYTHONPATH=path))
    if done.returncode != 0:
        raise SystemExit(f"forensics env failed (exit {done.returncode}): {done.stderr[-2000:]}")
    rows = json.loads(done.stdout)["variables"]
    env = {r["name"]: str(r["value"]) for r in rows}
    if plugin:
        env["NCCL_PROFILER_PLUGIN"] = plugin
    return env


def config_env(name: str, full: dict[str, str]) -> dict[str, str]:
    """The variables of one configuration, taken from the recommended env (so the benchmark follows it)."""
    pick = {
        "baseline": (),
        "nccl-info": ("NCCL_DEBUG", "NCCL_DEBUG_SUBSYS", "NCCL_DEBUG_FILE"),
        "nccl-coll": ("NCCL_DEBUG", "NCCL_DEBUG_SUBSYS", "NCCL_DEBUG_FILE"),
        "fr": ("TORCH_FR_BUFFER_SIZE", "TORCH_NCCL_DUMP_ON_TIMEOUT", "TORCH_FR_DUMP_TEMP_FILE"),
        "fr-timing": ("TORCH_FR_BUFFER_SIZE", "TORCH_NCCL_DUMP_ON_TIMEOUT", "TORCH_FR_DUMP_TEMP_FILE",
                      "TORCH_NCCL_ENABLE_TIMING"),
        "recorder": ("NCCL_PROFILER_PLUGIN", "FORENSICS_RECORDER_COPY_DIR"),
        "all": tuple(full),
    }[name]
    env = {k: full[k] for k in pick if k in full}
    if name == "nccl-coll":
        env["NCCL_DEBUG_SUBSYS"] = env.get("NCCL_DEBUG_SUBSYS", "INIT,NET,RAS") + ",COLL"
    return env


def launch(args, name: str, env_add: dict[str, str], work: Path) -> dict:
    """One job of this configuration; rank 0's step statistics."""
    port = free_port()
    base = {k: v for k, v in os.environ.items() if not k.startswith(FORENSICS_PREFIXES)}
    procs = []
    out = work / f"{name}-{port}.json"
    for r in range(args.ranks):
        env = dict(base, **env_add, RANK=str(r), WORLD_SIZE=str(args.ranks), LOCAL_RANK="0", MASTER_ADDR="127.0.0.1",
                   MASTER_PORT=str(port), OMP_NUM_THREADS="1", PYTHONPATH=str(REPO),
                   FORENSICS_RECORDER_DIR=str(work / "shm"))
        if args.backend == "nccl":
            env.update(NCCL_HOSTID=f"node{r:02d}", NCCL_SOCKET_IFNAME="lo", NCCL_IB_DISABLE="1", NCCL_NVLS_ENABLE="0")
        argv = [sys.executable, str(Path(__file__).resolve()), "--worker", "--backend", args.backend,
                "--steps", str(args.steps), "--small-kb", str(args.small_kb), "--large-mb", str(args.large_mb),
                "--out", str(out)]
        procs.append(subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True))
    errors = []
    for p in procs:
        try:
            _, err = p.communicate(timeout=args.timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            _, err = p.communicate()
        if p.returncode != 0:
            errors.append((err or "")[-400:])
    if errors or not out.exists():
        return {"error": errors[0] if errors else "no result"}
    return json.loads(out.read_text())


def worker(args) -> int:
    """Warm up, then time `steps` steps; rank 0 writes the median and p90 step time (ms)."""
    import datetime

    import torch
    import torch.distributed as dist

    nccl = args.backend == "nccl"
    dev = torch.device("cuda:0") if nccl else torch.device("cpu")
    if nccl:
        torch.cuda.set_device(dev)
        dist.init_process_group("nccl", device_id=dev, timeout=datetime.timedelta(seconds=120))
    else:
        dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=120))
    sync = torch.cuda.synchronize if nccl else (lambda: None)
    small = torch.ones(args.small_kb * 256, device=dev)
    large = torch.ones(int(args.large_mb * 2**18), device=dev)
    work = torch.ones(256, 256, device=dev)
    times = []
    for step in range(args.steps + 20):
        t = time.perf_counter()
        work = torch.tanh(work @ work * 1e-3)  # the step's own compute, small
        dist.all_reduce(small)
        dist.all_reduce(large)
        sync()
        if step >= 20:
            times.append((time.perf_counter() - t) * 1e3)
    if dist.get_rank() == 0:
        times.sort()
        Path(args.out).write_text(json.dumps({"median_ms": statistics.median(times),
                                              "p90_ms": times[int(0.9 * (len(times) - 1))], "steps": len(times)}))
    dist.barrier()
    dist.destroy_process_group()
    return 0


def report(results: dict[str, list[dict]], args, plugin: str) -> list[str]:
    ok = {k: [r["median_ms"] for r in v if "median_ms" in r] for k, v in results.items()}
    base = statistics.median(ok["baseline"]) if ok.get("baseline") else None
    lines = [f"{args.backend}, {args.ranks} ranks, {args.steps} steps a job, {args.rounds} rounds interleaved; step = "
             f"compute + all_reduce {args.small_kb} KB + all_reduce {args.large_mb:g} MB + sync; "
             f"recorder: {plugin or 'not loaded (gloo)'}",
             f"{'setting':12s} {'median step ms':>15s} {'ratio':>7s}  (medians over rounds; per round: ms)"]
    for name in CONFIGS:
        vals = ok.get(name) or []
        if not vals:
            err = next((r.get("error") for r in results.get(name, []) if "error" in r), "not run")
            lines.append(f"{name:12s} {'-':>15s} {'-':>7s}  {str(err).splitlines()[-1][:120] if err else ''}")
            continue
        med = statistics.median(vals)
        ratio = f"{med / base:7.3f}" if base else "      -"
        lines.append(f"{name:12s} {med:15.3f} {ratio}  " + " ".join(f"{v:.3f}" for v in vals))
    return lines


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--backend", choices=("gloo", "nccl"), default="gloo")
    p.add_argument("--ranks", type=int, default=4)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--small-kb", type=int, default=8)
    p.add_argument("--large-mb", type=float, default=4.0)
    p.add_argument("--configs", default=",".join(CONFIGS))
    p.add_argument("--plugin", default=None, help="recorder .so (default: built here for nccl; none for gloo)")
    p.add_argument("--timeout", type=float, default=300.0)
    p.add_argument("--json", type=Path)
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--out", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        return worker(args)
    plugin = args.plugin
    if plugin is None and args.backend == "nccl":
        done = subprocess.run([sys.executable, "-m", "forensics", "recorder", "path"], capture_output=True, text=True,
                              cwd=REPO, env=dict(os.environ, PYTHONPATH=str(REPO)), timeout=180)
        plugin = done.stdout.strip()
    work = Path(tempfile.mkdtemp(prefix="hf-envcost-"))
    full = recommended(work / "logs", plugin or "")
    if args.backend == "gloo":
        full.pop("NCCL_PROFILER_PLUGIN", None)
    configs = [c for c in args.configs.split(",") if c in CONFIGS]
    results: dict[str, list[dict]] = {c: [] for c in configs}
    t0 = time.monotonic()
    for round_no in range(args.rounds):
        for name in configs:
            results[name].append(launch(args, name, config_env(name, full), work))
            got = results[name][-1]
            print(f"[+{time.monotonic() - t0:.0f} s] round {round_no + 1} {name}: "
                  f"{got.get('median_ms', got.get('error', '?'))}", file=sys.stderr, flush=True)
        lines = report(results, args, plugin or "")  # after every round, so a run cut at its limit keeps its rounds
        print("\n".join(lines), flush=True)
        if args.json:
            args.json.write_text(json.dumps({"results": results, "summary": lines}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""CPU cost of the recorder per collective, against empty entry points (CPU, no GPU).

Builds nccl_patches/tests/microbench.c and runs, in one process and alternating (the order
rotates every repeat, so load and drift hit every variant alike):
  empty    do-nothing entry points: what calling a profiler costs NCCL anyway
  now      the recorder built from the working tree
  before   the recorder built from git ref --before (default: none)
  chained  the recorder forwarding every call to a do-nothing second plugin (FORENSICS_RECORDER_CHAIN)
one collective = launch path (Group, Coll start/stop: 4 calls) + per channel the proxy path
(KernelCh, a send and a recv proxy op of 8 steps with their states: 96 calls). It does this at
1 and at --channels channels (the difference gives the cost per added channel), --runs times
(separate processes), and prints min and median ns added per collective, with their spread
over the runs. The machine's load is printed with them: on a shared machine the minimum is the
figure that means something (the quiet moments); the median says how loaded it was.

    python benchmarks/recorder_event_cost.py [--before main] [--runs 5] [--repeats 40] [--cpu 1]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from forensics import recorder_build  # noqa: E402

GOAL_NS = 500.0  # issue 44: at most 0.5 us per collective of 1 channel, launch + proxy paths


def build_at_ref(ref: str, out: Path) -> Path:
    """The plugin built from the sources of git ref `ref` (a baseline to compare with)."""
    src = out / "src"
    for rel in ("nccl_patches/src", "nccl_patches/include"):
        (src / rel).mkdir(parents=True, exist_ok=True)
    listing = subprocess.run(["git", "-C", str(REPO), "ls-tree", "-r", "--name-only", ref, "nccl_patches/src",
                              "nccl_patches/include"], check=True, capture_output=True, text=True).stdout.split()
    for rel in listing:
        data = subprocess.run(["git", "-C", str(REPO), "show", f"{ref}:{rel}"], check=True, capture_output=True).stdout
        (src / rel).write_bytes(data)
    sources = [str(src / "nccl_patches/src" / n) for n in ("recorder_core.c", "profiler_plugin.c", "chain.c")
               if (src / "nccl_patches/src" / n).is_file()]
    lib = out / f"before-{ref.replace('/', '_')}.so"
    subprocess.run(["gcc", *recorder_build.CFLAGS, f"-I{src / 'nccl_patches/include'}", *sources, "-o", str(lib),
                    "-ldl"], check=True)
    return lib


def build_tools(tmp: Path) -> tuple[Path, Path]:
    """The microbenchmark and the do-nothing second plugin."""
    inc = REPO / "nccl_patches" / "include"
    tests = REPO / "nccl_patches" / "tests"
    exe, noop = tmp / "microbench", tmp / "libnccl-profiler-noop.so"
    subprocess.run(["gcc", "-O2", f"-I{inc}", str(tests / "microbench.c"), "-o", str(exe), "-ldl"], check=True)
    subprocess.run(["gcc", "-O2", "-fPIC", "-shared", "-fvisibility=hidden", "-DCOUNT_NOOP", f"-I{inc}",
                    str(tests / "count_plugin.c"), "-o", str(noop)], check=True)
    return exe, noop


def one_run(exe: Path, variants: list[str], iterations: int, repeats: int, channels: int, cpu: int | None,
            state_dir: str, steps: int = 8) -> dict:
    cmd = [str(exe), str(max(1, iterations // channels)), str(repeats), str(channels), *variants]  # same time per timing
    if cpu is not None and shutil.which("taskset"):
        cmd = ["taskset", "-c", str(cpu), *cmd]
    env = {"FORENSICS_RECORDER_DIR": state_dir, "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
           "FORENSICS_RECORDER_SNAPSHOT_ON_FINALIZE": "0", "MICROBENCH_STEPS": str(steps)}
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env)
    return json.loads(out.stdout)["ns_per_collective"]


def added(run: dict, label: str, stat: str, path: str = "whole") -> float:
    return run[label][path][stat] - run["empty"][path][stat]


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):7.0f} ns  (runs: {min(values):.0f}..{max(values):.0f})"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--before", help="git ref to build a baseline recorder from (e.g. main)")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--repeats", type=int, default=40, help="alternating timings per run and variant")
    ap.add_argument("--iterations", type=int, default=2000, help="collectives per timing")
    ap.add_argument("--channels", type=int, default=4, help="second channel count (the first is 1)")
    ap.add_argument("--cpu", type=int, default=None, help="pin to this CPU (taskset)")
    ap.add_argument("--json", type=Path, help="also write every run's numbers here")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp_s:
        tmp = Path(tmp_s)
        exe, noop = build_tools(tmp)
        plugin = recorder_build.build(force=False)
        chained_copy = tmp / "recorder-chained.so"  # the chain is set up at load: a second copy of the file
        shutil.copy(plugin, chained_copy)
        variants = [f"now={plugin}", f"chained={chained_copy}+{noop}"]
        if args.before:
            variants.insert(0, f"before={build_at_ref(args.before, tmp)}")
        labels = [v.split("=", 1)[0] for v in variants]
        state = tempfile.mkdtemp(prefix="hf-bench-", dir=tmp)
        load_before = os.getloadavg()
        runs = {1: [], args.channels: []}
        one_step = []  # 1 channel, proxy ops of 1 step (a small message): what a latency-bound collective costs
        for _ in range(args.runs):
            for nch in runs:
                runs[nch].append(one_run(exe, variants, args.iterations, args.repeats, nch, args.cpu, state))
            one_step.append(one_run(exe, variants, args.iterations, args.repeats, 1, args.cpu, state, steps=1))
        load_after = os.getloadavg()
    print(f"load average (1/5/15 min) before {load_before[0]:.1f}/{load_before[1]:.1f}/{load_before[2]:.1f}, "
          f"after {load_after[0]:.1f}/{load_after[1]:.1f}/{load_after[2]:.1f} on {os.cpu_count()} CPUs; "
          f"{args.runs} runs x {args.repeats} alternating timings x {args.iterations} collectives")
    one = runs[1]
    base = [r["empty"]["whole"]["min"] for r in one]
    print(f"empty entry points, 1 channel (100 calls): min {spread(base)} per collective")
    for label in labels:
        print(f"{label}: added per collective of 1 channel (100 calls)")
        print(f"   whole, min over timings:    {spread([added(r, label, 'min') for r in one])}")
        print(f"   whole, median of timings:   {spread([added(r, label, 'median') for r in one])}")
        print(f"   launch path alone, min:     {spread([added(r, label, 'min', 'launch') for r in one])}")
        per_ch = [(added(b, label, "min") - added(a, label, "min")) / (args.channels - 1)
                  for a, b in zip(one, runs[args.channels])]
        print(f"   per added channel, min:     {spread(per_ch)}")
        print(f"   1 channel, ops of 1 step:   {spread([added(r, label, 'min') for r in one_step])}  (24 calls)")
        per_step = [(added(a, label, "min") - added(b, label, "min")) / 14 for a, b in zip(one, one_step)]
        print(f"   per step (5 calls), min:    {spread(per_step)}")
    now_min = statistics.median(added(r, "now", "min") for r in one)
    print(f"goal: at most {GOAL_NS:.0f} ns per collective of 1 channel (min over timings, median of runs): "
          f"{now_min:.0f} ns, {'met' if now_min <= GOAL_NS else 'NOT met'}")
    if "before" in labels:
        ratios = [added(r, "now", "min") / max(added(r, "before", "min"), 1e-9) for r in one]
        print(f"now / before (added cost, min): {statistics.median(ratios):.2f} (runs {min(ratios):.2f}..{max(ratios):.2f})")
    if args.json:
        args.json.write_text(json.dumps({"runs": {str(k): v for k, v in runs.items()}, "one_step": one_step,
                                         "load": [load_before, load_after]}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

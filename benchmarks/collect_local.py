"""Collect native stacks of N hung gloo ranks: wall time, and how long each target is paused.

Starts a real N-rank gloo job with one sleeping rank, then, in the same run, for each tool:
  forensics collect (ranks in parallel)  vs  the same tool run rank by rank in a shell-style loop
with the pause of every target measured from OUTSIDE by benchmarks/pause_sampler.py (a separate
process reading each target's main-thread state letter; stopped 't'/'T' samples in a row = one
pause). Tools: py-spy (Python only), py-spy --native, libdw (the native-stack collector, the
default native source: one serving helper for all ranks with a shared symbol cache; "per rank
(before)" is the earlier one helper process per rank, no cache, as the baseline in the same run), pystack --native-all
and eu-stack (loop only), gdb (opt-in deep tool).

Goal (issue 18): N=8 ranks with native frames in under 1.5 s, each target paused under 200 ms.
Usage: python benchmarks/collect_local.py [--ranks 8] [--repeat 3] [--no-gdb]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.pause_sampler import PauseSampler
from forensics.collect.local import collect_local
from forensics.collect.tool import find_tool
from forensics.collectors.base import CollectOptions
from forensics.collectors.native_stack import HELPER
from forensics.demo.launcher import start_job, stop_job, wait_for_hang

GOAL_WALL_S, GOAL_PAUSE_MS = 1.5, 200.0


def time_forensics(pids: list[int], options: CollectOptions) -> tuple[float, dict]:
    out = Path(tempfile.mkdtemp(prefix="bench-collect-"))
    with PauseSampler(pids) as sampler:
        start = time.perf_counter()
        collect_local(out, options, pids=pids, quiet=True)
        took = time.perf_counter() - start
    return took, sampler.result


def time_loop(pids: list[int], argv_for) -> tuple[float, dict]:
    with PauseSampler(pids) as sampler:
        start = time.perf_counter()
        for pid in pids:
            subprocess.run(argv_for(pid), capture_output=True, timeout=300)
        took = time.perf_counter() - start
    return took, sampler.result


def _max_pauses(result: dict) -> list[float]:
    return [v["max_ms"] for v in result["targets"].values()]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ranks", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--no-gdb", action="store_true")
    args = parser.parse_args()
    pyspy, gdb, pystack, eustack = find_tool("py-spy"), find_tool("gdb"), find_tool("pystack"), find_tool("eu-stack")
    job = start_job(Path(tempfile.mkdtemp(prefix="bench-job-")), args.ranks, "sleep", args.ranks - 2)
    rows = []
    try:
        wait_for_hang(job, timeout=180)
        pids = job.alive_pids()
        cases = [
            ("py-spy (Python only)", CollectOptions(), lambda p: [pyspy, "dump", "--pid", str(p), "--json"],
             args.repeat),
            ("py-spy --native", CollectOptions(native=True, extra={"native_tool": "py-spy"}),
             lambda p: [pyspy, "dump", "--pid", str(p), "--json", "--native"], args.repeat),
            ("libdw per rank (before)", CollectOptions(native=True, extra={"native_helper": "per-rank"}),
             lambda p: [sys.executable, "-I", str(HELPER), "--no-cache", str(p)], args.repeat),
            ("libdw native (default)", CollectOptions(native=True),
             lambda p: [sys.executable, "-I", str(HELPER), str(p)], args.repeat),
        ]
        if pystack:
            cases.append(("pystack --native-all", None, lambda p: [pystack, "remote", "--native-all", str(p)],
                          args.repeat))
        if eustack:
            cases.append(("eu-stack", None, lambda p: [eustack, "-p", str(p)], args.repeat))
        if gdb and not args.no_gdb:
            def gdb_argv(p: int) -> list[str]:
                return [gdb, "-nx", "-q", "-batch", "-iex", "set debuginfod enabled off", "-p", str(p), "-ex",
                        "thread apply all bt"]

            cases.append(("gdb (all threads)", CollectOptions(gdb=True, extra={"gdb_timeout": 120}), gdb_argv, 1))
        for name, options, argv_for, repeat in cases:
            ours = [time_forensics(pids, options) for _ in range(repeat)] if options is not None else []
            loop = [time_loop(pids, argv_for) for _ in range(repeat)]
            rows.append((name, ours, loop))
            print(f"measured {name}", file=sys.stderr, flush=True)
    finally:
        stop_job(job)
    print(f"\ncollect {len(pids)} hung gloo ranks, median of runs (forensics also reads /proc, env, stdio per rank); "
          f"pause = longest stop of a target's main thread, sampled from outside")
    print(f"goal: native frames of {len(pids)} ranks < {GOAL_WALL_S} s, every target paused < {GOAL_PAUSE_MS:.0f} ms")
    print(f"{'tool':<24} {'forensics':>10} {'max pause':>10} {'loop':>8} {'max pause':>10} {'loop/ours':>10}")
    for name, ours, loop in rows:
        o_wall = statistics.median(t for t, _ in ours) if ours else None
        l_wall = statistics.median(t for t, _ in loop)
        o_pause = max(max(_max_pauses(r)) for _, r in ours) if ours else None
        l_pause = max(max(_max_pauses(r)) for _, r in loop)
        o_txt = f"{o_wall:9.2f}s {o_pause:8.0f}ms" if ours else f"{'-':>10} {'-':>10}"
        ratio = f"{l_wall / o_wall:9.2f}x" if ours else f"{'-':>10}"
        print(f"{name:<24} {o_txt} {l_wall:7.2f}s {l_pause:8.0f}ms {ratio}")
    print("\npause per target (ms, longest stop of each target's main thread; first run):")
    for name, ours, loop in rows:
        res = ours[0][1] if ours else loop[0][1]
        who = "forensics" if ours else "loop"
        print(f"  {name:<24} [{who}] sweep {res['sweep_ms']:.2f} ms: "
              + " ".join(f"{pid}:{v['max_ms']:.0f}" for pid, v in res["targets"].items()))
    for name, ours, _ in rows:
        if name.startswith("libdw native") and ours:
            wall = statistics.median(t for t, _ in ours)
            worst = max(max(_max_pauses(r)) for _, r in ours)
            ok = wall < GOAL_WALL_S and worst < GOAL_PAUSE_MS
            print(f"\nlibdw native: {wall:.2f} s for {len(pids)} ranks (goal < {GOAL_WALL_S} s), worst "
                  f"pause {worst:.0f} ms "
                  f"(goal < {GOAL_PAUSE_MS:.0f} ms): {'MET' if ok else 'NOT MET'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

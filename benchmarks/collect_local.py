"""Wall time to collect 8 hung ranks, against calling the same tools one rank after another.

Starts a real 8-rank gloo job with one sleeping rank, then times, in the same run:
  forensics collect (ranks in parallel)  vs  the tool run rank by rank in a shell-style loop
for py-spy, py-spy --native, and gdb. Prints medians and the ratio (loop / forensics).
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

from forensics.collect.local import collect_local
from forensics.collect.tool import find_tool
from forensics.collectors.base import CollectOptions
from forensics.demo.launcher import start_job, stop_job, wait_for_hang


def time_forensics(pids: list[int], options: CollectOptions) -> float:
    out = Path(tempfile.mkdtemp(prefix="bench-collect-"))
    start = time.perf_counter()
    collect_local(out, options, pids=pids, quiet=True)
    return time.perf_counter() - start


def time_loop(pids: list[int], argv_for) -> float:
    start = time.perf_counter()
    for pid in pids:
        subprocess.run(argv_for(pid), capture_output=True, timeout=300)
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ranks", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--no-gdb", action="store_true")
    args = parser.parse_args()
    pyspy, gdb = find_tool("py-spy"), find_tool("gdb")
    job = start_job(Path(tempfile.mkdtemp(prefix="bench-job-")), args.ranks, "sleep", args.ranks - 2)
    rows = []
    try:
        wait_for_hang(job, timeout=180)
        pids = job.alive_pids()
        cases = [
            ("py-spy", CollectOptions(), lambda p: [pyspy, "dump", "--pid", str(p), "--json"], args.repeat),
            ("py-spy --native", CollectOptions(native=True), lambda p: [pyspy, "dump", "--pid", str(p), "--json", "--native"], args.repeat),
        ]
        if gdb and not args.no_gdb:
            gdb_argv = lambda p: [gdb, "-nx", "-q", "-batch", "-iex", "set debuginfod enabled off", "-p", str(p), "-ex", "thread apply all bt"]  # noqa: E731
            cases.append(("gdb (all threads)", CollectOptions(gdb=True, extra={"gdb_timeout": 120}), gdb_argv, 1))
        for name, options, argv_for, repeat in cases:
            ours = [time_forensics(pids, options) for _ in range(repeat)]
            loop = [time_loop(pids, argv_for) for _ in range(repeat)]
            rows.append((name, statistics.median(ours), statistics.median(loop)))
            print(f"measured {name}", file=sys.stderr, flush=True)
    finally:
        stop_job(job)
    print(f"\ncollect {len(pids)} hung ranks (median of runs; forensics also reads /proc, env, stdio per rank)")
    print(f"{'tools':<20} {'forensics collect':>18} {'rank-by-rank loop':>18} {'ratio loop/ours':>16}")
    for name, ours, loop in rows:
        print(f"{name:<20} {ours:>17.2f}s {loop:>17.2f}s {loop / ours:>15.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""What py-spy --locals costs a dump, on a real hung 4-rank gloo job (issue 39 item 1).

Why: the py-spy collector runs `py-spy dump --json --locals` a second time where a rank's main thread waits in
torch.distributed's send/recv (forensics/collectors/pyspy_peers.py), to keep the peer. This times, per rank and
for the 4 ranks at once (as collect reads them, in parallel), the plain dump against the dump with --locals,
interleaved round by round (order alternating), and reports the medians, their ratio, and the extra time the
collector adds (one --locals dump after the plain one). The job is tests/support/p2p_job.py's wrong-peer pipeline
(1 MB messages: every rank blocks in send, recv or all_reduce); it is SIGKILLed at the end.

    python benchmarks/pyspy_locals_cost.py [--rounds 15] [--world 4]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from forensics.collect.tool import run_tool

JOB = Path(__file__).resolve().parents[1] / "tests" / "support" / "p2p_job.py"


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(out: Path, world: int) -> list[subprocess.Popen]:
    """The hung job: stage 3 receives from 1 at micro-batch 1 (world >= 4)."""
    port = _port()
    env = {**os.environ, "OMP_NUM_THREADS": "1", "WORLD_SIZE": str(world)}
    procs = [subprocess.Popen([sys.executable, str(JOB), "wrongpeer", str(r), str(world), str(port), str(out), "3",
                               str(1 << 18), "3", "1", "300"], env={**env, "RANK": str(r)},
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for r in range(world)]
    end = time.monotonic() + 180
    while not all((out / "markers" / f"warm.{r}").exists() for r in range(world)):
        if time.monotonic() > end:
            raise RuntimeError("the job never warmed up")
        time.sleep(0.2)
    time.sleep(3.0)  # every rank reaches the op it hangs in
    return procs


def dump(pid: int, locals_: bool) -> tuple[float, int]:
    """Seconds of one py-spy dump and its bytes of output."""
    argv = ["py-spy", "dump", "--pid", str(pid), "--json"] + (["--locals"] if locals_ else [])
    t = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, timeout=60)
    return time.perf_counter() - t, len(done.stdout)


def collector_dump(pid: int, locals_: bool) -> float:
    """Seconds of the same dump as collect runs it: through its tool runner, under the ptrace supervisor
    (forensics/collect/tool.py), which is what the second run adds to a rank's collection."""
    argv = ["py-spy", "dump", "--pid", str(pid), "--json"] + (["--locals"] if locals_ else [])
    t = time.perf_counter()
    run_tool(argv, timeout=60, target_pid=pid)
    return time.perf_counter() - t


def rounds(pids: list[int], n: int) -> dict[str, list[float]]:
    """Per rank one at a time, and all ranks at once, plain and --locals, the order alternating each round."""
    times: dict[str, list[float]] = {"plain": [], "locals": [], "plain_all": [], "locals_all": [],
                                     "plain_runner": [], "locals_runner": []}
    sizes: dict[str, list[int]] = {"plain": [], "locals": []}
    with ThreadPoolExecutor(len(pids)) as pool:
        for i in range(n):
            for mode in (("plain", "locals") if i % 2 == 0 else ("locals", "plain")):
                for pid in pids:
                    s, size = dump(pid, mode == "locals")
                    times[mode].append(s)
                    sizes[mode].append(size)
                    times[f"{mode}_runner"].append(collector_dump(pid, mode == "locals"))
                t = time.perf_counter()
                list(pool.map(lambda p: dump(p, mode == "locals"), pids))
                times[f"{mode}_all"].append(time.perf_counter() - t)
    return {**times, "bytes_plain": sizes["plain"], "bytes_locals": sizes["locals"]}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=15)
    p.add_argument("--world", type=int, default=4)
    args = p.parse_args(argv)
    if shutil.which("py-spy") is None:
        print("py-spy is not on PATH", file=sys.stderr)
        return 2
    out = Path(tempfile.mkdtemp(prefix="locals-cost-"))
    procs = start(out, args.world)
    try:
        got = rounds([q.pid for q in procs], args.rounds)
    finally:
        for q in procs:
            q.send_signal(signal.SIGKILL)
        for q in procs:
            q.wait(timeout=30)
        shutil.rmtree(out, ignore_errors=True)
    med = {k: statistics.median(v) for k, v in got.items()}
    report = {
        "world": args.world, "rounds": args.rounds, "load": os.getloadavg()[0],
        "median_s": {k: round(med[k], 4) for k in ("plain", "locals", "plain_all", "locals_all", "plain_runner",
                                                   "locals_runner")},
        "ratio_locals_to_plain": round(med["locals"] / med["plain"], 2),
        "ratio_all_ranks": round(med["locals_all"] / med["plain_all"], 2),
        "ratio_runner": round(med["locals_runner"] / med["plain_runner"], 2),
        "collector_extra_s_a_rank": round(med["locals_runner"], 4),
        "median_bytes": {"plain": med["bytes_plain"], "locals": med["bytes_locals"]},
    }
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

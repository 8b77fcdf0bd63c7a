"""Cost of the NCCL recorder plugin: all_reduce bus bandwidth and latency, with and without.

Device only (GPU + NCCL). One run launches the same job alternately without and
with the plugin (A B B A ... so drift hits both), `--ranks` ranks on one GPU as
separate "hosts" (NCCL_HOSTID), sizes 8 B .. 256 MB, and prints one table:
median latency and bus bandwidth per size and mode, and the plugin/baseline ratio.
It also checks that the plugin really loaded (its INFO line in the NCCL log) and
that its state files decode.

    python benchmarks/recorder_overhead.py --ranks 2 --rounds 2

Goal (issue 4): under 1% cost at 1 MB and above, under 3% below.
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
sys.path.insert(0, str(REPO))

from forensics import recorder_build  # noqa: E402
from parsers.readers.recorder import read_recorder_dir  # noqa: E402

WORKER = REPO / "nccl_patches" / "device" / "worker.py"
SIZES = [8, 64, 512, 4 << 10, 32 << 10, 256 << 10, 1 << 20, 4 << 20, 16 << 20, 64 << 20, 256 << 20]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(ranks: int, plugin: Path | None, sizes: list[int], budget: float, python: str,
           backend: str = "nccl") -> tuple[list[dict], dict]:
    """One job; returns (rank 0's results, facts about the plugin run)."""
    port = free_port()
    work = Path(tempfile.mkdtemp(prefix="hf-bench-"))
    state_dir = Path(tempfile.mkdtemp(prefix="hf-bench-", dir="/dev/shm"))
    procs = []
    for r in range(ranks):
        env = dict(os.environ)
        env.update(RANK=str(r), WORLD_SIZE=str(ranks), LOCAL_RANK="0", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port),
                   NCCL_HOSTID=f"node{r:02d}", NCCL_SOCKET_IFNAME="lo", NCCL_IB_DISABLE="1",
                   NCCL_DEBUG="INFO", NCCL_DEBUG_SUBSYS="INIT", NCCL_DEBUG_FILE=str(work / "nccl.%h.%p.log"))
        if plugin is not None:
            env.update(NCCL_PROFILER_PLUGIN=str(plugin), FORENSICS_RECORDER_DIR=str(state_dir),
                       FORENSICS_RECORDER_KEEP="1")
        else:
            env.pop("NCCL_PROFILER_PLUGIN", None)
        cmd = [python, str(WORKER), "bench", "--sizes", ",".join(map(str, sizes)), "--budget", str(budget),
               "--backend", backend]
        procs.append(subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    outs = [p.communicate(timeout=600)[0] for p in procs]
    results = next((json.loads(ln[8:]) for ln in outs[0].splitlines() if ln.startswith("RESULTS ")), None)
    if results is None or any(p.returncode for p in procs):
        raise SystemExit(f"bench job failed (plugin={plugin}):\n" + "\n".join(o[-3000:] for o in outs))
    facts: dict = {}
    if plugin is not None:
        logs = "".join(p.read_text(errors="replace") for p in work.glob("nccl.*.log"))
        facts["loaded"] = logs.count("hang-forensics recorder (profiler v")
        facts["nccl_version"] = next((ln.split("NCCL version", 1)[1].strip() for ln in logs.splitlines()
                                      if "NCCL version" in ln), "?")
        states, problems = read_recorder_dir(state_dir)
        facts["state_files"] = len(states)
        facts["ops_recorded"] = sum(s.coll_next for s in states)
        facts["proxy_ops"] = sum(s.proxy_next for s in states)
        facts["dropped_proxy"] = sum(s.dropped_proxy for s in states)
        facts["problems"] = problems
    for p in list(state_dir.iterdir()):
        p.unlink()
    state_dir.rmdir()
    return results, facts


def human(n: int) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024:
            return f"{n}{unit}"
        n //= 1024
    return f"{n}TB"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=2, help="pairs of launches (A B, then B A, ...)")
    ap.add_argument("--budget", type=float, default=0.4, help="seconds of timed calls per size per launch")
    ap.add_argument("--max-bytes", type=int, default=256 << 20)
    ap.add_argument("--plugin", type=Path, help="prebuilt plugin (default: build with gcc)")
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--json", type=Path, help="also write the table here")
    ap.add_argument("--backend", default="nccl", help="gloo: CPU dry run of the orchestration (no plugin involved)")
    args = ap.parse_args()
    plugin = (args.plugin or recorder_build.build()).resolve()
    sizes = [s for s in SIZES if s <= args.max_bytes]
    runs: dict[str, list[list[dict]]] = {"base": [], "plugin": []}
    facts = []
    t0 = time.monotonic()
    for i in range(args.rounds):
        order = ["base", "plugin"] if i % 2 == 0 else ["plugin", "base"]
        for mode in order:
            res, f = launch(args.ranks, plugin if mode == "plugin" else None, sizes, args.budget, args.python,
                            args.backend)
            runs[mode].append(res)
            if f:
                facts.append(f)
    rows = []
    for k, size in enumerate(sizes):
        lat = {m: statistics.median(r[k]["latency_us"] for r in runs[m]) for m in runs}
        bw = {m: statistics.median(r[k]["busbw_GBps"] for r in runs[m]) for m in runs}
        rows.append({"bytes": size, "lat_base_us": lat["base"], "lat_plugin_us": lat["plugin"],
                     "busbw_base": bw["base"], "busbw_plugin": bw["plugin"],
                     "cost_pct": (lat["plugin"] / lat["base"] - 1) * 100})
    print(f"NCCL recorder overhead: {args.ranks} ranks on one GPU (NET/Socket via NCCL_HOSTID), "
          f"{args.rounds} rounds, {time.monotonic() - t0:.0f} s")
    print(f"plugin facts per launch: {facts}")
    if args.backend == "nccl" and any(not f.get("loaded") for f in facts):
        print("WARNING: the plugin's INFO line is missing from a plugin run's NCCL log: it may not have loaded, "
              "so that run measured nothing", file=sys.stderr)
    print(f"{'size':>8} {'lat base us':>12} {'lat plug us':>12} {'busbw base':>11} {'busbw plug':>11} "
          f"{'cost %':>7} goal")
    for r in rows:
        goal = 1.0 if r["bytes"] >= 1 << 20 else 3.0
        ok = "ok" if r["cost_pct"] <= goal else "OVER"
        print(f"{human(r['bytes']):>8} {r['lat_base_us']:12.1f} {r['lat_plugin_us']:12.1f} {r['busbw_base']:11.3f} "
              f"{r['busbw_plugin']:11.3f} {r['cost_pct']:7.2f} <{goal:g}% {ok}")
    if args.json:
        args.json.write_text(json.dumps({"rows": rows, "facts": facts}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

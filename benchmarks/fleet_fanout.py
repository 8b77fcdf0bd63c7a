"""The fleet orchestrator itself at 512 and 4,096 hosts, with a stand-in transport.

Why a stand-in: this machine cannot be 4,096 hosts (benchmarks/fleet_collect.py runs real
sshds, and there every "host" shares these 2 cores, so it measures the collectors, not
the fan-out). Here ClusterShell runs exactly as in production (forensics.fleet.collect:
fan-out window, per-host time limit, judging, extracting and merging every host's
archive) but its "ssh" is benchmarks/standin_ssh.sh (passed as ssh_path, benchmark-only):
it waits --latency seconds and prints a REAL host answer: a bundle collected by the real
remote collector (forensics.fleet.remote.collect_archive) from a rank-like process on
this machine, wire-encoded. Each size runs in a fresh subprocess so its peak memory
(ru_maxrss) is its own. The stand-in's own processes (sh, sleep, cat per host) also use
these 2 cores, which a real fleet would not: the figures are an upper bound.

Tree mode (ClusterShell gateways) is NOT exercised: it needs gateway hosts that run
ClusterShell's gateway over ssh to the targets, which a stand-in ssh cannot honestly
provide here; only flat fan-out is measured.

Goal (issue 18): 4,096 hosts in under 20 s at 1 s per host.
    PYTHONPATH=. python benchmarks/fleet_fanout.py [--sizes 512,4096] [--fanouts 256,1024] [--latency 1]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
STANDIN = REPO / "benchmarks" / "standin_ssh.sh"
GOAL_HOSTS, GOAL_S = 4096, 20.0


def make_answer(path: Path) -> int:
    """A real host answer: the remote collector's archive of one rank-like process here."""
    from forensics.fleet import wire
    from forensics.fleet.remote import collect_archive, parse_args

    env = dict(os.environ, RANK="0", WORLD_SIZE="1", LOCAL_RANK="0", LOCAL_WORLD_SIZE="1", FORENSICS_SIM_HOST="standin")
    proc = subprocess.Popen(["sleep", "600"], env=env, start_new_session=True)
    work = Path(tempfile.mkdtemp(prefix="bench-fanout-answer-"))
    try:
        time.sleep(0.2)
        args = parse_args(["--tag", "bench", "--timeout", "10", "--deadline", "30", "--match-env", "FORENSICS_SIM_HOST=standin"])
        header, archive = collect_archive(args, work)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        shutil.rmtree(work, ignore_errors=True)
    if archive is None:
        raise SystemExit(f"no archive: {header}")
    path.write_text("".join(line + "\n" for line in wire.encode(header, archive)))
    return len(archive)


def one(n: int, fanout: int, latency: float, answer: Path) -> dict:
    from forensics.fleet import command as cmd
    from forensics.fleet.collect import collect_fleet, new_tag, ssh_runner

    os.environ["FORENSICS_STANDIN_LATENCY"] = str(latency)
    os.environ["FORENSICS_STANDIN_ANSWER"] = str(answer)
    hosts = [f"node{i:05d}" for i in range(n)]
    out = Path(tempfile.mkdtemp(prefix="bench-fanout-"))
    spec = cmd.RemoteSpec(python=sys.executable, tag=new_tag(), timeout=20)
    runner = ssh_runner([], fanout, ssh_path=str(STANDIN))
    start = time.perf_counter()
    result = collect_fleet(hosts, out / "b", spec, runner, host_timeout=120, quiet=True, cleanup=False)
    took = time.perf_counter() - start
    ok = sum(1 for p in result.parts if p.status == "ok")
    shutil.rmtree(out, ignore_errors=True)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"hosts": n, "fanout": fanout, "latency_s": latency, "seconds": round(took, 2), "ok": ok,
            "ranks": len(result.manifest.ranks), "peak_rss_mb": round(peak, 1),
            "floor_s": round(-(-n // fanout) * latency, 1)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="512,4096")
    ap.add_argument("--fanouts", default="256,1024")
    ap.add_argument("--latency", type=float, default=1.0)
    ap.add_argument("--one", nargs=3, metavar=("N", "FANOUT", "ANSWER"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        print(json.dumps(one(int(args.one[0]), int(args.one[1]), args.latency, Path(args.one[2]))))
        return 0
    tmp = Path(tempfile.mkdtemp(prefix="bench-fanout-"))
    answer = tmp / "answer.wire"
    size = make_answer(answer)
    print(f"stand-in answer: a real host archive of {size} bytes ({answer.stat().st_size} bytes on the wire); "
          f"latency {args.latency} s per host; flat ClusterShell fan-out (tree mode not exercised, see doc)")
    print(f"goal: {GOAL_HOSTS} hosts < {GOAL_S:.0f} s at 1 s per host")
    rows = []
    try:
        for n in [int(s) for s in args.sizes.split(",")]:
            for fanout in [int(f) for f in args.fanouts.split(",")]:
                done = subprocess.run([sys.executable, __file__, "--latency", str(args.latency), "--one", str(n), str(fanout),
                                       str(answer)], capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=str(REPO)))
                if done.returncode != 0:
                    print(f"{n} hosts fanout {fanout}: failed: {done.stderr.strip()[-500:]}")
                    continue
                row = json.loads(done.stdout.strip().splitlines()[-1])
                rows.append(row)
                met = "" if n != GOAL_HOSTS else (" MET" if row["seconds"] < GOAL_S and row["ok"] == n else " NOT MET")
                print(f"{n:5d} hosts, fanout {fanout:5d}: {row['seconds']:6.2f} s (waves floor {row['floor_s']} s), "
                      f"{row['ok']}/{n} ok, {row['ranks']} ranks merged, orchestrator peak RSS {row['peak_rss_mb']:.0f} MB{met}",
                      flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

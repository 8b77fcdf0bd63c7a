"""Wall time to collect N simulated hosts over loopback ssh, against a sequential ssh loop.

Real sshds (throwaway keys; 16 addresses each, sshd's limit) listen on N loopback addresses 127.0.0.10..; each address
is a "host" running one rank-like process (a `sleep` with RANK/WORLD_SIZE and
FORENSICS_SIM_HOST in its environment). For each N, in the same run:
  fleet       forensics.fleet.collect_fleet: ClusterShell, fan-out --fanout, merge
  sequential  the same remote collector, one `ssh host ...` after another, same decoding
and, to separate ssh fan-out from collector CPU, the same two with a bare `true` remote
command. Prints seconds, the ratio sequential/fleet, and how fleet time grows with N.
Every "host" shares this machine's cores, so the collector runs compete for CPU: on a
real cluster each host brings its own, and the fleet's advantage is larger.

Usage (root, Debian openssh-server installed):
  PYTHONPATH=. python benchmarks/fleet_collect.py [--sizes 8,32,128] [--fanout 64] [--max-sequential 128]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "tests" / "integration" / "fleet")]

from fleet_sshd import LoopbackSshd, ensure_openssh  # noqa: E402

from forensics.fleet import command as cmd  # noqa: E402
from forensics.fleet import wire  # noqa: E402
from forensics.fleet.collect import collect_fleet, new_tag, ssh_runner  # noqa: E402
from forensics.fleet.transport import run_ssh  # noqa: E402

PORT = 2290


def addresses(n: int) -> list[str]:
    return [f"127.0.0.{10 + i}" for i in range(n)]  # 127.0.0.10-137 for N=128


def start_ranks(hosts: list[str]) -> list[subprocess.Popen]:
    procs = []
    for i, host in enumerate(hosts):
        env = dict(os.environ, RANK=str(i), WORLD_SIZE=str(len(hosts)), LOCAL_RANK="0", LOCAL_WORLD_SIZE="1",
                   MASTER_ADDR="127.0.0.1", MASTER_PORT="29990", FORENSICS_SIM_HOST=host)
        procs.append(subprocess.Popen(["sleep", "3600"], env=env, start_new_session=True))
    return procs


def spec_for(sshd: LoopbackSshd) -> cmd.RemoteSpec:
    return cmd.RemoteSpec(python=sshd.remote_python, tag=new_tag(), timeout=20, match_env=["FORENSICS_SIM_HOST={host}"])


def fleet_collect(sshd: LoopbackSshd, hosts: list[str], fanout: int) -> tuple[float, int]:
    out = Path(tempfile.mkdtemp(prefix="bench-fleet-"))
    runner = ssh_runner(cmd.ssh_options(sshd.ssh_options, 10), fanout)
    start = time.perf_counter()
    result = collect_fleet(hosts, out / "b", spec_for(sshd), runner, host_timeout=300, quiet=True)
    took = time.perf_counter() - start
    shutil.rmtree(out, ignore_errors=True)
    return took, sum(1 for p in result.parts if p.status == "ok")


def sequential_collect(sshd: LoopbackSshd, hosts: list[str]) -> tuple[float, int]:
    argv = cmd.remote_argv(spec_for(sshd))
    ok = 0
    start = time.perf_counter()
    for host in hosts:
        ssh = ["ssh", *cmd.ssh_options(sshd.ssh_options, 10), host, cmd.shell_command(cmd.for_host(argv, host))]
        done = subprocess.run(ssh, capture_output=True, text=True, timeout=300)
        try:
            ok += wire.decode(done.stdout.splitlines()).archive is not None
        except wire.WireError:
            pass
    return time.perf_counter() - start, ok


def fleet_true(sshd: LoopbackSshd, hosts: list[str], fanout: int) -> float:
    start = time.perf_counter()
    run_ssh(hosts, lambda h: "true", cmd.ssh_options(sshd.ssh_options, 10), fanout, 120)
    return time.perf_counter() - start


def sequential_true(sshd: LoopbackSshd, hosts: list[str]) -> float:
    start = time.perf_counter()
    for host in hosts:
        subprocess.run(["ssh", *cmd.ssh_options(sshd.ssh_options, 10), host, "true"], capture_output=True, timeout=120)
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="8,32,128")
    parser.add_argument("--fanout", type=int, default=64)
    parser.add_argument("--max-sequential", type=int, default=128, help="skip the sequential collect loop above this N")
    parser.add_argument("--json", type=Path, help="also write the rows as JSON here")
    args = parser.parse_args()
    reason = ensure_openssh()
    if reason:
        print(f"cannot run: {reason}", file=sys.stderr)
        return 2
    sizes = [int(s) for s in args.sizes.split(",")]
    every = addresses(max(sizes))
    root = Path(tempfile.mkdtemp(prefix="bench-sshd-"))
    sshd = LoopbackSshd(root, PORT, every)
    ranks: list[subprocess.Popen] = []
    rows = []
    try:
        sshd.start()
        ranks = start_ranks(every)
        for n in sizes:
            hosts = every[:n]
            f_true = fleet_true(sshd, hosts, args.fanout)
            s_true = sequential_true(sshd, hosts)
            f_col, f_ok = fleet_collect(sshd, hosts, args.fanout)
            s_col, s_ok = sequential_collect(sshd, hosts) if n <= args.max_sequential else (None, None)
            row = {"hosts": n, "fanout": args.fanout, "ssh_true_fleet_s": round(f_true, 2),
                   "ssh_true_sequential_s": round(s_true, 2),
                   "ssh_true_ratio": round(s_true / f_true, 1), "collect_fleet_s": round(f_col, 2),
                   "collect_fleet_ok": f_ok,
                   "collect_sequential_s": round(s_col, 2) if s_col else None, "collect_sequential_ok": s_ok,
                   "collect_ratio": round(s_col / f_col, 1) if s_col else None}
            rows.append(row)
            print(json.dumps(row), flush=True)
    finally:
        for proc in ranks:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        sshd.stop()
        shutil.rmtree(root, ignore_errors=True)
    print("\ngoal: the fleet faster than the sequential ssh loop at every size (ratio above 1)")
    print(" hosts | ssh true: fleet / seq (ratio) | collect: fleet / seq (ratio) | fleet s per host")
    for r in rows:
        seq = f"{r['collect_sequential_s']:.1f}s ({r['collect_ratio']}x)" if r["collect_sequential_s"] else "skipped"
        print(f" {r['hosts']:5d} | {r['ssh_true_fleet_s']:6.2f}s / {r['ssh_true_sequential_s']:6.2f}s "
              f"({r['ssh_true_ratio']}x) | "
              f"{r['collect_fleet_s']:6.2f}s / {seq} | {r['collect_fleet_s'] / r['hosts']:.3f}")
    if len(rows) > 1:
        a, b = rows[0], rows[-1]
        growth = (b["collect_fleet_s"] / a["collect_fleet_s"]) / (b["hosts"] / a["hosts"])
        print(f"fleet time grew {b['collect_fleet_s'] / a['collect_fleet_s']:.1f}x for "
              f"{b['hosts'] / a['hosts']:.0f}x hosts "
              f"(1.0 = linear in N; below 1 = fan-out absorbing hosts)  [{growth:.2f}]")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""A real group test job for trying bisection on one machine: a gloo all_reduce.

Every name in --hosts stands for one "host"; each gets --procs-per-host processes,
and all of them form one gloo group on 127.0.0.1 that runs a single all_reduce.
Hosts named in a JSON --bad-file misbehave the way broken machines do:

    {"seed": 7, "hosts": {"node03": {"mode": "hang"}, "node07": {"mode": "fail", "p": 0.5}}}

mode "hang": the rank joins the group and then never enters the collective (the job
hangs until its time limit); mode "fail": the rank exits with status 3 at start. "p"
makes it flaky: it misbehaves with that probability, drawn from the seed, the job's
round/group (FORENSICS_BISECT_ROUND/GROUP) and the host name, so reruns differ but
a test is reproducible. --flake P makes the whole job fail with probability P even
when every host is good (a flaky test). --fork imports torch once and forks the ranks
from it instead of starting a fresh interpreter per rank: the same gloo job at a
fraction of the CPU (importing torch costs over a second of CPU per process), which is
what lets a whole campaign run in a notebook on a small machine.

Usage, as a bisect --test template:
    python -m forensics.bisect.selftest_job --hosts {hosts} --port {port} --bad-file bad.json
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import time
from datetime import timedelta


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="selftest_job", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--hosts", required=True, help="comma-separated host names of this group")
    p.add_argument("--port", type=int, required=True, help="MASTER_PORT on 127.0.0.1 for this group")
    p.add_argument("--procs-per-host", type=int, default=1)
    p.add_argument("--bad-file", help="JSON naming the hosts that misbehave")
    p.add_argument("--flake", type=float, default=0.0, help="probability that the job fails anyway")
    p.add_argument("--gloo-timeout", type=float, default=8.0, help="seconds a rank waits in gloo")
    p.add_argument("--fork", action="store_true",
                   help="import torch once and fork the ranks (cheaper than one interpreter per rank)")
    p.add_argument("--worker", type=int, default=None, help=argparse.SUPPRESS)
    return p.parse_args(argv)


def job_key() -> str:
    """Identifies this job among the bisection's jobs, for reproducible flakiness."""
    return f"{os.environ.get('FORENSICS_BISECT_ROUND', '0')}:{os.environ.get('FORENSICS_BISECT_GROUP', '0')}"


def fate(host: str, bad_file: str | None) -> str | None:
    """'hang', 'fail' or None (healthy) for `host` in this job."""
    if not bad_file:
        return None
    with open(bad_file) as fh:
        spec = json.load(fh)
    entry = spec.get("hosts", {}).get(host)
    if not entry:
        return None
    p = float(entry.get("p", 1.0))
    if p < 1.0:
        rng = random.Random(f"{spec.get('seed', 0)}:{job_key()}:{host}")
        if rng.random() >= p:
            return None
    return entry.get("mode", "fail")


def worker(args: argparse.Namespace) -> int:
    """One rank: join the gloo group, all_reduce a tensor, check the sum."""
    hosts = args.hosts.split(",")
    rank = args.worker
    world = len(hosts) * args.procs_per_host
    host = hosts[rank // args.procs_per_host]
    what = fate(host, args.bad_file)
    if what == "fail":
        print(f"selftest rank {rank} on {host}: simulated failure", file=sys.stderr)
        return 3
    import torch
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{args.port}", rank=rank,
                            world_size=world, timeout=timedelta(seconds=args.gloo_timeout))
    if what == "hang":
        print(f"selftest rank {rank} on {host}: simulated hang before all_reduce", file=sys.stderr)
        while True:
            time.sleep(3600)
    t = torch.ones(4)
    dist.all_reduce(t)
    ok = bool(t[0].item() == world)
    dist.destroy_process_group()
    return 0 if ok else 4


def main(argv: list[str] | None = None) -> int:
    """Start one worker per rank of the group and fail if any fails (or the job flakes)."""
    args = parse_args(argv)
    if args.worker is not None:
        return worker(args)
    hosts = [h for h in args.hosts.split(",") if h]
    if not hosts:
        print("selftest: no hosts", file=sys.stderr)
        return 2
    if args.flake > 0:
        rng = random.Random(f"flake:{job_key()}:{args.hosts}")
        if rng.random() < args.flake:
            print("selftest: simulated flaky failure of the whole job", file=sys.stderr)
            return 5
    world = len(hosts) * args.procs_per_host
    if args.fork:
        return run_forked(args, world)
    base = [sys.executable, "-m", "forensics.bisect.selftest_job", "--hosts", args.hosts,
            "--port", str(args.port), "--procs-per-host", str(args.procs_per_host),
            "--gloo-timeout", str(args.gloo_timeout)]
    if args.bad_file:
        base += ["--bad-file", args.bad_file]
    procs = [subprocess.Popen(base + ["--worker", str(r)]) for r in range(world)]
    codes = [p.wait() for p in procs]
    return 0 if all(c == 0 for c in codes) else 1


def run_forked(args: argparse.Namespace, world: int) -> int:
    """Fork one child per rank after importing torch once; fail if any rank fails.

    The parent only imports torch (it runs no torch op and starts no thread pool), so
    each child starts from a clean interpreter state and builds its own gloo group.
    The children stay in the job's process group, so a runner that kills the group
    on a hang kills them too.
    """
    import torch  # noqa: F401  (imported here once, inherited by every child)

    pids = []
    for rank in range(world):
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                args.worker = rank
                code = worker(args)
            except BaseException as err:  # a child must never return into the parent's loop
                print(f"selftest rank {rank}: {type(err).__name__}: {err}", file=sys.stderr)
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(code)
        pids.append(pid)
    codes = [os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) for pid in pids]
    return 0 if all(c == 0 for c in codes) else 1


if __name__ == "__main__":
    sys.exit(main())

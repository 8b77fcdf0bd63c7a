"""The fleet orchestrator itself at 512 and 4,096 hosts, with a stand-in transport.

Why a stand-in: this machine cannot be 4,096 hosts (benchmarks/fleet_collect.py runs real
sshds, and there every "host" shares these 2 cores, so it measures the collectors, not
the fan-out). Here ClusterShell runs exactly as in production (forensics.fleet.collect:
fan-out window, per-host time limit, judging, extracting and merging every host's
archive, filing processes) but its "ssh" is a stand-in passed as ssh_path (benchmark-only):
it waits --latency seconds and prints a REAL host answer: a bundle collected by the real
remote collector (forensics.fleet.remote.collect_archive) from a rank-like process on
this machine, wire-encoded. Each run is a fresh subprocess so its peak memory
(ru_maxrss) is its own.

The stand-in: benchmarks/standin_ssh.c, compiled here at start (static when the C library
allows; --standin perl for benchmarks/standin_ssh, which the tests use). Still one real
process per host, exec'd by the orchestrator's transport exactly as ssh would be (so the
orchestrator's cost of starting ssh clients is all in the figure); only its own start-up
is lighter: ~1 ms of CPU a host against ~4.4 ms for perl, 14 s less of these 2 cores at
4,096 hosts, none of it the orchestrator's. The stand-ins share these 2 cores with the
orchestrator, which a real fleet's hosts would not; a real ssh client costs the
orchestrator's machine more CPU per host (key exchange, ciphers). So the output prints the
wall time AND the CPU split: the orchestrator's (its own process and its filing
processes) and the stand-ins' (started by ClusterShell, so their exec cost is in it).

Where the job bundle is written (--bundle-dir; default /dev/shm when it is a tmpfs): this
machine's disk is ext4 without a journal, where the kernel skips every recently deleted
inode when it allocates one (ext4 recently_deleted(), seen with perf: 14 us a file on a
fresh folder, 150-500 us right after a mass delete, such as this benchmark's own previous
run). A 4,096-host bundle is ~50k files, so on that disk the figure measures what was
deleted there in the last minutes, not the orchestrator. Pass --bundle-dir /tmp to measure it anyway.

Tree mode (--gateways G): a ClusterShell topology.conf routes this machine -> gw[0-G-1]
-> the hosts; the stand-in, asked to run `python -m ClusterShell.Gateway` on a gateway,
runs that real gateway here (as sshd would on the gateway host), and each gateway runs
its own stand-in ssh clients. The gateways share these 2 cores too; their CPU is not in
the figures (ClusterShell does not reap them before the measurement ends).

Other work on this machine shares the 2 cores: each row prints the 1-minute load average
before and after it.

Goal (issue 18): 4,096 hosts in under 20 s at 1 s per host.
    PYTHONPATH=. python benchmarks/fleet_fanout.py [--sizes 512,4096] [--fanouts 1024] [--gateways 0,8] [--latency 1]
        [--standin c|perl] [--bundle-dir DIR] [--filing-workers N]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
STANDIN = REPO / "benchmarks" / "standin_ssh"  #: the perl stand-in (tests use it: nothing to compile)
STANDIN_C = REPO / "benchmarks" / "standin_ssh.c"  #: the same contract in C, compiled by compile_standin()
GOAL_HOSTS, GOAL_S = 4096, 20.0


def make_answer(path: Path) -> int:
    """A real host answer: the remote collector's archive of one rank-like process here."""
    from forensics.fleet import wire
    from forensics.fleet.remote import collect_archive, parse_args

    own = f"standin-{os.getpid()}-{time.monotonic_ns()}"  #: only this process: another run's are not ours
    env = dict(os.environ, RANK="0", WORLD_SIZE="1", LOCAL_RANK="0", LOCAL_WORLD_SIZE="1", FORENSICS_SIM_HOST=own)
    proc = subprocess.Popen(["sleep", "600"], env=env, start_new_session=True)
    work = Path(tempfile.mkdtemp(prefix="bench-fanout-answer-"))
    try:
        time.sleep(0.2)
        args = parse_args(["--tag", "bench", "--timeout", "10", "--deadline", "30", "--match-env",
                           f"FORENSICS_SIM_HOST={own}"])
        header, archive = collect_archive(args, work)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        shutil.rmtree(work, ignore_errors=True)
    if archive is None:
        raise SystemExit(f"no archive: {header}")
    path.write_text("".join(line + "\n" for line in wire.encode(header, archive)))
    return len(archive)


def compile_standin(folder: Path) -> tuple[Path, str]:
    """benchmarks/standin_ssh.c built into `folder` (static when the C library allows); the perl
    stand-in when there is no compiler. Returns the program and what it is, for the output."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is not None:
        for flags, kind in ((["-static"], "static C"), ([], "dynamic C")):
            binary = folder / "standin_ssh"
            done = subprocess.run([cc, "-O2", "-o", str(binary), *flags, str(STANDIN_C)], capture_output=True,
                                  text=True)
            if done.returncode == 0:
                return binary, kind
    return STANDIN, "perl"


def filesystem(folder: Path) -> str:
    """The type of the file system holding `folder` (from /proc/mounts: the longest mount point above it)."""
    best, kind = "", "unknown"
    try:
        mounts = Path("/proc/mounts").read_text().splitlines()
    except OSError:
        return kind
    target = str(folder.resolve())
    for line in mounts:
        fields = line.split()
        if (len(fields) >= 3 and (target == fields[1] or target.startswith(fields[1].rstrip("/") + "/"))
                and len(fields[1]) >= len(best)):
            best, kind = fields[1], fields[2]
    return kind


def default_bundle_dir() -> str:
    """/dev/shm when it is a writable tmpfs (see the module doc: this machine's ext4), else the temp folder."""
    shm = Path("/dev/shm")
    if shm.is_dir() and os.access(shm, os.W_OK) and filesystem(shm) == "tmpfs":
        return str(shm)
    return tempfile.gettempdir()


def topology(out: Path, hosts: list[str], gateways: int) -> Path:
    """A ClusterShell topology.conf: this machine -> gw[0-G] -> the hosts (ClusterShell splits them)."""
    from forensics.fleet.hosts import fold

    root = socket.gethostname().split(".", 1)[0]
    path = out / "topology.conf"
    path.write_text(f"[routes]\n{root}: gw[0-{gateways - 1}]\ngw[0-{gateways - 1}]: {fold(hosts)}\n")
    return path


def one(n: int, fanout: int, latency: float, answer: Path, gateways: int = 0, standin: Path = STANDIN,
        bundle_parent: str | None = None, workers: int | None = None) -> dict:
    from forensics.fleet import command as cmd
    from forensics.fleet.collect import collect_fleet, new_tag, ssh_runner

    os.environ["FORENSICS_STANDIN_LATENCY"] = str(latency)
    os.environ["FORENSICS_STANDIN_ANSWER"] = str(answer)
    os.environ["CLUSTERSHELL_GW_PYTHON_EXECUTABLE"] = sys.executable  # the gateways' python (they run here)
    os.environ["CLUSTERSHELL_GW_LOG_DIR"] = str(answer.parent)  # their logs go with the run's temp folder
    hosts = [f"node{i:05d}" for i in range(n)]
    out = Path(tempfile.mkdtemp(prefix="bench-fanout-", dir=bundle_parent))
    spec = cmd.RemoteSpec(python=sys.executable, tag=new_tag(), timeout=20)
    try:
        tree = topology(out, hosts, gateways) if gateways else None
        runner = ssh_runner([], fanout, ssh_path=str(standin), topology=tree)
        start = time.perf_counter()
        result = collect_fleet(hosts, out / "b", spec, runner, host_timeout=120, quiet=True, cleanup=False,
                               workers=workers)
        took = time.perf_counter() - start
        me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
        ok = sum(1 for p in result.parts if p.status == "ok")
        filed = sum(1 for p in result.parts if p.bundle is not None and (p.bundle / "host-manifest.json").is_file())
    finally:
        shutil.rmtree(out, ignore_errors=True)
    return {"hosts": n, "fanout": fanout, "gateways": gateways, "latency_s": latency, "seconds": round(took, 2),
            "ok": ok, "filed": filed,
            "ranks": len(result.manifest.ranks), "peak_rss_mb": round(me.ru_maxrss / 1024, 1),
            "cpu_s": round(me.ru_utime + me.ru_stime + result.filing_cpu_s, 1),
            "filing_cpu_s": round(result.filing_cpu_s, 1),
            "filing_rss_mb": result.filing_peak_rss_mb,
            "standin_cpu_s": round(kids.ru_utime + kids.ru_stime - result.filing_cpu_s, 1),
            "phases": result.phases, "floor_s": round(-(-n // (fanout * max(1, gateways))) * latency, 1)}



def _pythonpath() -> str:
    """The repository first, then what the caller had (packages installed with --target, as on a
    machine with no registry), so each run imports this checkout and finds its dependencies."""
    return os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)

def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="512,4096")
    ap.add_argument("--fanouts", default="1024")
    ap.add_argument("--latency", type=float, default=1.0)
    ap.add_argument("--gateways", default="0,8", help="0: flat fan-out; G: tree mode through G ClusterShell gateways")
    ap.add_argument("--standin", choices=("c", "perl"), default="c",
                    help="the stand-in ssh: compiled C (default) or perl")
    ap.add_argument("--bundle-dir", default=None,
                    help="where each run's job bundle is written (default: /dev/shm when a tmpfs, see doc)")
    ap.add_argument("--filing-workers", type=int, default=None,
                    help="filing processes (default: as collect_fleet picks; 0: one thread)")
    ap.add_argument("--one", nargs=5, metavar=("N", "FANOUT", "ANSWER", "GATEWAYS", "STANDIN"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        print(json.dumps(one(int(args.one[0]), int(args.one[1]), args.latency, Path(args.one[2]), int(args.one[3]),
                             Path(args.one[4]), args.bundle_dir, args.filing_workers)))
        return 0
    args.bundle_dir = args.bundle_dir or default_bundle_dir()
    tmp = Path(tempfile.mkdtemp(prefix="bench-fanout-"))
    answer = tmp / "answer.wire"
    size = make_answer(answer)
    standin, kind = compile_standin(tmp) if args.standin == "c" else (STANDIN, "perl")
    print(f"stand-in ssh: {kind} ({standin.name}), one process per host; job bundles written under "
          f"{args.bundle_dir} ({filesystem(Path(args.bundle_dir))})")
    print(f"stand-in answer: a real host archive of {size} bytes ({answer.stat().st_size} bytes on the wire); "
          f"latency {args.latency} s per host; flat ClusterShell fan-out and tree mode through gateways "
          f"run here (see doc)")
    print(f"goal: {GOAL_HOSTS} hosts < {GOAL_S:.0f} s at 1 s per host")
    rows = []
    try:
        for n, fanout, gateways in itertools.product([int(s) for s in args.sizes.split(",")],
                                                     [int(f) for f in args.fanouts.split(",")],
                                                     [int(g) for g in args.gateways.split(",")]):
                mode = f"tree via {gateways} gateways" if gateways else "flat"
                load_before = os.getloadavg()[0]
                done = subprocess.run([sys.executable, __file__, "--latency", str(args.latency),
                                       *(["--bundle-dir", args.bundle_dir] if args.bundle_dir else []),
                                       *(["--filing-workers", str(args.filing_workers)]
                                         if args.filing_workers is not None else []),
                                       "--one", str(n), str(fanout), str(answer), str(gateways), str(standin)],
                                      capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=_pythonpath()))
                if done.returncode != 0:
                    print(f"{n} hosts fanout {fanout} {mode}: failed: {done.stderr.strip()[-500:]}")
                    continue
                row = json.loads(done.stdout.strip().splitlines()[-1])
                row["load"] = [round(load_before, 2), round(os.getloadavg()[0], 2)]
                rows.append(row)
                met = "" if n != GOAL_HOSTS else (" MET" if row["seconds"] < GOAL_S and row["ok"] == n else " NOT MET")
                ph = row["phases"]
                # filing processes ran (else answers were filed on a thread of the orchestrator)
                used = row["filing_rss_mb"] > 0
                procs_rss = (f" (+ filing processes' {row['filing_rss_mb']:.0f} MB each)" if used
                             else " (filing on a thread)")
                procs_cpu = f" (of it filing processes {row['filing_cpu_s']} s)" if used else ""
                print(f"{n:5d} hosts, fanout {fanout:5d}, {mode}: {row['seconds']:6.2f} s (goal < {GOAL_S:.0f} s "
                      f"at {GOAL_HOSTS}; "
                      f"waves floor {row['floor_s']} s), {row['ok']}/{n} ok, {row['filed']} filed, "
                      f"{row['ranks']} ranks merged, "
                      f"orchestrator peak RSS {row['peak_rss_mb']:.0f} MB{procs_rss}{met}\n"
                      f"{'':13s}last answer {ph['answers']:.1f} s, all filed {ph['filed']:.1f} s, merged "
                      f"{ph['merged']:.1f} s; "
                      f"CPU: orchestrator {row['cpu_s']} s{procs_cpu}, stand-in{' and gateway' if gateways else ''} "
                      f"processes {row['standin_cpu_s']} s "
                      f"(2 cores: {(row['cpu_s'] + row['standin_cpu_s']) / 2:.1f} s of wall at the least); load "
                      f"{row['load'][0]} -> {row['load'][1]}",
                      flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

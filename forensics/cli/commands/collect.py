"""`forensics collect`: gather the evidence of every rank on this host into a bundle."""

from __future__ import annotations

import argparse
import datetime as dt
import json
from pathlib import Path

from forensics.bundle.archive import make_archive
from forensics.bundle.manifest import Status
from forensics.collect.local import collect_local
from forensics.collectors.base import CollectOptions
from forensics.discover.ranks import host_name
from forensics.errors import ForensicsError
from forensics.exitcodes import ExitCode
from forensics.fleet.cli import FLEET_EPILOG, add_fleet_arguments, run_fleet, wants_fleet

NAME = "collect"
HELP = "gather stacks, state, logs and dumps of every rank on this host into a bundle"
DESCRIPTION = """Gather the evidence of every rank of the distributed jobs running on this host.

Ranks are found from RANK/WORLD_SIZE (and LOCAL_RANK, TORCHELASTIC_*) in each process's
environment, or named with --pid. For each rank, in parallel: /proc state, environment
(secrets redacted), stdout/stderr files, NCCL_DEBUG_FILE logs, Flight Recorder dumps,
py-spy stacks, and with --gdb native backtraces of all threads. Every target is left in
the run state it had. The bundle's manifest.json records each collector's status.

examples:
  forensics collect                       # every rank on this host
  forensics collect --pid 4242 --gdb      # one process, with native backtraces
  forensics collect -o /tmp/b --tar       # also write /tmp/b.tar.gz

""" + FLEET_EPILOG


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--pid", action="append", default=[], metavar="PID", help="collect this process (repeat, or comma list); default: discover ranks")
    parser.add_argument("--job", metavar="JOBID", help="only ranks of this job (TORCHELASTIC_RUN_ID, slurm-ID, or MASTER_ADDR:PORT)")
    parser.add_argument("-o", "--out", type=Path, help="bundle folder (default: ./forensics-HOST-TIME)")
    parser.add_argument("--tar", action="store_true", help="also pack the bundle as OUT.tar.gz")
    parser.add_argument("--native", action="store_true", help="native frames of every thread (gloo/NCCL workers too) through libdw, pausing each rank for "
                        "milliseconds; py-spy --native where libdw (elfutils) is missing")
    parser.add_argument("--gdb", action="store_true", help="GDB backtraces of all threads (pauses each target seconds)")
    parser.add_argument("--timeout", type=float, default=20.0, metavar="S", help="time limit per collector per rank (default 20)")
    parser.add_argument("--gdb-timeout", type=float, default=60.0, metavar="S", help="time limit for gdb per rank (default 60)")
    parser.add_argument("--json", action="store_true", help="print a JSON summary on stdout")
    parser.add_argument("-q", "--quiet", action="store_true", help="no progress lines on stderr")
    add_fleet_arguments(parser)


def parse_pids(values: list[str]) -> list[int] | None:
    """'--pid 1 --pid 2,3' -> [1, 2, 3]; None when no pid was given (discover instead)."""
    pids = []
    for value in values:
        for part in value.split(","):
            part = part.strip()
            if not part:
                continue
            if not part.isdigit():
                raise ForensicsError(f"--pid {part!r}: not a process id")
            pids.append(int(part))
    return pids or None


def default_out() -> Path:
    stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    return Path(f"forensics-{host_name()}-{stamp}")


def run(args: argparse.Namespace) -> int:
    out = args.out or default_out()
    if wants_fleet(args):
        return run_fleet(args, out)
    options = CollectOptions(timeout=args.timeout, native=args.native, gdb=args.gdb, extra={"gdb_timeout": args.gdb_timeout})
    result = collect_local(out, options, pids=parse_pids(args.pid), quiet=args.quiet, job=args.job)
    manifest = result.writer.manifest
    archive = make_archive(out) if args.tar else None
    summary = summarize(out, archive, result.problems, manifest, result.complete)
    if args.json:
        print(json.dumps(summary, indent=1))
    else:
        print_summary(summary)
    return int(ExitCode.OK if result.complete else ExitCode.PARTIAL)


def summarize(out: Path, archive: Path | None, problems: list[str], manifest, complete: bool) -> dict:
    failures = [
        {"rank": r.rank, "host": r.host, "pid": r.pid, "collector": c.name, "status": c.status, "error": c.error}
        for r in manifest.ranks
        for c in r.collectors
        if c.status not in (Status.OK, Status.SKIPPED)
    ]
    return {
        "bundle": str(out),
        "archive": str(archive) if archive else None,
        "ranks": len(manifest.ranks),
        "missing_ranks": [m.rank for m in manifest.missing],
        "problems": problems,
        "failures": failures,
        "complete": complete,
    }


def print_summary(summary: dict) -> None:
    print(f"bundle: {summary['bundle']}" + (f"  (archive {summary['archive']})" if summary["archive"] else ""))
    print(f"ranks collected: {summary['ranks']}")
    if summary["missing_ranks"]:
        print(f"ranks with no process: {summary['missing_ranks']}")
    for line in summary["problems"]:
        print(f"problem: {line}")
    for f in summary["failures"]:
        print(f"missing evidence: rank {f['rank']} ({f['host']} pid {f['pid']}) {f['collector']}: {f['status']}: {f['error']}")
    print("next: forensics analyze " + summary["bundle"])

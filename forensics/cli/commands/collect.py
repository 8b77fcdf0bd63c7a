"""`forensics collect`: gather the evidence of every rank on this host into a bundle."""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import os
import signal
import sys
from pathlib import Path

from loguru import logger

from forensics import safefs
from forensics.bundle.archive import archive_path, make_archive
from forensics.bundle.attach import attach_files
from parsers.model.manifest import Status
from forensics.cli import ending
from forensics.cli.logs import is_terminal
from forensics.report.output import emit, emit_document, escape, json_text
from forensics.collect.budget import HOST_BYTES, RANK_BYTES, TOTAL_BYTES
from forensics.collect.local import collect_local
from forensics.collect.tool import interrupt
from forensics.collectors.base import CollectOptions
from forensics.discover.ranks import host_name
from forensics.errors import ForensicsError
from forensics.exitcodes import ExitCode
from forensics.cli.collect_fleet import FLEET_EPILOG, add_fleet_arguments, refuse_unused, run_fleet, wants_fleet

NAME = "collect"
HELP = "gather stacks, state, logs and dumps of every rank on this host into a bundle"
DESCRIPTION = """Gather the evidence of every rank of the distributed jobs running on this host.

Ranks are found from RANK/WORLD_SIZE (and LOCAL_RANK, TORCHELASTIC_*) in each process's
environment, or named with --pid. For each rank, in parallel: /proc state, environment
(secrets redacted), stdout/stderr files, NCCL_DEBUG_FILE logs, Flight Recorder dumps,
py-spy stacks (--samples N: N of them over a few seconds), and with --gdb native backtraces of all threads.
Every target is left in the run state it had. The bundle's manifest.json records each collector's status.

examples:
  forensics collect                       # every rank on this host
  forensics collect --pid 4242 --gdb      # one process, with native backtraces
  forensics collect -o /tmp/b --tar       # also write /tmp/b.tar.gz

Progress lines go to stderr when it is a terminal (or with -v); -q silences them.
--json prints hang-forensics/collect/1 on stdout (compact; --pretty to indent).

""" + FLEET_EPILOG

EXIT_CODES = {
    0: "the bundle was written with every collector's evidence (fleet: from every host)",
    1: "internal error (a bug)",
    2: "bad input: no ranks found, unknown --pid, bad host list or option",
    3: "the bundle was written but some evidence is missing or late (manifest.json says which)",
    6: "fleet only: no host answered, nothing was collected (not the same as a missing tool)",
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--pid", action="append", default=[], metavar="PID",
                        help="collect this process (repeat, or comma list); default: discover ranks")
    parser.add_argument("--job", metavar="JOBID",
                        help="only ranks of this job (TORCHELASTIC_RUN_ID, slurm-ID, or MASTER_ADDR:PORT)")
    parser.add_argument("-o", "--out", "--output", dest="out", type=Path,
                        help="bundle folder: a new one, or an empty folder of yours (default: ./forensics-HOST-TIME)")
    parser.add_argument("--tar", action="store_true",
                        help="also pack the bundle as OUT.tar.gz (a new file: never over an existing one)")
    parser.add_argument("--native", action="store_true",
                        help="native frames of every thread (gloo/NCCL workers too) through libdw, "
                             "pausing each rank for "
                        "milliseconds; py-spy --native where libdw (elfutils) is missing")
    parser.add_argument("--gdb", action="store_true", help="GDB backtraces of all threads (pauses each target seconds)")
    parser.add_argument("--samples", type=int, default=0, metavar="N",
                        help="also take N py-spy stack samples per rank over a few seconds (nonblocking: the "
                             "rank never pauses; "
                             "at most 200, and at most --timeout seconds): where a slow rank spends its time")
    parser.add_argument("--sample-interval", type=float, default=0.1, metavar="S",
                        help="mean seconds between two samples (default 0.1; shrunk so N samples fit in the time "
                             "limit)")
    parser.add_argument("--second-look", type=float, default=3.0, metavar="S",
                        help="look again at every rank S seconds after the collection (default 3; 0: off; at most 60): "
                             "/proc state and CPU, py-spy stacks (nonblocking), NCCL log sizes and recorder counters, "
                             "so that analyze can tell a hang (nothing moved) from progress without "
                             "time-stamped evidence")
    parser.add_argument("--timeout", type=float, default=20.0, metavar="S",
                        help="time limit per collector per rank (default 20)")
    parser.add_argument("--gdb-timeout", type=float, default=None, metavar="S",
                        help="time limit for gdb per rank (default 60; fleet: 60%% of --host-timeout)")
    parser.add_argument("--max-mib", type=int, default=TOTAL_BYTES >> 20, metavar="MIB",
                        help=f"bytes the whole collection may write, in MiB (default "
                             f"{TOTAL_BYTES >> 20}); files a target "
                             "names count at their apparent size (sparse ones whole); what the cap keeps out is "
                             "said in the manifest")
    parser.add_argument("--rank-max-mib", type=int, default=RANK_BYTES >> 20, metavar="MIB",
                        help=f"bytes one rank's evidence may take, in MiB (default {RANK_BYTES >> 20})")
    parser.add_argument("--host-max-mib", type=int, default=HOST_BYTES >> 20, metavar="MIB",
                        help=f"bytes the host-wide files may take, in MiB (default {HOST_BYTES >> 20}): kernel "
                             "log, nvidia-smi, df, sysfs copies and the host's digest; a text file past it keeps "
                             "whole lines and a cut line, a JSON or XML file is left out, said in the manifest")
    parser.add_argument("--attach", action="append", default=[], type=Path, metavar="FILE",
                        help="also put FILE in the bundle (job/attached/, listed in the manifest; repeat): evidence "
                             "only the caller holds, e.g. forensics.arm()'s step series or a training log")
    parser.add_argument("--json", action="store_true",
                        help="print a JSON summary (schema hang-forensics/collect/1) on stdout")
    parser.add_argument("--pretty", action="store_true", help="with --json: indent the JSON")
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
    refuse_unused(args)  # before anything is made: an option that would do nothing is refused with the reason
    out = args.out or default_out()
    args.quiet = quiet_progress(args)
    if args.tar and os.path.lexists(archive_path(out)):
        raise ForensicsError(f"{archive_path(out)}: already exists; --tar writes a new archive, never over one")
    created = not os.path.lexists(out)
    safefs.claim_folder(out, "bundle folder")  # new, or empty and yours; then locked: two collects never mix
    try:
        return _run_into(args, out)
    finally:
        safefs.release_folder(out)
        if created:
            with contextlib.suppress(OSError):
                os.rmdir(out)  # only when nothing was collected into it (rmdir removes empty folders only)


def _run_into(args: argparse.Namespace, out: Path) -> int:
    """collect into `out`, a folder claimed for this command (see run)."""
    if not all(1 <= mib <= 1 << 30 for mib in (args.max_mib, args.rank_max_mib, args.host_max_mib)):
        raise ForensicsError("--max-mib, --rank-max-mib and --host-max-mib must be whole numbers of MiB, at least 1")
    if wants_fleet(args):
        return run_fleet(args, out)
    gdb_timeout = 60.0 if args.gdb_timeout is None else args.gdb_timeout
    if not gdb_timeout > 0 or not args.timeout > 0:
        raise ForensicsError("--timeout and --gdb-timeout must be positive numbers of seconds")
    if args.samples < 0 or not args.sample_interval >= 0:
        raise ForensicsError("--samples and --sample-interval must not be negative")
    if not 0 <= args.second_look <= 60:
        raise ForensicsError("--second-look must be 0 (off) to 60 seconds")
    options = CollectOptions(timeout=args.timeout, native=args.native, gdb=args.gdb, samples=args.samples,
                             sample_interval=args.sample_interval, second_look=args.second_look,
                             extra={"gdb_timeout": gdb_timeout},
                             total_bytes=args.max_mib << 20, rank_bytes=args.rank_max_mib << 20,
                             host_bytes=args.host_max_mib << 20)
    logger.info("collect: into {} (timeout {} s per collector, gdb {})", out, args.timeout, "on" if args.gdb else "off")
    pids = parse_pids(args.pid)
    with interrupt_handlers() as caught:
        try:
            result = collect_local(out, options, pids=pids, quiet=args.quiet, job=args.job)
        except OSError as err:  # a full disk before the manifest guard took over (folders of the ranks)
            raise ForensicsError(f"cannot write the bundle at {out}: {err.strerror or err}",
                                 code=ExitCode.PARTIAL) from err
    if args.attach and not result.interrupted:
        result.problems.extend(attach_files(out, args.attach, host=host_name()))
    manifest = result.writer.manifest
    safefs.release_folder(out)  # before packing: the lock is not evidence
    archive = None
    if args.tar and not result.interrupted:
        try:
            archive = make_archive(out)
        except (OSError, ForensicsError) as err:  # the bundle stays; only the archive is missing
            result.problems.append(f"--tar: not packed: {getattr(err, 'strerror', None) or err}")
    summary = summarize(out, archive, result.problems, manifest, result.complete)
    summary["interrupted"] = result.interrupted
    code = ExitCode.OK if result.complete else ExitCode.PARTIAL
    if args.json:
        emit_document(json_text("collect", dict(summary, mode="local", exit_code=int(code)), args.pretty))
    else:
        print_summary(summary)
    if result.interrupted:
        code = 128 + (caught[0] if caught else signal.SIGINT)
        print(escape(f"forensics collect: interrupted; the bundle holds what was gathered ({out})"), file=sys.stderr)
        safefs.release_folder(out)
        sys.stdout.flush()
        sys.stderr.flush()
        ending.remove_now()  # the command's temp folder (collect --gdb's stop lock): os._exit runs no finally
        os._exit(code)  # collector threads still running were abandoned: do not wait for them
    return int(code)


def quiet_progress(args: argparse.Namespace) -> bool:
    """Progress lines only for a person watching: stderr a terminal, or -v; never with -q."""
    if args.quiet:
        return True
    return not (is_terminal(sys.stderr) or getattr(args, "verbose", 0))


@contextlib.contextmanager
def interrupt_handlers():
    """While collecting, SIGINT, SIGTERM and SIGHUP (a dropped ssh session) stop the collection instead of
    killing it.

    The handler only kills the running tools (SIGKILL: the kernel then detaches their
    tracees) and stops new ones; the collection loop writes the manifest, marked
    interrupted, within about a second. A second signal is not needed and is ignored.
    Yields a list that receives the signal number.
    """
    caught: list[int] = []

    def handler(signum, frame) -> None:
        caught.append(signum)
        interrupt(signal.Signals(signum).name)

    old = {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    try:
        yield caught
    finally:
        for sig, previous in old.items():
            signal.signal(sig, previous)


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
    """The summary's lines through `emit`, the one output boundary: an error quoting a target's environment
    (NCCL_DEBUG_FILE with ESC or C1 bytes) reaches the terminal escaped."""
    lines = [f"bundle: {summary['bundle']}" + (f"  (archive {summary['archive']})" if summary["archive"] else ""),
             f"ranks collected: {summary['ranks']}"]
    if summary["missing_ranks"]:
        lines.append(f"ranks with no process: {summary['missing_ranks']}")
    lines.extend(f"problem: {line}" for line in summary["problems"])
    lines.extend(f"missing evidence: rank {f['rank']} ({f['host']} pid {f['pid']}) {f['collector']}: {f['status']}: "
                 f"{f['error']}" for f in summary["failures"])
    lines.append("next: forensics analyze " + summary["bundle"])
    emit("\n".join(lines))

"""The collector side of a fleet collection: runs on each host, answers on stdout.

    python -m forensics.fleet.remote --tag T --deadline 20 [--match-env K=V] [--native] [--gdb]

It collects this host's ranks into a private temp folder, streams the bundle as a
framed base64 tar.gz (fleet.wire) and deletes the folder. It leaves nothing behind:
a watchdog thread ends it at --deadline even if a tool hangs, and `--cleanup` (sent
by the fleet to hosts that timed out) ends a collector of the same tag still running.

A collection that runs late is not thrown away: shortly before --deadline the
watchdog sends what the bundle holds so far (its manifest is written as collection
goes) with status "partial", and the fleet files it as this host's evidence, marked late.

--match-env KEY=VALUE keeps only ranks whose environment holds KEY=VALUE: on a shared
node, the ranks of one job (SLURM_JOB_ID=1234, TORCHELASTIC_RUN_ID=...); in tests
where several "hosts" are one machine, the ranks that belong to the simulated host.
"""

from __future__ import annotations

import argparse
import io
import os
import shutil
import signal
import socket
import sys
import tarfile
import tempfile
import threading
import time
from pathlib import Path

from forensics.bundle.writer import BundleWriter
from forensics.collect.budget import HOST_BYTES, RANK_BYTES, TOTAL_BYTES
from forensics.collect.local import collect_local
from forensics.collectors.base import CollectOptions
from forensics.discover import procfs
from forensics.discover.ranks import is_rank_env
from forensics.errors import ForensicsError
from forensics.fleet import wire
from parsers.input.walk import walk_files

PID_DIR = Path(tempfile.gettempdir())


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m forensics.fleet.remote", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tag", required=True, help="collection id (letters, digits, '-', '_')")
    parser.add_argument("--deadline", type=float, default=20.0, help="hard limit for this whole host, seconds")
    parser.add_argument("--timeout", type=float, default=10.0, help="limit per collector per rank, seconds")
    parser.add_argument("--native", action="store_true")
    parser.add_argument("--gdb", action="store_true")
    parser.add_argument("--gdb-timeout", type=float, default=None,
                        help="limit for gdb per rank (default 60%% of --deadline)")
    parser.add_argument("--job", default=None, help="only ranks of this job (as collect --job)")
    parser.add_argument("--samples", type=int, default=0, help="py-spy stack samples per rank (as collect --samples)")
    parser.add_argument("--sample-interval", type=float, default=0.1, help="seconds between samples")
    parser.add_argument("--second-look", type=float, default=3.0,
                        help="seconds between two looks (as collect --second-look)")
    parser.add_argument("--match-env", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--max-mib", type=int, default=TOTAL_BYTES >> 20, help="as collect --max-mib")
    parser.add_argument("--rank-max-mib", type=int, default=RANK_BYTES >> 20, help="as collect --rank-max-mib")
    parser.add_argument("--host-max-mib", type=int, default=HOST_BYTES >> 20, help="as collect --host-max-mib")
    parser.add_argument("--cleanup", action="store_true", help="end a collector of this tag still running here")
    args = parser.parse_args(argv)
    if not args.tag.replace("-", "").replace("_", "").isalnum():
        parser.error(f"--tag {args.tag!r}: letters, digits, '-', '_' only")
    return args


def pid_file(tag: str) -> Path:
    return PID_DIR / f"forensics-fleet-{tag}.pid"


def matching_pids(match_env: list[str]) -> list[int]:
    """Pids of the rank processes whose environment holds every KEY=VALUE (all ranks when none given).

    Scans /proc itself, skipping any process whose environment cannot be read (kernel
    threads answer ESRCH, other users' processes EACCES), so one odd pid never stops
    the collection; collect_local then drops data-loader children of the same rank.
    """
    wanted = [item.partition("=")[::2] for item in match_env]
    pids = []
    for pid in procfs.all_pids():
        try:
            env = procfs.read_environ(pid)
        except (procfs.ProcessGone, OSError):
            continue
        if is_rank_env(env) and all(env.get(k) == v for k, v in wanted):
            pids.append(pid)
    return pids


def collect_archive(args: argparse.Namespace, work: Path,
                    answer: "AnswerOnce | None" = None) -> tuple[dict, bytes | None]:
    """Collect into work/bundle; return (header, tar.gz bytes or None when no rank was found)."""
    header = {"host": socket.gethostname().split(".", 1)[0], "pid": os.getpid(), "status": "ok", "error": None}
    gdb_timeout = args.gdb_timeout if args.gdb_timeout is not None else max(1.0, args.deadline * 0.6)
    options = CollectOptions(timeout=min(args.timeout, max(1.0, args.deadline * 0.6)), native=args.native, gdb=args.gdb,
                             samples=max(0, args.samples), sample_interval=max(0.0, args.sample_interval),
                             second_look=max(0.0, min(60.0, args.second_look)),
                             extra={"gdb_timeout": gdb_timeout}, total_bytes=_mib(args.max_mib),
                             rank_bytes=_mib(args.rank_max_mib), host_bytes=_mib(args.host_max_mib))
    pids = matching_pids(args.match_env)
    if not pids:
        wanted = f" with {' '.join(args.match_env)}" if args.match_env else ""
        header.update(status="no-ranks", error=f"no rank process{wanted} (RANK and WORLD_SIZE in its environment)")
        return header, None
    bundle = work / "bundle"
    writer = BundleWriter(bundle, command=list(sys.argv))
    if answer is not None:
        answer.writer = writer
    try:
        result = collect_local(bundle, options, pids=pids, quiet=True, job=args.job, writer=writer)
    except ForensicsError as err:
        header.update(status="no-ranks", error=str(err))
        return header, None
    header["ranks"] = len(result.writer.manifest.ranks)
    header["problems"] = result.problems
    return header, pack(bundle)


def _mib(value: int) -> int:
    """A byte cap given in MiB, in bytes, held to collect's range (1 MiB to 2^30 MiB)."""
    return max(1, min(int(value), 1 << 30)) << 20


def pack(bundle: Path) -> bytes:
    """tar.gz of a bundle folder, file by file: a file still being written is taken as far as it
    got, and one that vanished or shrank mid-read is left out (a late bundle is read while it grows).

    GNU format, not tarfile's default PAX: PAX gives every member an extra header (its float
    mtime) that the orchestrator parses and checks too; at thousands of hosts reading those
    headers was a third of the time spent unpacking answers. Long names still fit (GNU longname)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz", format=tarfile.GNU_FORMAT) as tar:
        tar.add(bundle, arcname="bundle", recursive=False)
        for path in walk_files(bundle, folders=True):  # iterative, bounded depth, no link followed
            arc = "bundle/" + path.relative_to(bundle).as_posix()
            try:
                if path.is_symlink():
                    continue
                if path.is_dir():
                    tar.add(path, arcname=arc, recursive=False)
                elif path.is_file():
                    data = path.read_bytes()
                    info = tar.gettarinfo(str(path), arcname=arc)
                    info.size = len(data)
                    tar.addfile(info, io.BytesIO(data))
            except OSError:
                continue
    return buffer.getvalue()


class AnswerOnce:
    """Sends this host's one answer, from the collection or from the watchdog, whichever is first."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.sent = False
        self.writer: BundleWriter | None = None  #: the bundle being written, for a partial answer

    def send(self, header: dict, archive: bytes | None) -> bool:
        with self._lock:
            if self.sent:
                return False
            out = sys.stdout
            for line in wire.encode(header, archive):
                out.write(line + "\n")
            out.flush()
            self.sent = True
            return True


def late_margin(deadline: float) -> float:
    """Seconds before the deadline at which a late collection sends what it has."""
    return min(3.0, deadline * 0.3)


def _watchdog(deadline: float, work: Path, tag: str, answer: AnswerOnce | None = None) -> None:
    """Shortly before the deadline: send the partial bundle; at the deadline: remove what we wrote and exit."""
    start = time.monotonic()
    time.sleep(max(0.0, deadline - late_margin(deadline)))
    if answer is not None:
        try:
            bundle = work / "bundle"
            if answer.writer is not None and not answer.sent:
                answer.writer.snapshot(f"partial: collection cut at its {deadline:g} s deadline")
            archive = pack(bundle) if (bundle / "manifest.json").is_file() else None
            header = {"host": socket.gethostname().split(".", 1)[0], "pid": os.getpid(), "status": "partial",
                      "error": f"collection still running at its {deadline:g} s deadline: partial evidence"}
            answer.send(header, archive)
        except Exception:  # the watchdog must reach the exit below whatever happens
            pass
    time.sleep(max(0.0, deadline - (time.monotonic() - start)))
    shutil.rmtree(work, ignore_errors=True)
    pid_file(tag).unlink(missing_ok=True)
    os._exit(3)


def _same_tag(pid: int, tag: str) -> bool:
    """True when pid is a fleet collector started with exactly this --tag (never anything else)."""
    try:
        cmdline = procfs.read_cmdline(pid)
    except Exception:  # gone or unreadable: not ours to end
        return False
    if "forensics.fleet.remote" not in cmdline or "--cleanup" in cmdline:
        return False
    return any(a == "--tag" and b == tag for a, b in zip(cmdline, cmdline[1:]))


def cleanup(tag: str) -> int:
    """End the collector(s) of `tag` on this host (each leads its own process group) and remove their files.

    Found by the pid file, and by /proc for a collector that had not written it yet;
    only processes whose command line carries this exact tag are touched.
    """
    pids = set()
    try:
        pids.add(int(pid_file(tag).read_text().split()[0]))
    except (OSError, ValueError, IndexError):
        pass
    pids.update(procfs.all_pids())
    for pid in sorted(pids):
        if pid != os.getpid() and _same_tag(pid, tag):
            for kill in (os.killpg, os.kill):
                try:
                    kill(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
    pid_file(tag).unlink(missing_ok=True)
    for stale in PID_DIR.glob(f"forensics-fleet-{tag}-*"):
        shutil.rmtree(stale, ignore_errors=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.cleanup:
        return cleanup(args.tag)
    try:
        os.setsid()  # own process group, so --cleanup can end us and every tool we started
    except OSError:
        pass
    work = Path(tempfile.mkdtemp(prefix=f"forensics-fleet-{args.tag}-"))
    pid_file(args.tag).write_text(f"{os.getpid()}\n")
    answer = AnswerOnce()
    threading.Thread(target=_watchdog, args=(args.deadline, work, args.tag, answer), daemon=True).start()
    try:
        try:
            header, archive = collect_archive(args, work, answer)
        except Exception as err:  # report any failure as an answer: the fleet records it for this host
            header = {"host": socket.gethostname().split(".", 1)[0], "status": "failed",
                      "error": f"{type(err).__name__}: {err}"}
            archive = None
        answer.send(header, archive)
    finally:
        shutil.rmtree(work, ignore_errors=True)
        pid_file(args.tag).unlink(missing_ok=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

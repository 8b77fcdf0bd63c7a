"""Judging and filing each host's answer as it arrives: on one thread, or in worker processes.

Filing a host (decode the wire answer, check and unpack its hostile archive into
hosts/<host>/ of the job bundle, read its manifest) is ~1.7 ms of Python a host, so one
thread files ~600 hosts a second while competing for the GIL with ClusterShell's event
loops, which start the ssh clients. On a machine with cores to spare it can instead run in
small worker processes started before the fan-out (`python -m forensics.fleet.filing`: a
fresh interpreter that imports only this, never the caller's __main__), each fed one host
at a time over a pipe by a thread of the orchestrator, which only hands over the answer's
lines (JSON) and rebuilds the filed manifest it gets back (validated again:
manifest_from_dict). Which one: forensics.fleet.collect.filing_workers (on 2 cores, the
thread: measured no slower, and ~2.5 s less CPU at 4,096 hosts).

Safety is the same as on a thread, since the same judge() runs there: parsers.input.archive's
rules, a bad archive is that host's clear error. A worker that dies mid-host (killed,
out of memory) loses nothing already filed: that host's half-written folder is removed,
a fresh worker is started and the host filed once more; if that worker dies too, the
host is marked failed with why, and the others go on. When no worker can be started,
filing falls back to a thread of the orchestrator.
"""

from __future__ import annotations

import dataclasses
import io
import json
import os
import queue
import shutil
import signal
import subprocess
import sys
import tarfile
import threading
import time
from concurrent.futures import Future
from pathlib import Path

import forensics
from parsers.input.archive import ArchiveRefused, Limits, extract_stream
from parsers.input.errors import InputError
from forensics.bundle.encode import to_json
from parsers.model.manifest import Manifest, manifest_from_dict
from parsers.gather.source import read_manifest_file
from forensics.bundle.merge import HOST_MANIFEST, MAX_FILE_BYTES, MAX_FILES_PER_HOST, HostPart, host_root, place_name
from forensics.fleet import outcome, wire
from forensics.fleet.outcome import MAX_ANSWER_CHARS, HostRun
from forensics.fleet.wire import WireError

#: what one host's archive may hold: the merge's own caps per host, parsers.input.archive's rules for the rest
HOST_ARCHIVE_LIMITS = Limits(max_members=MAX_FILES_PER_HOST, max_member_bytes=MAX_FILE_BYTES)
#: characters of one worker reply read at most (its host's manifest; the reader caps manifests at 512 MB)
MAX_REPLY_CHARS = 512 * 1024 * 1024


def judge(run: HostRun, host_timeout: float, out: Path) -> HostPart:
    """Turn one host's raw run into a HostPart: its evidence filed under hosts/<host>/ of the job
    bundle `out`, or the reason there is none. Called as each host finishes, while others still run."""
    part = HostPart(host=run.host, seconds=run.seconds)
    if run.dropped:
        part.status, part.error = outcome.FAILED, (f"host {run.host} sent more than {MAX_ANSWER_CHARS} characters: "
                                                   "answer refused")
        return part
    if run.timed_out:
        try:  # a late host may have sent its partial answer before the connection was cut
            answer = wire.decode(run.stdout)
        except wire.WireError:
            part.status, part.error = outcome.TIMEOUT, f"host {run.host} did not answer in {host_timeout:g} s"
            return part
        if answer.header.get("status") != "partial":
            answer.header.update(status="partial", error=f"its connection was still open at {host_timeout:g} s")
        return _partial(part, answer, run, out)
    try:
        answer = wire.decode(run.stdout)
    except wire.WireError as err:
        detail = run.stderr_tail() or f"exit code {run.returncode}"
        if run.returncode == 255:  # ssh's own failure: could not connect or authenticate
            part.status, part.error = outcome.UNREACHABLE, f"host {run.host} unreachable: {detail}"
        else:
            part.status, part.error = outcome.FAILED, f"host {run.host}: {err}; {detail}"
        return part
    status = answer.header.get("status")
    if status == "partial":  # ran late: keep what it had, marked as such
        return _partial(part, answer, run, out)
    if answer.archive is None:
        part.status = outcome.EMPTY if status == "no-ranks" else outcome.FAILED
        part.error = f"host {run.host}: {answer.header.get('error') or 'sent no bundle'}"
        return part
    refused = _place(part, answer.archive, out)
    if refused is not None:
        part.status, part.error = outcome.FAILED, f"host {run.host}: damaged bundle archive ({refused})"
    return part


def _partial(part: HostPart, answer, run: HostRun, out: Path) -> HostPart:
    """A host that ran late: its partial bundle kept, the host marked 'timeout' with why."""
    part.status = outcome.TIMEOUT
    part.error = f"host {run.host} answered late: {answer.header.get('error') or 'partial evidence'}"
    refused = _place(part, answer.archive, out) if answer.archive is not None else None
    if refused is not None:
        part.error += f"; its partial bundle was damaged ({refused})"
    return part


def _place(part: HostPart, archive: bytes, out: Path) -> Exception | None:
    """File `archive` as `part`'s host bundle (place_archive); the refusal, or None once it is in place."""
    try:
        part.placed = place_archive(archive, out, part.host)
    except (ArchiveRefused, InputError, OSError) as err:
        return err
    part.bundle = out / host_root(part.host)
    return None


def place_archive(archive: bytes, out: Path, host: str) -> Manifest:
    """Extract a host's bundle archive once, straight into hosts/<host>/ of the job bundle `out`; its manifest.

    The archive is hostile: parsers.input.archive's rules apply to every member (regular files
    and folders only, no links, no absolute or '..' names, bounded count, sizes and
    expansion ratio), every file must lie under the archive's 'bundle/' folder, and each
    lands at its rebased name (forensics.bundle.merge.place_name), which cannot leave
    hosts/<host>/. On any refusal the host's folder is removed: nothing half-filed stays.
    """
    root = host_root(host)
    dest = out / root
    if dest.exists():  # a host is filed once; a leftover folder would mix two collections
        raise ArchiveRefused(f"{root} already exists in {out}")

    def place(member: tarfile.TarInfo) -> str | None:
        name = member.name.rstrip("/")
        if name == "bundle" and member.isdir():
            return None
        if not name.startswith("bundle/"):
            raise ArchiveRefused(f"unsafe archive entry {member.name!r}: outside the archive's 'bundle/' folder")
        if member.isdir():
            return None  # folders come with the files in them; an empty one is no evidence
        target = place_name(name[len("bundle/"):], root)
        return target if target.startswith(root + "/") and target != f"{root}/" else None

    try:
        archive_io = io.BytesIO(archive)
        extract_stream(archive_io, len(archive), out, HOST_ARCHIVE_LIMITS, place)
        manifest_file = dest / HOST_MANIFEST
        if not manifest_file.is_file():
            raise ArchiveRefused("archive holds no bundle manifest ('bundle/manifest.json')")
        return read_manifest_file(manifest_file)
    except BaseException:
        shutil.rmtree(dest, ignore_errors=True)
        raise


def judge_safely(run: HostRun, host_timeout: float, out: Path) -> HostPart:
    """judge(), with any unforeseen error filed as this host's failure: one host never loses the others."""
    try:
        return judge(run, host_timeout, out)
    except Exception as err:  # noqa: BLE001 - recorded on the host, not swallowed
        return unfiled(run, f"{type(err).__name__}: {err}")


def unfiled(run: HostRun, why: str) -> HostPart:
    """The part of a host whose answer could not be filed at all, and why."""
    return HostPart(host=run.host, seconds=run.seconds, status=outcome.FAILED,
                    error=f"host {run.host}: its answer could not be filed ({why})")


# --- worker processes -------------------------------------------------------------------------

def _run_to_json(run: HostRun) -> str:
    """One request line: everything judge() reads of a HostRun."""
    return json.dumps({"host": run.host, "stdout": run.stdout, "stderr": run.stderr, "kept": run.kept,
                       "returncode": run.returncode,
                       "seconds": run.seconds, "timed_out": run.timed_out, "dropped": run.dropped}) + "\n"


def _part_to_json(part: HostPart) -> str:
    """One reply line: the judged part, its filed manifest as plain data."""
    return to_json({"host": part.host, "status": part.status, "error": part.error, "seconds": part.seconds,
                    "bundle": part.bundle is not None, "manifest": part.placed}) + "\n"


def _part_from_json(line: str, run: HostRun, out: Path) -> HostPart:
    """The HostPart a worker sent back for `run` (raises ValueError when the reply is not one)."""
    data = json.loads(line)
    if not isinstance(data, dict) or data.get("host") != run.host:
        raise WireError("reply for another host")
    part = HostPart(host=run.host, seconds=run.seconds, status=str(data["status"]), error=data.get("error"))
    if data.get("bundle"):
        part.bundle = out / host_root(run.host)
    if data.get("manifest") is not None:
        part.placed = manifest_from_dict(data["manifest"])
    return part


def worker_main(argv: list[str]) -> int:
    """`python -m forensics.fleet.filing OUT HOST_TIMEOUT`: judge each run read from stdin, one JSON line each,
    reply on stdout."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the orchestrator's to handle: it ends us by closing stdin
    out, host_timeout = Path(argv[0]), float(argv[1])
    reply = sys.stdout
    for line in sys.stdin:
        data = json.loads(line)
        run = HostRun(host=data["host"], stdout=data["stdout"], stderr=data["stderr"], kept=data["kept"],
                      returncode=data["returncode"], seconds=data["seconds"], timed_out=data["timed_out"],
                      dropped=data["dropped"])
        reply.write(_part_to_json(judge_safely(run, host_timeout, out)))
        reply.flush()
    return 0


class _Worker:
    """One filing process and its pipes."""

    def __init__(self, out: Path, host_timeout: float) -> None:
        # the same code as this process, wherever it came from
        root = str(Path(forensics.__file__).resolve().parents[1])
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([root, *filter(None, [os.environ.get("PYTHONPATH")])]))
        self.proc = subprocess.Popen([sys.executable, "-m", "forensics.fleet.filing", str(out), repr(host_timeout)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, text=True,
                                     encoding="utf-8")
        self.cpu_s, self.peak_rss_kb = 0.0, 0  #: its CPU seconds and peak RSS, known once it has ended (os.wait4)

    def file(self, run: HostRun, out: Path) -> HostPart:
        """Send `run`, wait for its part; raises OSError/ValueError when the worker is gone or garbled."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(_run_to_json(run))
        self.proc.stdin.flush()
        line = self.proc.stdout.readline(MAX_REPLY_CHARS)
        if not line.endswith("\n"):
            raise OSError("the filing process ended")
        return _part_from_json(line, run, out)

    def stop(self, kill: bool = False) -> int | None:
        """End the worker (closing its stdin ends its loop); its exit code. Its CPU time goes to self.cpu_s."""
        for pipe in (self.proc.stdin, self.proc.stdout):
            try:
                if pipe is not None:
                    pipe.close()
            except OSError:
                pass
        if self.proc.returncode is not None:  # already reaped
            return self.proc.returncode
        for waited in range(3001):  # up to 30 s, then killed: an idle worker ends at once on EOF
            if kill or waited == 3000:
                # not Popen.kill: its poll() would reap it before wait4 reads its usage
                os.kill(self.proc.pid, signal.SIGKILL)
                kill = False
            try:
                pid, status, usage = os.wait4(self.proc.pid, 0 if waited == 3000 else os.WNOHANG)
            except ChildProcessError:  # reaped elsewhere: no usage to read
                return self.proc.poll()
            if pid:
                self.proc.returncode = os.waitstatus_to_exitcode(status)
                self.cpu_s, self.peak_rss_kb = usage.ru_utime + usage.ru_stime, usage.ru_maxrss
                return self.proc.returncode
            time.sleep(0.01)
        return self.proc.returncode


class Filing:
    """Judges and files each host's answer as the host finishes, so extraction overlaps the wait
    for slower hosts: in `workers` processes (see the module doc), or on one thread when
    `workers` is 0 or none can be started. Each answer's text is dropped once handed over, so
    memory stays bounded by the hosts in flight and queued, not the fleet."""

    def __init__(self, host_timeout: float, out: Path, workers: int) -> None:
        self.host_timeout, self.out = host_timeout, out
        self.given: dict[str, Future] = {}
        #: CPU seconds of the filing processes that have ended (the orchestrator's, not its own process's)
        self.cpu_s = 0.0
        self.peak_rss_kb = 0  #: the largest peak RSS among them
        self._cpu_lock = threading.Lock()
        self.jobs: queue.SimpleQueue = queue.SimpleQueue()
        self.threads: list[threading.Thread] = []
        started: list[_Worker] = []
        try:
            started = [_Worker(out, host_timeout) for _ in range(workers)]
        except OSError:  # no interpreter to start: file here
            for worker in started:
                worker.stop(kill=True)
            started = []
        for worker in started or [None]:
            thread = threading.Thread(target=self._serve, args=(worker,), daemon=True, name="forensics-fleet-filing")
            thread.start()
            self.threads.append(thread)
        self.workers = len(started)
        self.started = started  #: the processes first started (one may since have been replaced)

    def give(self, run: HostRun) -> None:
        if run.host in self.given:  # a host is reported once; a second report changes nothing
            return
        future: Future = Future()
        self.given[run.host] = future
        self.jobs.put((dataclasses.replace(run), future))
        run.stdout = []  # the copy handed over keeps the lines until they are filed

    def _serve(self, worker: _Worker | None) -> None:
        while (job := self.jobs.get()) is not None:
            run, future = job
            try:
                if worker is None:
                    part = judge_safely(run, self.host_timeout, self.out)
                else:
                    worker, part = self._file_in(worker, run)
            except BaseException as err:  # noqa: BLE001 - a host's failure, never the run's
                part = unfiled(run, f"{type(err).__name__}: {err}")
            run.stdout = []
            future.set_result(part)
        if worker is not None:
            worker.stop()
            self._count(worker)

    def _count(self, worker: _Worker) -> None:
        with self._cpu_lock:
            self.cpu_s += worker.cpu_s
            self.peak_rss_kb = max(self.peak_rss_kb, worker.peak_rss_kb)

    def _file_in(self, worker: _Worker, run: HostRun) -> tuple[_Worker | None, HostPart]:
        """File `run` in `worker`; when it dies, clean the host's folder and try once more in a fresh one."""
        why = ""
        for _ in range(2):
            try:
                return worker, worker.file(run, self.out)
            except (OSError, ValueError, KeyError, TypeError) as err:
                code = worker.stop(kill=True)
                self._count(worker)
                why = f"{err}" if code is None else f"{err}; exit code {code}"
                shutil.rmtree(self.out / host_root(run.host), ignore_errors=True)  # nothing half-filed stays
                try:
                    worker = _Worker(self.out, self.host_timeout)
                except OSError:
                    return None, judge_safely(run, self.host_timeout, self.out)  # no fresh worker: file it here
        return worker, unfiled(run, f"the filing process died twice: {why}")

    def finish(self) -> dict[str, HostPart]:
        """Every part judged so far (a failure is the host's status, never an exception)."""
        for _ in self.threads:
            self.jobs.put(None)
        for thread in self.threads:
            thread.join()
        return {host: future.result() for host, future in self.given.items()}


if __name__ == "__main__":
    sys.exit(worker_main(sys.argv[1:]))

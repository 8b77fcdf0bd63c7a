"""Fleet collection end to end: run the collector on every host, judge each answer, merge.

A host is never waited on past its time limit, and every host ends up in the job
bundle: with its evidence, or with a record saying why there is none
("127.0.0.9 did not answer in 20 s"), which is itself evidence of a dead or wedged node.
"""

from __future__ import annotations

import dataclasses
import io
import secrets
import shutil
import sys
import tarfile
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from parsers.archive import ArchiveRefused, Limits, extract_stream
from parsers.errors import InputError
from parsers.model.manifest import Manifest
from parsers.source import read_manifest_file
from forensics.bundle.merge import HOST_MANIFEST, MAX_FILE_BYTES, MAX_FILES_PER_HOST, HostPart, host_root, merge_bundles, place_name
from forensics.collect.progress import Progress
from forensics.errors import ForensicsError
from forensics.fleet import command as cmd
from forensics.fleet import outcome, wire
from forensics.fleet.outcome import MAX_ANSWER_CHARS, HostRun
from forensics.fleet.hosts import fold
from forensics.fleet.transport import run_ssh

TICK = 2.0  #: seconds between 'waiting on' lines
#: what one host's archive may hold: the merge's own caps per host, parsers.archive's rules for the rest
HOST_ARCHIVE_LIMITS = Limits(max_members=MAX_FILES_PER_HOST, max_member_bytes=MAX_FILE_BYTES)

Runner = Callable[[list[str], list[str], float, Callable[[HostRun], None]], dict[str, HostRun]]


@dataclass
class FleetResult:
    """The merged bundle and how each host fared."""

    out: Path
    manifest: Manifest
    parts: list[HostPart] = field(default_factory=list)
    seconds: float = 0.0
    #: where the time went: 'answers' (until the last host answered or timed out), 'filed' (until every
    #: answer was extracted into the bundle, most of it while others were still arriving), 'merged'
    phases: dict[str, float] = field(default_factory=dict)

    @property
    def complete(self) -> bool:
        return self.manifest.complete

    @property
    def answered(self) -> list[HostPart]:
        """Hosts that sent evidence (complete or partial)."""
        return [p for p in self.parts if p.bundle is not None]

    def summary(self) -> dict:
        return {
            "bundle": str(self.out),
            "seconds": self.seconds,
            "hosts": {p.host: {"status": p.status, "error": p.error, "seconds": p.seconds,
                               "evidence": "partial" if p.bundle is not None and p.status != outcome.OK
                               else "complete" if p.bundle is not None else "none"} for p in self.parts},
            "host_groups": folded_hosts(self.parts),
            "hosts_answered": len(self.answered),
            "ranks": len(self.manifest.ranks),
            "missing_ranks": [m.rank for m in self.manifest.missing],
            "complete": self.complete,
        }


def host_result(part: HostPart) -> str:
    """What happened on one host, as the line hosts are folded on: the status and the
    error with the host's own name taken out, so that 500 'unreachable: Connection
    refused' hosts share one line, as `clush -b` gathers identical outputs."""
    text = part.status
    if part.bundle is not None and part.status != outcome.OK:
        text += " (partial evidence kept)"
    if part.error:
        detail = part.error
        for prefix in (f"host {part.host}: ", f"host {part.host} "):
            if detail.startswith(prefix):
                detail = detail[len(prefix):]
                break
        detail = detail.replace(part.host, "HOST")
        if detail.startswith(part.status + ": "):
            detail = detail[len(part.status) + 2:]
        text += f": {detail}"
    return text


def folded_hosts(parts: list[HostPart]) -> list[dict]:
    """[{'hosts': 'node[001-511]', 'count': 511, 'result': 'ok'}, ...]: hosts with the same result
    on one NodeSet line, most hosts first."""
    groups: dict[str, list[str]] = {}
    for part in parts:
        groups.setdefault(host_result(part), []).append(part.host)
    rows = [{"hosts": fold(names), "count": len(names), "result": result} for result, names in groups.items()]
    return sorted(rows, key=lambda r: (-r["count"], r["result"]))


def new_tag() -> str:
    """A collection id, unique enough to name remote temp files and to find them again for cleanup."""
    return time.strftime("%Y%m%d%H%M%S") + "-" + secrets.token_hex(4)


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
    try:
        part.placed = place_archive(answer.archive, out, run.host)
        part.bundle = out / host_root(run.host)
    except (ArchiveRefused, InputError, OSError) as err:
        part.status, part.error = outcome.FAILED, f"host {run.host}: damaged bundle archive ({err})"
    return part


def _partial(part: HostPart, answer, run: HostRun, out: Path) -> HostPart:
    """A host that ran late: its partial bundle kept, the host marked 'timeout' with why."""
    part.status = outcome.TIMEOUT
    part.error = f"host {run.host} answered late: {answer.header.get('error') or 'partial evidence'}"
    if answer.archive is None:
        return part
    try:
        part.placed = place_archive(answer.archive, out, run.host)
        part.bundle = out / host_root(run.host)
    except (ArchiveRefused, InputError, OSError) as err:
        part.error += f"; its partial bundle was damaged ({err})"
    return part


def place_archive(archive: bytes, out: Path, host: str) -> Manifest:
    """Extract a host's bundle archive once, straight into hosts/<host>/ of the job bundle `out`; its manifest.

    The archive is hostile: parsers.archive's rules apply to every member (regular files
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


def ssh_runner(ssh_options: list[str], fanout: int, ssh_path: str = "ssh", topology: Path | None = None) -> Runner:
    """A Runner over ssh/ClusterShell with these options (through the gateways of `topology` when given)."""

    def run(hosts: list[str], argv: list[str], timeout: float, on_done: Callable[[HostRun], None]) -> dict[str, HostRun]:
        return run_ssh(hosts, lambda host: cmd.shell_command(cmd.for_host(argv, host)), ssh_options, fanout, timeout, on_done,
                       ssh_path, topology)

    return run


def prepare_out(out: Path) -> None:
    """Create the job bundle folder that answers are filed into as they arrive; refuse one that already
    holds host evidence (two collections must not mix, and a host's folder is written once)."""
    hosts_dir = out / "hosts"
    if hosts_dir.is_dir() and any(hosts_dir.iterdir()):
        raise ForensicsError(f"{out} already holds host evidence ({hosts_dir}): pass a new -o folder")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise ForensicsError(f"cannot write the bundle at {out}: {err.strerror or err}") from err


def judge_safely(run: HostRun, host_timeout: float, out: Path) -> HostPart:
    """judge(), with any unforeseen error filed as this host's failure: one host never loses the others."""
    try:
        return judge(run, host_timeout, out)
    except Exception as err:  # noqa: BLE001 - recorded on the host, not swallowed
        return HostPart(host=run.host, seconds=run.seconds, status=outcome.FAILED,
                        error=f"host {run.host}: its answer could not be filed ({type(err).__name__}: {err})")


class _Judges:
    """Judges and files each host's answer on one thread as the host finishes, so extraction
    overlaps the wait for slower hosts. Each answer's text is dropped once handed over, so
    memory stays bounded by the hosts in flight, not the fleet.

    One thread, not processes: measured at 2,048 hosts on 2 cores, spawned worker processes
    were slower (33.6 s against 23.9 s), and a spawned worker re-imports the caller's
    __main__, which an embedding script may not guard.
    """

    def __init__(self, host_timeout: float, out: Path) -> None:
        self.host_timeout, self.out = host_timeout, out
        self.given: dict[str, Future] = {}
        self.pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="forensics-fleet-judge")

    def give(self, run: HostRun) -> None:
        if run.host in self.given:  # a host is reported once; a second report changes nothing
            return
        self.given[run.host] = self.pool.submit(self._judge, dataclasses.replace(run))
        run.stdout = []  # the copy handed over keeps the lines until they are filed

    def _judge(self, run: HostRun) -> HostPart:
        try:
            return judge_safely(run, self.host_timeout, self.out)
        finally:
            run.stdout = []

    def finish(self) -> dict[str, HostPart]:
        """Every part judged so far (judge_safely never raises: a failure is the host's status)."""
        self.pool.shutdown(wait=True)
        return {host: future.result() for host, future in self.given.items()}


def collect_fleet(
    hosts: list[str],
    out: Path,
    spec: cmd.RemoteSpec,
    runner: Runner,
    host_timeout: float,
    quiet: bool = False,
    cleanup: bool = True,
) -> FleetResult:
    """Collect every host with `runner`, merge into `out`. Hosts that time out get a cleanup pass."""
    start = time.monotonic()
    spec.deadline = max(1.0, host_timeout - min(2.0, host_timeout * 0.2))
    progress = Progress(len(hosts), "hosts", quiet)
    progress.say(f"collecting {len(hosts)} host(s), up to {host_timeout:g} s each, into {out}")

    prepare_out(out)
    pending = set(hosts)
    finished = threading.Event()
    judges = _Judges(host_timeout, out)

    def on_done(run: HostRun) -> None:
        pending.discard(run.host)
        state = "timed out" if run.timed_out else ("answered" if run.returncode == 0 else f"exit {run.returncode}")
        progress.step(f"{run.host}: {state} ({run.seconds:.1f} s)")
        judges.give(run)

    def ticker() -> None:
        """Every few seconds, name the hosts still being waited on (the live part of the display)."""
        while not finished.wait(TICK):
            waiting = sorted(pending)
            if waiting:
                progress.say(f"... {time.monotonic() - start:5.1f}s: waiting on {len(waiting)} host(s): {fold(waiting)}")

    if not quiet:
        threading.Thread(target=ticker, daemon=True, name="forensics-fleet-progress").start()
    phases: dict[str, float] = {}
    try:
        runs = runner(hosts, cmd.remote_argv(spec), host_timeout, on_done)
    finally:
        finished.set()
        phases["answers"] = round(time.monotonic() - start, 3)
        parts_by_host = judges.finish()
    parts = [parts_by_host.get(h) or judge_safely(runs[h], host_timeout, out) for h in hosts]
    phases["filed"] = round(time.monotonic() - start, 3)
    stuck = [p.host for p in parts if p.status == outcome.TIMEOUT]
    if stuck and cleanup:
        progress.say(f"ending the collector on {len(stuck)} host(s) that timed out")
        runner(stuck, cmd.cleanup_argv(spec), min(5.0, host_timeout), lambda run: None)
    manifest = merge_bundles(out, parts, command=list(sys.argv))
    result = FleetResult(out=out, manifest=manifest, parts=parts, seconds=round(time.monotonic() - start, 3), phases=phases)
    phases["merged"] = result.seconds
    bad = [p for p in parts if p.status != outcome.OK]
    progress.say(f"merged {len(manifest.ranks)} rank(s) from {len(parts) - len(bad)}/{len(parts)} host(s) in {result.seconds:.1f} s")
    for p in bad:
        progress.say(f"  {p.status}: {p.error}")
    return result

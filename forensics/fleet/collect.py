"""Fleet collection end to end: run the collector on every host, judge each answer, merge.

A host is never waited on past its time limit, and every host ends up in the job
bundle: with its evidence, or with a record saying why there is none
("127.0.0.9 did not answer in 20 s"), which is itself evidence of a dead or wedged node.
"""

from __future__ import annotations

import io
import secrets
import shutil
import sys
import tarfile
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from parsers.model.manifest import Manifest
from forensics.bundle.merge import HostPart, merge_bundles
from forensics.collect.progress import Progress
from forensics.fleet import command as cmd
from forensics.fleet import outcome, wire
from forensics.fleet.outcome import HostRun
from forensics.fleet.hosts import fold
from forensics.fleet.transport import run_ssh

TICK = 2.0  #: seconds between 'waiting on' lines

Runner = Callable[[list[str], list[str], float, Callable[[HostRun], None]], dict[str, HostRun]]


@dataclass
class FleetResult:
    """The merged bundle and how each host fared."""

    out: Path
    manifest: Manifest
    parts: list[HostPart] = field(default_factory=list)
    seconds: float = 0.0

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


def judge(run: HostRun, host_timeout: float, work: Path) -> HostPart:
    """Turn one host's raw run into a HostPart: its extracted bundle, or the reason there is none."""
    part = HostPart(host=run.host, seconds=run.seconds)
    if run.timed_out:
        try:  # a late host may have sent its partial answer before the connection was cut
            answer = wire.decode(run.stdout)
        except wire.WireError:
            part.status, part.error = outcome.TIMEOUT, f"host {run.host} did not answer in {host_timeout:g} s"
            return part
        if answer.header.get("status") != "partial":
            answer.header.update(status="partial", error=f"its connection was still open at {host_timeout:g} s")
        return _partial(part, answer, run, work)
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
        return _partial(part, answer, run, work)
    if answer.archive is None:
        part.status = outcome.EMPTY if status == "no-ranks" else outcome.FAILED
        part.error = f"host {run.host}: {answer.header.get('error') or 'sent no bundle'}"
        return part
    try:
        part.bundle = extract(answer.archive, work / f"host-{len(list(work.iterdir()))}")
    except (tarfile.TarError, OSError, ValueError) as err:
        part.status, part.error = outcome.FAILED, f"host {run.host}: damaged bundle archive ({err})"
    return part


def _partial(part: HostPart, answer, run: HostRun, work: Path) -> HostPart:
    """A host that ran late: its partial bundle kept, the host marked 'timeout' with why."""
    part.status = outcome.TIMEOUT
    part.error = f"host {run.host} answered late: {answer.header.get('error') or 'partial evidence'}"
    if answer.archive is None:
        return part
    try:
        part.bundle = extract(answer.archive, work / f"host-{len(list(work.iterdir()))}")
    except (tarfile.TarError, OSError, ValueError) as err:
        part.error += f"; its partial bundle was damaged ({err})"
    return part


def extract(archive: bytes, dest: Path) -> Path:
    """Unpack a host's archive into dest, refusing links, devices and paths that leave dest."""
    dest.mkdir(parents=True)
    with tarfile.open(fileobj=io.BytesIO(archive), mode="r:gz") as tar:
        members = []
        for member in tar.getmembers():
            parts = Path(member.name).parts
            if member.name.startswith("/") or ".." in parts or not (member.isfile() or member.isdir()):
                raise ValueError(f"unsafe archive entry {member.name!r}")
            members.append(member)
        tar.extractall(dest, members=members)  # noqa: S202 - every member checked above
    bundle = dest / "bundle"
    if not bundle.is_dir():
        raise ValueError("archive holds no 'bundle' folder")
    return bundle


def ssh_runner(ssh_options: list[str], fanout: int, ssh_path: str = "ssh") -> Runner:
    """A Runner over ssh/ClusterShell with these options."""

    def run(hosts: list[str], argv: list[str], timeout: float, on_done: Callable[[HostRun], None]) -> dict[str, HostRun]:
        return run_ssh(hosts, lambda host: cmd.shell_command(cmd.for_host(argv, host)), ssh_options, fanout, timeout, on_done, ssh_path)

    return run


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

    pending = set(hosts)
    finished = threading.Event()

    def on_done(run: HostRun) -> None:
        pending.discard(run.host)
        state = "timed out" if run.timed_out else ("answered" if run.returncode == 0 else f"exit {run.returncode}")
        progress.step(f"{run.host}: {state} ({run.seconds:.1f} s)")

    def ticker() -> None:
        """Every few seconds, name the hosts still being waited on (the live part of the display)."""
        while not finished.wait(TICK):
            waiting = sorted(pending)
            if waiting:
                progress.say(f"... {time.monotonic() - start:5.1f}s: waiting on {len(waiting)} host(s): {fold(waiting)}")

    if not quiet:
        threading.Thread(target=ticker, daemon=True, name="forensics-fleet-progress").start()
    try:
        runs = runner(hosts, cmd.remote_argv(spec), host_timeout, on_done)
    finally:
        finished.set()
    work = Path(tempfile.mkdtemp(prefix="forensics-fleet-merge-"))
    try:
        parts = [judge(runs[h], host_timeout, work) for h in hosts]
        stuck = [p.host for p in parts if p.status == outcome.TIMEOUT]
        if stuck and cleanup:
            progress.say(f"ending the collector on {len(stuck)} host(s) that timed out")
            runner(stuck, cmd.cleanup_argv(spec), min(5.0, host_timeout), lambda run: None)
        manifest = merge_bundles(out, parts, command=list(sys.argv))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    result = FleetResult(out=out, manifest=manifest, parts=parts, seconds=round(time.monotonic() - start, 3))
    bad = [p for p in parts if p.status != outcome.OK]
    progress.say(f"merged {len(manifest.ranks)} rank(s) from {len(parts) - len(bad)}/{len(parts)} host(s) in {result.seconds:.1f} s")
    for p in bad:
        progress.say(f"  {p.status}: {p.error}")
    return result

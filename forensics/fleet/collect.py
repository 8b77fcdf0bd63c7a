"""Fleet collection end to end: run the collector on every host, judge each answer, merge.

A host is never waited on past its time limit, and every host ends up in the job
bundle: with its evidence, or with a record saying why there is none
("127.0.0.9 did not answer in 20 s"), which is itself evidence of a dead or wedged node.
"""

from __future__ import annotations

import os
import secrets
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from parsers.model.manifest import Manifest
from forensics import safefs
from forensics.bundle.merge import HostPart, merge_bundles
from forensics.collect.progress import ProgressReporter
from forensics.errors import ForensicsError
from forensics.fleet import command as cmd
from forensics.fleet import outcome
from forensics.fleet.filing import Filing, judge_safely
from forensics.fleet.outcome import HostRun
from forensics.fleet.hosts import fold
from forensics.fleet.transport import run_ssh

TICK = 2.0  #: seconds between 'waiting on' lines
#: below this many hosts answers are filed on one thread: a worker process's start (~0.2 s) would not pay back
WORKERS_FROM_HOSTS = 64
#: below this many cores too: measured on 2 (benchmarks/fleet_fanout.py, 4,096 hosts), filing processes cost
#: ~2.5 s more CPU (the hand-over, a second manifest check) and were no faster than the thread (17.7 and 18.4 s
#: against 15.0 and 17.0 s), since every core is busy anyway
WORKERS_FROM_CORES = 4

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
    #: CPU seconds of the filing processes (forensics.fleet.filing): the orchestrator's work outside its own process
    filing_cpu_s: float = 0.0
    filing_peak_rss_mb: float = 0.0  #: the largest peak RSS among them

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


def ssh_runner(ssh_options: list[str], fanout: int, ssh_path: str = "ssh", topology: Path | None = None) -> Runner:
    """A Runner over ssh/ClusterShell with these options (through the gateways of `topology` when given)."""

    def run(hosts: list[str], argv: list[str], timeout: float,
            on_done: Callable[[HostRun], None]) -> dict[str, HostRun]:
        return run_ssh(hosts, lambda host: cmd.shell_command(cmd.for_host(argv, host)), ssh_options, fanout, timeout,
                       on_done,
                       ssh_path, topology)

    return run


def prepare_out(out: Path) -> None:
    """Create the job bundle folder that answers are filed into as they arrive; refuse one that already
    holds host evidence (two collections must not mix, and a host's folder is written once)."""
    hosts_dir = out / "hosts"
    if hosts_dir.is_dir() and any(hosts_dir.iterdir()):
        raise ForensicsError(f"{out} already holds host evidence ({hosts_dir}): pass a new -o folder")
    try:
        safefs.ensure_folder(out)
    except OSError as err:
        raise ForensicsError(f"cannot write the bundle at {out}: {err.strerror or err}") from err


def filing_workers(hosts: int) -> int:
    """How many filing processes for a fleet of `hosts`: none (one thread) for a few hosts or a
    machine of few cores (see WORKERS_FROM_CORES), else one per core but one, up to 4: there
    the processes use cores a thread could not, and the thread's ~600 hosts/s no longer bounds
    a large fleet's filing. Measured on 16 cores (benchmarks/README.md, fleet_fanout): 4,096
    hosts in 8.0-8.9 s with 4 processes, 13.9 s on a thread, 8.1 s with 8 (no better than 4)."""
    cores = os.cpu_count() or 1
    if hosts < WORKERS_FROM_HOSTS or cores < WORKERS_FROM_CORES:
        return 0
    return min(4, cores - 1)


def collect_fleet(
    hosts: list[str],
    out: Path,
    spec: cmd.RemoteSpec,
    runner: Runner,
    host_timeout: float,
    quiet: bool = False,
    cleanup: bool = True,
    workers: int | None = None,
) -> FleetResult:
    """Collect every host with `runner`, merge into `out`. Hosts that time out get a cleanup pass.
    `workers`: filing processes (forensics.fleet.filing; 0: file on a thread here; None: filing_workers())."""
    start = time.monotonic()
    spec.deadline = max(1.0, host_timeout - min(2.0, host_timeout * 0.2))
    progress = ProgressReporter(len(hosts), "hosts", quiet)
    progress.say(f"collecting {len(hosts)} host(s), up to {host_timeout:g} s each, into {out}")

    prepare_out(out)
    pending = set(hosts)
    finished = threading.Event()
    # before any thread of ours
    judges = Filing(host_timeout, out, filing_workers(len(hosts)) if workers is None else workers)

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
                progress.say(f"... {time.monotonic() - start:5.1f}s: waiting on {len(waiting)} host(s): "
                             f"{fold(waiting)}")

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
    result = FleetResult(out=out, manifest=manifest, parts=parts, seconds=round(time.monotonic() - start, 3),
                         phases=phases,
                         filing_cpu_s=round(judges.cpu_s, 3), filing_peak_rss_mb=round(judges.peak_rss_kb / 1024, 1))
    phases["merged"] = result.seconds
    bad = [p for p in parts if p.status != outcome.OK]
    progress.say(f"merged {len(manifest.ranks)} rank(s) from {len(parts) - len(bad)}/{len(parts)} host(s) in "
                 f"{result.seconds:.1f} s")
    for p in bad:
        progress.say(f"  {p.status}: {p.error}")
    return result

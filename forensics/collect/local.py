"""Collects every rank on this host into a bundle: discover, then all collectors, in parallel.

Ranks run in parallel (each collector bounded in time); within a rank, collectors
run in order so the ptrace tools never overlap on one PID. A rank that exits mid-way,
a tool that is missing or refused: each becomes a record in the manifest, and the
rest goes on.
"""

from __future__ import annotations

import time
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from parsers.model.manifest import CollectorRecord, HostRecord, MissingRank, RankRecord, Status
from forensics.bundle.digest import write_host_digest
from forensics.bundle.writer import BundleWriter
from forensics.collect import tool as tools
from forensics.collect.progress import ProgressReporter
from forensics.collectors import host_collectors, rank_collectors
from forensics.collectors.base import CollectOptions, HostTarget, RankTarget, timed
from forensics.collectors.children import collect_children
from forensics.collectors.native_stack import close_service
from forensics.collectors.second_look import RankLooks
from forensics.discover import procfs
from forensics.collect.targets import discover
from forensics.discover.ranks import RankProcess, expected_missing, host_name
from forensics.collect.budget import ByteBudget, cap_words, write_whole
from forensics.errors import ForensicsError
from forensics.exitcodes import ExitCode
from forensics.bundle.redact import redact_argv


#: after an interrupt, how long the collection waits for running collectors (their
#: tools are already killed) before it writes the manifest and returns
GRACE_S = 0.6


@dataclass
class CollectResult:
    writer: BundleWriter
    problems: list[str]
    interrupted: bool = False

    @property
    def complete(self) -> bool:
        return not self.problems and not self.interrupted and self.writer.manifest.complete


def collect_local(
    out: Path,
    options: CollectOptions,
    pids: list[int] | None = None,
    quiet: bool = False,
    writer: BundleWriter | None = None,
    job: str | None = None,
) -> CollectResult:
    """Discover ranks (or take `pids`; only job `job` if given), collect them all, write the bundle at `out`.

    The manifest is written first (marked `interrupted`), then again each time a rank
    is done, and last with `interrupted` cleared: a collection killed at any moment
    (even with SIGKILL) leaves a manifest of what it gathered, saying it was cut short.
    After forensics.collect.tool.interrupt() (collect's SIGINT/SIGTERM handler), no
    collector starts, running tools are already dead, and this returns within GRACE_S.
    """
    host = host_name()
    ranks, problems = discover(pids, host=host, job=job)
    if not ranks:
        detail = "; ".join(problems) if problems else "no process with RANK and WORLD_SIZE in its environment"
        raise ForensicsError(f"no ranks to collect on {host}: {detail} (use --pid to name processes)")
    writer = writer or BundleWriter(out)
    for line in problems:
        writer.note(line)
    progress = ProgressReporter(len(ranks), f"ranks on {host}", quiet)
    progress.say(f"collecting {len(ranks)} rank(s) on {host} into {out}")
    host_record = HostRecord(host=host, dir=writer.host_dir(host))
    records = [_rank_record(writer, proc) for proc in ranks]
    writer.manifest.interrupted = True  # until the end says otherwise
    writer.add_host(host_record)
    for record in records:
        writer.add_rank(record)
    disk = _DiskGuard(writer)
    disk.save()
    budget = ByteBudget(options.total_bytes, "per-collection")
    start = time.monotonic()
    pool = ThreadPoolExecutor(max_workers=min(64, len(ranks) + 1))
    host_budget = ByteBudget(options.host_bytes, "per-host", parent=budget)  # host-wide files (issue 40)
    pending = {pool.submit(_collect_host, writer, host_record, options, host_budget)}
    if options.second_look > 0:
        progress.say(f"second look at {len(ranks)} rank(s), {options.second_look:g} s apart, around the stack reads "
                     "(skipped where the recorder's or Flight Recorder's time stamps decide)")
    pending |= {pool.submit(_collect_rank, writer, proc, record, options, progress, budget)
                for proc, record in zip(ranks, records)}
    interrupted_at = None
    saved_at = _finished(records)
    while pending:
        done, pending = wait(pending, timeout=0.1, return_when=FIRST_COMPLETED)
        for future in done:
            future.result()  # a bug in the collection loop itself surfaces here
        if done or _finished(records) != saved_at:
            saved_at = _finished(records)
            disk.save()
        if tools.INTERRUPTED.is_set():
            interrupted_at = interrupted_at or time.monotonic()
            if time.monotonic() - interrupted_at > GRACE_S:
                break
    close_service()  # the native-stack helper served this collection's ranks (its symbol cache ends with it)
    pool.shutdown(wait=not pending, cancel_futures=True)
    interrupted = tools.INTERRUPTED.is_set()
    host_record.seconds = round(time.monotonic() - start, 3)
    host_record.costs = collector_costs(records, host_record)
    for miss in expected_missing(ranks):
        writer.add_missing(MissingRank(rank=miss.rank, reason=miss.reason, host=host, job_id=miss.job_id))
    _note_cuts(writer, options, budget)
    if interrupted and disk.error is None:
        why = f" by {tools.REASON[0]}" if tools.REASON else ""
        writer.note(f"collection interrupted{why} after {host_record.seconds} s; targets left running as found; "
                    f"{len(pending)} collection task(s) still running were abandoned")
    writer.manifest.interrupted = interrupted or disk.error is not None
    disk.save(final=True)
    # the same readers as analysis (issue 30); the digest within the host's byte cap (issue 40)
    if not interrupted and (note := write_host_digest(writer, host, _within(host_budget, host))):
        writer.note(note)
        disk.save(final=True)
    return CollectResult(writer=writer, problems=problems, interrupted=interrupted)


def _note_cuts(writer: BundleWriter, options: CollectOptions, budget: ByteBudget) -> None:
    """One manifest note of what the byte caps kept out or cut (the first 20, then a count), with the caps."""
    if budget.cuts:
        caps = (f"per rank {cap_words(options.rank_bytes)}, per host {cap_words(options.host_bytes)}, "
                f"per collection {cap_words(options.total_bytes)}")
        writer.note(f"byte caps ({caps}, sparse files counted at their apparent size) kept "
                    f"{len(budget.cuts)} item(s) out or cut: " + "; ".join(budget.cuts[:20])
                    + (f"; and {len(budget.cuts) - 20} more" if len(budget.cuts) > 20 else ""))


def _within(budget: ByteBudget, host: str) -> Callable[[Path, str], str | None]:
    """The host digest's writer: whole within the host's bytes left, or not at all (the cut said)."""
    return lambda path, text: write_whole(budget, path, text, f"{host} {path.name}", replace=True)


def _finished(records: list[RankRecord]) -> int:
    """How many rank collectors have finished: the manifest is saved again within 0.1 s of any change.

    Why: a collection killed with SIGKILL keeps only the last saved manifest; saving only when a whole rank or
    the host's collectors end lost what a rank had gathered so far (its /proc state and py-spy stacks while gdb
    still held it)."""
    return sum(len(r.collectors) for r in records)


class _DiskGuard:
    """Manifest saves that survive a full disk: the first failure stops the collection (every later
    write would fail too) and the last manifest.json written stays as it was, whole, saying
    `interrupted`; the end raises one ForensicsError line instead of an OSError traceback."""

    def __init__(self, writer: BundleWriter) -> None:
        self.writer = writer
        self.error: OSError | None = None
        self.saved = 0

    def save(self, final: bool = False) -> None:
        if self.error is None or final:
            try:
                self.writer.save()
                self.saved += 1
            except OSError as err:
                if self.error is None:
                    tools.interrupt()  # stop the tools and the collectors not started yet
                self.error = self.error or err
        if final and self.error is not None:
            where = self.writer.root
            kept = ("manifest.json there is the last one written whole (it says the collection was cut short)"
                    if self.saved else "no manifest.json could be written")
            raise ForensicsError(f"cannot write the bundle at {where}: {self.error.strerror or self.error}; {kept}",
                                 code=ExitCode.PARTIAL)


def _collect_host(writer: BundleWriter, record: HostRecord, options: CollectOptions, budget: ByteBudget) -> None:
    target = HostTarget(host=record.host, bundle_root=writer.root, rel_dir=record.dir or "", budget=budget)
    for collector in host_collectors():
        if tools.INTERRUPTED.is_set():
            record.collectors.append(CollectorRecord(collector.name, Status.SKIPPED, error="collection interrupted"))
        elif collector.enabled(options):
            record.collectors.append(timed(collector.name, lambda c=collector: c.collect(target, options)))


def collector_costs(records: list[RankRecord], host: HostRecord) -> dict[str, dict[str, float | int]]:
    """What each collector cost on this host (issue 39 item 8): per collector, the ranks it ran on, its total
    and its longest seconds (ranks run in parallel: the longest bounds the collection); host collectors too.
    Why in the manifest: time to verdict is a budget, and this says where it went."""
    costs: dict[str, dict[str, float | int]] = {}
    for c in [c for r in records for c in r.collectors] + list(host.collectors):
        if c.status == Status.SKIPPED and not c.seconds:
            continue
        slot = costs.setdefault(c.name, {"runs": 0, "total_s": 0.0, "max_s": 0.0})
        slot["runs"] += 1
        slot["total_s"] = round(slot["total_s"] + c.seconds, 3)
        slot["max_s"] = max(slot["max_s"], round(c.seconds, 3))
    return costs


def _rank_record(writer: BundleWriter, proc: RankProcess) -> RankRecord:
    """The manifest entry of one rank, before any collector ran (argv redacted)."""
    rel = writer.rank_dir(proc.host, proc.rank, proc.pid)
    return RankRecord(
        host=proc.host,
        pid=proc.pid,
        dir=rel,
        rank=proc.rank,
        local_rank=proc.local_rank,
        world_size=proc.world_size,
        local_world_size=proc.local_world_size,
        group_rank=proc.group_rank,
        job_id=proc.job_id,
        cmdline=redact_argv(proc.cmdline),
        rank_source=proc.rank_source,
        ppid=proc.ppid,
        job_evidence=list(proc.job_evidence),
    )


def _collect_rank(writer: BundleWriter, proc: RankProcess, record: RankRecord, options: CollectOptions,
                  progress: ProgressReporter, budget: ByteBudget) -> RankRecord:
    """Run every rank collector in order on one rank, filling `record` as they finish."""
    target = RankTarget(pid=proc.pid, host=proc.host, rank=proc.rank, environ=proc.environ, bundle_root=writer.root,
                        rel_dir=record.dir, outputs=tuple(proc.outputs),
                        recorder_files=tuple(proc.recorder_files),
                        budget=ByteBudget(options.rank_bytes, "per-rank", parent=budget))
    writer.in_progress.append(record)  # a snapshot (fleet deadline) shows the collectors finished so far
    record.state_before = procfs.state_or_none(proc.pid)
    looks = RankLooks(proc, options.second_look)
    looks.begin()  # look 1 before any collector; look 2 after them, once the gap has passed (issue 39 item 8)
    for collector in rank_collectors():
        if tools.INTERRUPTED.is_set():
            record.collectors.append(CollectorRecord(collector.name, Status.SKIPPED, error="collection interrupted"))
            continue
        if not collector.enabled(options):
            record.collectors.append(CollectorRecord(collector.name, Status.SKIPPED, error="not requested"))
            continue
        record.collectors.append(timed(collector.name, lambda c=collector: c.collect(target, options)))
    record.children = collect_children(target, options)
    looks.finish(record, writer.root, target.budget)
    record.state_after = procfs.state_or_none(proc.pid)
    ran = (f"{c.name} {c.status}" for c in record.collectors if c.status != Status.SKIPPED)
    progress.step(f"{record.label}: " + ", ".join(ran))
    return record


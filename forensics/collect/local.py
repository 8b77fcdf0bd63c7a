"""Collects every rank on this host into a bundle: discover, then all collectors, in parallel.

Ranks run in parallel (each collector bounded in time); within a rank, collectors
run in order so the ptrace tools never overlap on one PID. A rank that exits mid-way,
a tool that is missing or refused: each becomes a record in the manifest, and the
rest goes on.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from forensics.bundle.manifest import CollectorRecord, HostRecord, MissingRank, RankRecord, Status
from forensics.bundle.writer import BundleWriter
from forensics.collect.progress import Progress
from forensics.collectors import host_collectors, rank_collectors
from forensics.collectors.base import CollectOptions, HostTarget, RankTarget, timed
from forensics.discover import procfs
from forensics.discover.ranks import RankProcess, discover, expected_missing, host_name
from forensics.errors import ForensicsError


@dataclass
class CollectResult:
    writer: BundleWriter
    problems: list[str]

    @property
    def complete(self) -> bool:
        return not self.problems and self.writer.manifest.complete


def collect_local(
    out: Path,
    options: CollectOptions,
    pids: list[int] | None = None,
    quiet: bool = False,
    writer: BundleWriter | None = None,
    job: str | None = None,
) -> CollectResult:
    """Discover ranks (or take `pids`; only job `job` if given), collect them all, write the bundle at `out`."""
    host = host_name()
    ranks, problems = discover(pids, host=host, job=job)
    if not ranks:
        detail = "; ".join(problems) if problems else "no process with RANK and WORLD_SIZE in its environment"
        raise ForensicsError(f"no ranks to collect on {host}: {detail} (use --pid to name processes)")
    writer = writer or BundleWriter(out)
    for line in problems:
        writer.note(line)
    progress = Progress(len(ranks), f"ranks on {host}", quiet)
    progress.say(f"collecting {len(ranks)} rank(s) on {host} into {out}")
    host_record = HostRecord(host=host, dir=writer.host_dir(host))
    start = time.monotonic()
    with ThreadPoolExecutor(max_workers=min(64, len(ranks) + 1)) as pool:
        host_future = pool.submit(_collect_host, writer, host_record, options)
        futures = [pool.submit(_collect_rank, writer, proc, options, progress) for proc in ranks]
        records = [f.result() for f in futures]
        host_future.result()
    host_record.seconds = round(time.monotonic() - start, 3)
    writer.add_host(host_record)
    for record in records:
        writer.add_rank(record)
    for miss in expected_missing(ranks):
        writer.add_missing(MissingRank(rank=miss.rank, reason=miss.reason, host=host, job_id=miss.job_id))
    writer.save()
    return CollectResult(writer=writer, problems=problems)


def _collect_host(writer: BundleWriter, record: HostRecord, options: CollectOptions) -> None:
    target = HostTarget(host=record.host, bundle_root=writer.root, rel_dir=record.dir or "")
    for collector in host_collectors():
        if collector.enabled(options):
            record.collectors.append(timed(collector.name, lambda c=collector: c.collect(target, options)))


def _collect_rank(writer: BundleWriter, proc: RankProcess, options: CollectOptions, progress: Progress) -> RankRecord:
    rel = writer.rank_dir(proc.host, proc.rank, proc.pid)
    record = RankRecord(
        host=proc.host,
        pid=proc.pid,
        dir=rel,
        rank=proc.rank,
        local_rank=proc.local_rank,
        world_size=proc.world_size,
        local_world_size=proc.local_world_size,
        group_rank=proc.group_rank,
        job_id=proc.job_id,
        cmdline=proc.cmdline,
    )
    target = RankTarget(pid=proc.pid, host=proc.host, rank=proc.rank, environ=proc.environ, bundle_root=writer.root, rel_dir=rel)
    writer.in_progress.append(record)  # a snapshot (fleet deadline) shows the collectors finished so far
    record.state_before = procfs.state_or_none(proc.pid)
    for collector in rank_collectors():
        if not collector.enabled(options):
            record.collectors.append(CollectorRecord(collector.name, Status.SKIPPED, error="not requested"))
            continue
        record.collectors.append(timed(collector.name, lambda c=collector: c.collect(target, options)))
    record.state_after = procfs.state_or_none(proc.pid)
    progress.step(f"{record.label}: " + ", ".join(f"{c.name} {c.status}" for c in record.collectors if c.status != Status.SKIPPED))
    return record


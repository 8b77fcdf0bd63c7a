"""Builds bundles for the host-evidence tests: real collectors here, real fixture files for other hosts."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from parsers.model.manifest import CollectorRecord, HostRecord, RankRecord
from forensics.bundle.writer import BundleWriter
from forensics.collectors.base import CollectOptions, HostTarget, timed
from forensics.collectors.host import host_collectors

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures" / "host"


def hosts_cli(*args: str) -> subprocess.CompletedProcess:
    """`forensics hosts ARGS` of this checkout, with the built-in knowledge base (FORENSICS_KB unset)."""
    env = dict(os.environ, PYTHONPATH=str(REPO))
    env.pop("FORENSICS_KB", None)
    return subprocess.run([sys.executable, "-m", "forensics", "hosts", *args], capture_output=True, text=True,
                          env=env, timeout=120, check=False)


def collect_here(writer: BundleWriter, host: str, options: CollectOptions | None = None) -> HostRecord:
    """Run every host collector on this machine for real, as `forensics collect` will."""
    record = HostRecord(host=host, dir=writer.host_dir(host))
    target = HostTarget(host=host, bundle_root=writer.root, rel_dir=record.dir)
    for collector in host_collectors():
        record.collectors.append(timed(collector.name,
                                       lambda c=collector: c.collect(target, options or CollectOptions())))
    writer.add_host(record)
    return record


def host_from_files(writer: BundleWriter, host: str, files: dict[str, tuple[str, Path]]) -> HostRecord:
    """A host whose collectors 'ran' elsewhere: {collector name: (file name in bundle, source file)}."""
    record = HostRecord(host=host, dir=writer.host_dir(host))
    for name, (filename, source) in files.items():
        rel = f"{record.dir}/{filename}"
        shutil.copyfile(source, writer.root / rel)
        record.collectors.append(CollectorRecord(name=name, status="ok", files=[rel]))
    writer.add_host(record)
    return record


def rank_with_log(writer: BundleWriter, host: str, rank: int, pid: int, lines: list[str]) -> RankRecord:
    """A rank whose stdio collector copied `lines` (real lines from the fixtures)."""
    rel_dir = writer.rank_dir(host, rank, pid)
    rel = writer.write_text(f"{rel_dir}/stderr.log", "\n".join(lines) + "\n")
    record = RankRecord(host=host, pid=pid, dir=rel_dir, rank=rank,
                        collectors=[CollectorRecord("stdio", "ok", files=[rel])])
    writer.add_rank(record)
    return record

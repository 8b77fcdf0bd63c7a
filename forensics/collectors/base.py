"""The collector interface: one small class per kind of evidence.

A rank collector gathers one kind of evidence from one process; a host collector
gathers one kind from the host as a whole. Collectors never interpret what they
gather (that is the parsers' job): they copy or record it, and say how it went
in a CollectorRecord. They must not raise for expected failures.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Protocol

from forensics import safefs
from parsers.model.manifest import CollectorRecord, Status
from forensics.collect.budget import HOST_BYTES, RANK_BYTES, TOTAL_BYTES, ByteBudget, unlimited


@dataclass
class CollectOptions:
    """What the user asked of a collection."""

    timeout: float = 20.0  #: seconds per collector per target
    native: bool = False  #: py-spy --native (slower, shows C++ frames of Python threads)
    gdb: bool = False  #: GDB backtraces of all threads (opt-in: pauses the target seconds)
    log_tail_bytes: int = 8 * 1024 * 1024  #: copy at most this much of each log, from its end
    samples: int = 0  #: py-spy stack samples per rank over a few seconds (0: none; collect --samples)
    sample_interval: float = 0.1  #: mean seconds between two samples
    second_look: float = 3.0  #: seconds between the two looks of collect --second-look (0: no second look)
    total_bytes: int = TOTAL_BYTES  #: bytes the whole collection may write (forensics.collect.budget)
    rank_bytes: int = RANK_BYTES  #: bytes one rank's evidence may take
    host_bytes: int = HOST_BYTES  #: bytes the host-wide files may take (kernel log, nvidia-smi, df, the digest)
    extra: dict = field(default_factory=dict)


@dataclass
class RankTarget:
    """One rank process to collect from, and where its evidence goes."""

    pid: int
    host: str
    rank: int | None
    environ: dict[str, str]
    bundle_root: Path
    rel_dir: str  #: folder of this rank, relative to bundle_root
    outputs: tuple = ()  #: output files discovery found where /proc cannot say (an exited rank)
    recorder_files: tuple = ()  #: recorder state files discovery found where its environment cannot say (idem)
    budget: ByteBudget = field(default_factory=unlimited)  #: bytes this rank may still write (collect sets it)

    def out(self, name: str) -> tuple[Path, str]:
        """(absolute path, bundle-relative path) of a file in this rank's folder; its folders are made
        (forensics.safefs.make_dirs: no link followed). The file itself is the caller's to create new."""
        return _out(self.bundle_root, f"{self.rel_dir}/{name}")


@dataclass
class HostTarget:
    """The host being collected, and its folder in the bundle."""

    host: str
    bundle_root: Path
    rel_dir: str
    budget: ByteBudget = field(default_factory=unlimited)  #: the host files' bytes (collect sets it)

    def out(self, name: str) -> tuple[Path, str]:
        return _out(self.bundle_root, f"{self.rel_dir}/{name}")


def _out(root: Path, rel: str) -> tuple[Path, str]:
    if not root.is_dir():  # a collector run on its own (no BundleWriter made the bundle folder)
        safefs.ensure_folder(root)
    safefs.make_dirs(root, Path(rel).parent)
    return root / rel, rel


class RankCollector(Protocol):
    """Gathers one kind of evidence from one rank process."""

    name: str
    uses_ptrace: bool  #: ptrace tools must not run at once on one PID

    def enabled(self, options: CollectOptions) -> bool: ...

    def collect(self, target: RankTarget, options: CollectOptions) -> CollectorRecord: ...


class AlwaysEnabled:
    """The one `enabled` of a collector that runs whatever the options say (a cheap read, or one that decides
    inside `collect` what there is to take), and no ptrace: 13 collectors had the same four lines each."""

    uses_ptrace = False

    def enabled(self, options: CollectOptions) -> bool:
        return True


class HostCollector(Protocol):
    """Gathers one kind of evidence from the host."""

    name: str

    def enabled(self, options: CollectOptions) -> bool: ...

    def collect(self, target: HostTarget, options: CollectOptions) -> CollectorRecord: ...


def ptrace_denied(error: str) -> str:
    """The message of a ptrace tool the kernel refused, with what lets it through."""
    return f"ptrace not permitted: {error} (run as root or grant CAP_SYS_PTRACE)"


def timed(name: str, body: Callable[[], CollectorRecord]) -> CollectorRecord:
    """Run a collector body, fill in its time, and turn a surprise exception into a record."""
    start = time.monotonic()
    try:
        record = body()
    except Exception as err:  # noqa: BLE001 - a collector bug must not lose other evidence
        record = CollectorRecord(name=name, status=Status.FAILED, error=f"{type(err).__name__}: {err}")
    record.seconds = round(time.monotonic() - start, 4)
    return record

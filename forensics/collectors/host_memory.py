"""Host memory and pressure: /proc/meminfo, /proc/pressure/*, /proc/loadavg, /proc/vmstat.

Memory exhaustion shows before the OOM killer acts: little MemAvailable and
pressure-stall (PSI) numbers that say how long tasks waited for memory or I/O.
/proc/vmstat's oom_kill counter says whether the OOM killer ran at all since boot.
"""

from __future__ import annotations

from pathlib import Path

from parsers.model.manifest import CollectorRecord, Status
from parsers.gather.registry import collector_file
from forensics.collectors.base import AlwaysEnabled, CollectOptions, HostTarget
from forensics.collectors.host_common import left_out, read_small, save_json

SOURCES = ("meminfo", "loadavg", "vmstat", "pressure/cpu", "pressure/memory", "pressure/io")


class MemoryCollector(AlwaysEnabled):
    """Raw copies of the memory and pressure pseudo-files, as memory.json."""

    name = "memory"

    def __init__(self, procfs: Path | str = "/proc") -> None:
        self.proc = Path(procfs)

    def collect(self, target: HostTarget, options: CollectOptions) -> CollectorRecord:
        texts = {name: read_small(self.proc / name) for name in SOURCES}
        if texts["meminfo"] is None:
            return CollectorRecord(self.name, Status.UNAVAILABLE, error=f"{self.proc / 'meminfo'} is not readable")
        name = collector_file(self.name, "memory-json")
        rel = save_json(target, name, texts)
        if rel is None:
            return left_out(target, self.name, name)
        absent = [name for name, text in texts.items() if text is None]
        details = {"absent": absent} if absent else {}
        return CollectorRecord(self.name, Status.OK, files=[rel], details=details)

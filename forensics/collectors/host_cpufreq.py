"""CPU frequency governor and current frequencies (sysfs cpufreq, /proc/cpuinfo).

A host left on the 'powersave' governor, or stuck at a low clock by firmware,
makes its ranks slow in every step; the others then wait for it and the job looks
hung. Virtual machines often expose no cpufreq: then only /proc/cpuinfo's MHz is copied.
"""

from __future__ import annotations

import re
from pathlib import Path

from parsers.model.manifest import CollectorRecord, Status
from parsers.gather.registry import collector_file
from forensics.collectors.base import AlwaysEnabled, CollectOptions, HostTarget
from forensics.collectors.host_common import left_out, read_small, save_json

FREQ_FILES = ("scaling_governor", "scaling_driver", "scaling_cur_freq", "scaling_min_freq", "scaling_max_freq",
              "cpuinfo_min_freq", "cpuinfo_max_freq")
_CPU_DIR = re.compile(r"cpu\d+$")


class CpuFreqCollector(AlwaysEnabled):
    """Per-CPU cpufreq files and /proc/cpuinfo MHz lines, as cpufreq.json."""

    name = "cpufreq"

    def __init__(self, sysfs: Path | str = "/sys", procfs: Path | str = "/proc") -> None:
        self.cpus = Path(sysfs) / "devices" / "system" / "cpu"
        self.cpuinfo = Path(procfs) / "cpuinfo"

    def collect(self, target: HostTarget, options: CollectOptions) -> CollectorRecord:
        per_cpu: dict[str, dict] = {}
        for cpu in sorted(p for p in self.cpus.glob("cpu*") if _CPU_DIR.match(p.name)):
            freq = cpu / "cpufreq"
            if freq.is_dir():
                per_cpu[cpu.name] = {name: read_small(freq / name) for name in FREQ_FILES}
        info = read_small(self.cpuinfo) or ""
        mhz = [line.split(":", 1)[1].strip() for line in info.splitlines() if line.lower().startswith("cpu mhz")]
        if not per_cpu and not mhz:
            return CollectorRecord(self.name, Status.UNAVAILABLE,
                                   error="no cpufreq in sysfs and no 'cpu MHz' in /proc/cpuinfo")
        name = collector_file(self.name, "cpufreq-json")
        rel = save_json(target, name, {"cpufreq": per_cpu, "cpuinfo_mhz": mhz})
        if rel is None:
            return left_out(target, self.name, name)
        note = {} if per_cpu else {"note": "no cpufreq in sysfs (virtual machine or driver not loaded): "
                                           "cpuinfo MHz only"}
        return CollectorRecord(self.name, Status.OK, files=[rel], details={"cpus": len(per_cpu) or len(mhz), **note})

"""Decodes the small host files: cpufreq.json, df output, memory.json (meminfo, PSI).

Facts: subject 'cpu' -> cpu.governor.<name> (how many CPUs run it), cpu.count,
cpu.freq.cur_to_max_min (lowest current/max ratio), cpu.freq.cap_to_max_min (lowest
scaling_max_freq/cpuinfo_max_freq: a frequency cap); subject 'disk <mount>' ->
disk.used_pct, disk.inodes_used_pct, disk.fstype; subject 'memory' ->
memory.available_pct, memory.total_kb, psi.<cpu|memory|io>.<some|full>.avg10/avg60,
vmstat.oom_kill.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from typing import Any
from parsers.input import bounded_json
from parsers.input.cutmark import is_cut_line
from parsers.input.errors import FileFormatError

Facts = dict[str, Any]


class HostDataError(FileFormatError):
    """A host file is not in the format its collector writes."""


def parse_cpufreq_json(text: str) -> Facts:
    try:
        data = bounded_json.loads(text)
    except json.JSONDecodeError as err:
        raise HostDataError(f"cpufreq.json is not JSON: {err}") from err
    if not isinstance(data, dict):
        raise HostDataError("cpufreq.json is not an object")
    # sections of the wrong type read as absent: a list where a dict belongs must not stop the analysis
    per_cpu = {k: v for k, v in (data.get("cpufreq") if isinstance(data.get("cpufreq"), dict) else {}).items()
               if isinstance(v, dict)}
    listed = data.get("cpuinfo_mhz") if isinstance(data.get("cpuinfo_mhz"), list) else []
    facts: Facts = {"cpu.count": len(per_cpu) or len(listed)}
    governors = Counter(str(v.get("scaling_governor"))[:64] for v in per_cpu.values()
                        if isinstance(v.get("scaling_governor"), str) and v.get("scaling_governor"))
    for name, count in governors.items():
        facts[f"cpu.governor.{name}"] = count
    for name, numerator in (("cpu.freq.cur_to_max_min", "scaling_cur_freq"),
                            ("cpu.freq.cap_to_max_min", "scaling_max_freq")):
        ratios = []
        for values in per_cpu.values():
            part, top = _num(values.get(numerator)), _num(values.get("cpuinfo_max_freq"))
            if part and top:
                ratios.append(part / top)
        if ratios:
            facts[name] = round(min(ratios), 3)
    mhz = [_num(x) for x in listed]
    mhz = [x for x in mhz if x]
    if mhz:
        facts["cpu.mhz.min"] = min(mhz)
        facts["cpu.mhz.max"] = max(mhz)
    return facts


def _num(text: Any) -> float | None:
    try:
        return float(str(text).strip())
    except (TypeError, ValueError):
        return None


def parse_df(text: str, inodes: bool = False) -> dict[str, Facts]:
    """Facts per 'disk <mount>' from `df -PT` (or `df -PTi` with inodes=True)."""
    lines = text.splitlines()
    if not lines or not lines[0].startswith("Filesystem"):
        raise HostDataError("not df -P output (no 'Filesystem' header)")
    out: dict[str, Facts] = {}
    key = "disk.inodes_used_pct" if inodes else "disk.used_pct"
    for line in lines[1:]:
        parts = line.split()
        if len(parts) < 7 or is_cut_line(line):  # a collection's cut line is no mount
            continue
        fstype, capacity, mount = parts[1], parts[5], " ".join(parts[6:])
        facts = out.setdefault(f"disk {mount}", {"disk.fstype": fstype})
        if capacity.endswith("%") and capacity[:-1].isdigit():
            facts[key] = int(capacity[:-1])
    return out


_PSI = re.compile(r"^(some|full)\s+avg10=([\d.]+)\s+avg60=([\d.]+)")


def parse_memory_json(text: str) -> Facts:
    try:
        data = bounded_json.loads(text)
    except json.JSONDecodeError as err:
        raise HostDataError(f"memory.json is not JSON: {err}") from err
    if not isinstance(data, dict):
        raise HostDataError("memory.json is not an object")

    def text_of(key: str) -> str:  # each section is /proc text; anything else reads as absent
        value = data.get(key)
        return value if isinstance(value, str) else ""

    facts: Facts = {}
    meminfo = {}
    for line in text_of("meminfo").splitlines():
        name, _, rest = line.partition(":")
        value = rest.split()
        if value and value[0].isdigit():
            meminfo[name.strip()] = int(value[0])
    if meminfo.get("MemTotal") and "MemAvailable" in meminfo:
        facts["memory.total_kb"] = meminfo["MemTotal"]
        facts["memory.available_pct"] = round(100.0 * meminfo["MemAvailable"] / meminfo["MemTotal"], 2)
    for resource in ("cpu", "memory", "io"):
        for line in text_of(f"pressure/{resource}").splitlines():
            m = _PSI.match(line)
            if m:
                facts[f"psi.{resource}.{m.group(1)}.avg10"] = float(m.group(2))
                facts[f"psi.{resource}.{m.group(1)}.avg60"] = float(m.group(3))
    for line in text_of("vmstat").splitlines():
        if line.startswith("oom_kill "):
            facts["vmstat.oom_kill"] = int(line.split()[1])
    return facts

"""Decodes nvml.json (written by forensics.collectors.host_nvml) into per-GPU facts.

Fact names match those of the nvidia-smi reader, so one knowledge-base entry
covers both sources. The clock-event bitmask is decoded with NVML's documented bits.
"""

from __future__ import annotations

import json
from typing import Any
from parsers.input import bounded_json
from parsers.input.errors import FileFormatError

Facts = dict[str, Any]

#: nvmlClocksEventReason* bits (nvml.h), named like nvidia-smi's fields.
CLOCK_EVENT_BITS = {
    0x1: "gpu_idle",
    0x2: "applications_clocks_setting",
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x10: "sync_boost",
    0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake_slowdown",
    0x100: "display_clocks_setting",
}


class NvmlDataError(FileFormatError):
    """nvml.json is not what the collector writes."""


def decode_clock_reasons(mask: int) -> dict[str, bool]:
    """throttle.<reason> -> active, for every known bit."""
    return {f"throttle.{name}": bool(mask & bit) for bit, name in CLOCK_EVENT_BITS.items()}


def gpu_facts(gpu: dict[str, Any]) -> Facts:
    """Facts of one GPU record; values NVML could not give are left out."""
    facts: Facts = {}
    simple = {
        "name": "name",
        "uuid": "uuid",
        "temperature_gpu": "temperature.gpu",
        "temperature_slowdown": "temperature.gpu_slowdown",
        "temperature_shutdown": "temperature.gpu_shutdown",
        "ecc_volatile_corrected": "ecc.volatile.total.correctable",
        "ecc_volatile_uncorrected": "ecc.volatile.total.uncorrectable",
        "ecc_aggregate_corrected": "ecc.aggregate.total.correctable",
        "ecc_aggregate_uncorrected": "ecc.aggregate.total.uncorrectable",
        "retired_pages_sbe": "retired_pages.single_bit",
        "retired_pages_dbe": "retired_pages.double_bit",
        "pcie_gen_current": "pcie.gen.current",
        "pcie_gen_max": "pcie.gen.max",
        "pcie_width_current": "pcie.width.current",
        "pcie_width_max": "pcie.width.max",
    }
    for src, dst in simple.items():
        if gpu.get(src) is not None:
            facts[dst] = gpu[src]
    if gpu.get("retired_pages_pending") is not None:
        facts["retired_pages.pending"] = bool(gpu["retired_pages_pending"])
    rows = gpu.get("remapped_rows")
    if isinstance(rows, list) and len(rows) >= 4:
        facts["remapped_rows.correctable"] = rows[0]
        facts["remapped_rows.uncorrectable"] = rows[1]
        facts["remapped_rows.pending"] = bool(rows[2])
        facts["remapped_rows.failure"] = bool(rows[3])
    mode = gpu.get("ecc_mode")
    if isinstance(mode, list) and mode:
        facts["ecc.mode.current"] = "Enabled" if mode[0] else "Disabled"
    if isinstance(gpu.get("clock_event_reasons"), int):
        facts.update(decode_clock_reasons(gpu["clock_event_reasons"]))
    return facts


def parse_nvml_json(text: str) -> dict[str, Facts]:
    """Facts per GPU bus id."""
    try:
        data = bounded_json.loads(text)
    except json.JSONDecodeError as err:
        raise NvmlDataError(f"nvml.json is not JSON: {err}") from err
    if not isinstance(data, dict) or not isinstance(data.get("gpus", []), list):
        raise NvmlDataError("nvml.json: expected an object with a 'gpus' list")
    out: dict[str, Facts] = {}
    for i, gpu in enumerate(data.get("gpus", [])):
        if isinstance(gpu, dict):
            out[str(gpu.get("bus_id") or f"gpu{i}").upper()] = gpu_facts(gpu)
    return out

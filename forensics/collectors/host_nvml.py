"""GPU state through NVML (pynvml), where the package is installed.

NVML gives the same counters as nvidia-smi as numbers: ECC counts, retired pages,
remapped rows, clock-event (throttle) bitmask, temperatures and PCIe link state.
NVML calls can block on a GPU in trouble, so the queries run in a child Python
(`python -m forensics.collectors.host_nvml`) that run_tool can kill at the time
limit. Values are stored raw (bitmasks as integers); parsers decode them.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any, Callable

from parsers.model.manifest import CollectorRecord, Status
from parsers.gather.registry import collector_file
from forensics.collect.tool import run_tool
from forensics.collectors.base import AlwaysEnabled, CollectOptions, HostTarget
from forensics.collectors.host_common import left_out, save_whole

MISSING_MARK = "pynvml-missing"


class NvmlCollector(AlwaysEnabled):
    """NVML values of every GPU, as nvml.json."""

    name = "nvml"

    def collect(self, target: HostTarget, options: CollectOptions) -> CollectorRecord:
        root = str(Path(__file__).resolve().parents[2])
        env = dict(os.environ)
        env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        res = run_tool([sys.executable, "-m", "forensics.collectors.host_nvml"], timeout=min(options.timeout, 30),
                       env=env)
        if res.timed_out:
            return CollectorRecord(self.name, Status.TIMEOUT,
                                   error=f"NVML queries did not finish in {res.seconds:.0f} s (GPU or driver hung?)")
        if MISSING_MARK in res.stdout:
            return CollectorRecord(self.name, Status.SKIPPED,
                                   error="pynvml is not installed (optional: pip install nvidia-ml-py); nvidia-smi "
                                         "gives the same counters")
        try:
            data = json.loads(res.stdout)
        except json.JSONDecodeError:
            return CollectorRecord(self.name, Status.FAILED,
                                   error=f"NVML query failed: {(res.stderr.strip() or res.stdout.strip())[-500:]}")
        if data.get("absent"):
            return CollectorRecord(self.name, Status.SKIPPED,
                                   error=f"{data['error']}: no NVIDIA driver on this host, nothing to collect")
        name = collector_file(self.name, "nvml-json")
        rel = save_whole(target, name, json.dumps(data, indent=1, sort_keys=True) + "\n")
        if rel is None:
            return left_out(target, self.name, name)
        if data.get("error"):
            return CollectorRecord(self.name, Status.FAILED, error=f"NVML: {data['error']}", files=[rel])
        return CollectorRecord(self.name, Status.OK, files=[rel], details={"gpus": len(data.get("gpus", []))})


def _call(errors: dict[str, str], name: str, fn: Callable[[], Any]) -> Any:
    """One NVML query; an unsupported or failing query becomes an error note, not a crash."""
    try:
        value = fn()
    except Exception as err:  # noqa: BLE001 - NVMLError_NotSupported and friends
        errors[name] = f"{type(err).__name__}: {err}"
        return None
    if isinstance(value, bytes):
        value = value.decode("utf-8", "replace")
    return value


def _device(nv: Any, index: int) -> dict[str, Any]:
    """Every value we want from one GPU, keyed by the NVML function's meaning."""
    errors: dict[str, str] = {}
    h = nv.nvmlDeviceGetHandleByIndex(index)
    out: dict[str, Any] = {"index": index}
    out["bus_id"] = _call(errors, "bus_id", lambda: nv.nvmlDeviceGetPciInfo(h).busId)
    out["name"] = _call(errors, "name", lambda: nv.nvmlDeviceGetName(h))
    out["uuid"] = _call(errors, "uuid", lambda: nv.nvmlDeviceGetUUID(h))
    out["temperature_gpu"] = _call(errors, "temperature_gpu",
                                   lambda: nv.nvmlDeviceGetTemperature(h, nv.NVML_TEMPERATURE_GPU))
    out["temperature_slowdown"] = _call(errors, "temperature_slowdown", lambda: nv.nvmlDeviceGetTemperatureThreshold(
        h, nv.NVML_TEMPERATURE_THRESHOLD_SLOWDOWN))
    out["temperature_shutdown"] = _call(errors, "temperature_shutdown", lambda: nv.nvmlDeviceGetTemperatureThreshold(
        h, nv.NVML_TEMPERATURE_THRESHOLD_SHUTDOWN))
    out["ecc_mode"] = _call(errors, "ecc_mode", lambda: list(nv.nvmlDeviceGetEccMode(h)))
    for scope, counter in (("volatile", nv.NVML_VOLATILE_ECC), ("aggregate", nv.NVML_AGGREGATE_ECC)):
        for kind, etype in (("corrected", nv.NVML_MEMORY_ERROR_TYPE_CORRECTED),
                            ("uncorrected", nv.NVML_MEMORY_ERROR_TYPE_UNCORRECTED)):
            key = f"ecc_{scope}_{kind}"
            out[key] = _call(errors, key, lambda c=counter, e=etype: nv.nvmlDeviceGetTotalEccErrors(h, e, c))
    out["retired_pages_sbe"] = _call(errors, "retired_pages_sbe", lambda: len(nv.nvmlDeviceGetRetiredPages(
        h, nv.NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS)))
    out["retired_pages_dbe"] = _call(errors, "retired_pages_dbe", lambda: len(nv.nvmlDeviceGetRetiredPages(
        h, nv.NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR)))
    out["retired_pages_pending"] = _call(errors, "retired_pages_pending",
                                         lambda: int(nv.nvmlDeviceGetRetiredPagesPendingStatus(h)))
    out["remapped_rows"] = _call(errors, "remapped_rows", lambda: list(nv.nvmlDeviceGetRemappedRows(h)))
    reasons = getattr(nv, "nvmlDeviceGetCurrentClocksEventReasons",
                      None) or nv.nvmlDeviceGetCurrentClocksThrottleReasons
    out["clock_event_reasons"] = _call(errors, "clock_event_reasons", lambda: int(reasons(h)))
    out["pcie_gen_current"] = _call(errors, "pcie_gen_current", lambda: nv.nvmlDeviceGetCurrPcieLinkGeneration(h))
    out["pcie_gen_max"] = _call(errors, "pcie_gen_max", lambda: nv.nvmlDeviceGetMaxPcieLinkGeneration(h))
    out["pcie_width_current"] = _call(errors, "pcie_width_current", lambda: nv.nvmlDeviceGetCurrPcieLinkWidth(h))
    out["pcie_width_max"] = _call(errors, "pcie_width_max", lambda: nv.nvmlDeviceGetMaxPcieLinkWidth(h))
    out["errors"] = errors
    return out


def dump() -> dict[str, Any]:
    """All GPUs' NVML values; {'error': ...} when NVML itself cannot start."""
    import pynvml as nv  # noqa: PLC0415 - optional dependency, imported only in the child

    try:
        nv.nvmlInit()
    except Exception as err:  # noqa: BLE001
        # No libnvidia-ml or no driver loaded: this host has no NVIDIA GPU to ask about.
        absent = type(err).__name__ in ("NVMLError_LibraryNotFound", "NVMLError_DriverNotLoaded")
        return {"error": f"nvmlInit: {type(err).__name__}: {err}", "absent": absent, "gpus": []}
    try:
        driver = _call({}, "driver", nv.nvmlSystemGetDriverVersion)
        count = nv.nvmlDeviceGetCount()
        return {"driver": driver, "gpus": [_device(nv, i) for i in range(count)]}
    finally:
        nv.nvmlShutdown()


def main() -> int:
    """Child entry point: print the JSON dump, or a marker when pynvml is absent."""
    try:
        import pynvml  # noqa: F401, PLC0415
    except ImportError:
        print(MISSING_MARK)
        return 0
    print(json.dumps(dump(), default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())

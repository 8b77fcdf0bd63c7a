"""Host evidence users paste into job output: kernel NVRM/Xid and AER lines, nvidia-smi and
Slurm's NVML complaints, CUDA error strings (the nccl-tests harness's `Test NCCL failure` line is
parsers.readers.nccl_tests').

Why in the text readers: a thread rarely comes with a separate kernel log; the proof
that a GPU fell off the bus is a dmesg line pasted under the training log, and the
proof of a driver/runtime mismatch is one CUDA error string. Each becomes a typed
ErrorEvent so the judge can weigh a host fault against a rank's silence. The dedicated
host readers (host_kernel, host_nvsmi, ...) read whole collected files; this module
only recognises single lines wherever they appear.
"""

from __future__ import annotations

import re

from parsers.model.events import ErrorEvent, ErrorKind, DeviceFault, Origin
from dataclasses import replace

from parsers.readers.host_kernel import split_line

_XID = re.compile(r"NVRM: Xid \(PCI:(?P<pci>[0-9A-Fa-f:.]+)\): (?P<xid>\d+)(?:, pid=(?P<pid>\d+|'?<unknown>'?))?"
                  r"(?:, name=(?P<name>[^,]+))?")
#: from the address to 'fallen off the bus' bounded to 256 characters (the driver's one sentence, 'The NVIDIA GPU
#: 0000:82:00.0 (PCI ID: 10de:1db4) installed in this system has fallen off the bus', puts 51 between): an open
#: `.*` scanned to the line's end from every 'NVIDIA GPU <pci>' of a long line, which is quadratic (issue 31)
_FELL = re.compile(r"(?:NVIDIA GPU (?P<pci>[0-9A-Fa-f]{4}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.\d).{0,256})?"
                   r"fallen off the bus")
_HANDLE = re.compile(r"Unable to determine the device handle for GPU ?"
                     r"(?P<pci>[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.\d)")
_LOST = re.compile(r"GPU is lost")
_AER = re.compile(r"(?:pcieport|nvidia) (?P<pci>[0-9A-Fa-f]{4}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.\d):\s+(?P<msg>.*)")
_DRIVER = re.compile(r"CUDA driver version is insufficient for CUDA runtime version")
#: `torch.OutOfMemoryError: CUDA out of memory. Tried to allocate ...` is the caching allocator's form of a
#: CUDA error (cudaErrorMemoryAllocation); it names no `CUDA error:` but is one
_CUDA = re.compile(r"Cuda failure (?:\d+ )?'(?P<what>[^']+)'|CUDA error: (?P<what2>[^.(]+)|Cuda Error: (?P<what3>.+)"
                   r"|CUDA (?P<what4>out of memory)\.")

_MARKERS = ("NVRM", "fallen off", "device handle", "GPU is lost", "pcieport", "AER:", "CUDA", "Cuda")


def match_line(text: str, origin: Origin) -> list:
    """Typed host/CUDA error events in one prefix-stripped line; [] when it says none of these."""
    if not any(m in text for m in _MARKERS):
        return []
    stamp, host, msg = split_line(text)
    if host and origin.host is None:  # a pasted syslog or clush line names its machine: the fault is that host's
        origin = replace(origin, host=host)
    events: list = []

    def add(kind: str, **data) -> None:
        events.append(ErrorEvent(kind=kind, message=msg, origin=origin, timestamp=stamp, source="host-text",
                                 data=DeviceFault(**data)))

    m = _XID.search(msg)
    if m:
        pid = m.group("pid")
        add(ErrorKind.XID, xid=int(m.group("xid")), pci=m.group("pci"),
            pid=int(pid) if pid and pid.isdigit() else None, process=(m.group("name") or "").strip() or None)
        if m.group("xid") == "79":
            add(ErrorKind.GPU_LOST, pci=m.group("pci"))
        return events
    m = _FELL.search(msg) if "fallen off the bus" in msg else None  # (no literal head: a scan at every position)
    if m:
        add(ErrorKind.GPU_LOST, pci=m.group("pci"))
        return events
    m = _HANDLE.search(msg)
    if m:
        add(ErrorKind.GPU_LOST, pci=m.group("pci"), detail=msg[m.end():].strip(" :") or None)
        return events
    if _LOST.search(msg):
        add(ErrorKind.GPU_LOST)
        return events
    if "NVRM:" in msg:  # any other driver message: recognised, kept for the host's record
        add(ErrorKind.NVRM, detail=msg[msg.index("NVRM:") + 5:].strip()[:300])
        return events
    m = _AER.search(msg) if "pcieport " in msg or "nvidia " in msg else None
    if m:
        add(ErrorKind.PCIE_ERROR, pci=m.group("pci"))
        return events
    if _DRIVER.search(msg):
        add(ErrorKind.CUDA_DRIVER_MISMATCH)
        return events
    m = _CUDA.search(msg)
    if m:
        add(ErrorKind.CUDA_ERROR,
            what=(m.group("what") or m.group("what2") or m.group("what3") or m.group("what4") or "").strip())
    return events

"""The host collectors `forensics collect` runs once per host, cheapest first.

Each is optional and bounded: a missing tool, file or permission gives a record
with status 'unavailable' or 'denied', never an exception. Hardware the host does not
have (no NVIDIA driver, no RDMA adapter) or the optional pynvml gives 'skipped' with the
reason, so a CPU-only or NVLink-only host still counts as completely collected.
"""

from __future__ import annotations

from forensics.collectors.base import HostCollector
from forensics.collectors.host_cpufreq import CpuFreqCollector
from forensics.collectors.host_disk import DiskCollector
from forensics.collectors.host_infiniband import InfinibandCollector
from forensics.collectors.host_kernel_log import KernelLogCollector
from forensics.collectors.host_memory import MemoryCollector
from forensics.collectors.host_nvidia_smi import NvidiaSmiCollector
from forensics.collectors.host_nvml import NvmlCollector

#: Collector classes, in run order. Instantiate fresh per collection (see host_collectors()).
HOST_COLLECTORS: list[type] = [
    MemoryCollector,
    CpuFreqCollector,
    InfinibandCollector,
    DiskCollector,
    KernelLogCollector,
    NvidiaSmiCollector,
    NvmlCollector,
]


def host_collectors() -> list[HostCollector]:
    """Fresh instances of every host collector."""
    return [cls() for cls in HOST_COLLECTORS]

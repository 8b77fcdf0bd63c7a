"""InfiniBand/RoCE port state and error counters from /sys/class/infiniband.

A flapping or down RDMA port is the usual cause of NCCL 'completion error'
failures between hosts. Sysfs holds port state, physical state, rate and the
standard port counters (link_downed, symbol_error, ...); they are copied raw.
"""

from __future__ import annotations

from pathlib import Path

from parsers.model.manifest import CollectorRecord, Status
from parsers.gather.registry import collector_file
from forensics.collectors.base import AlwaysEnabled, CollectOptions, HostTarget
from forensics.collectors.host_common import left_out, read_small, save_json

PORT_FILES = ("state", "phys_state", "rate", "link_layer", "lid", "sm_lid")
#: Folders of counters under each port; hw_counters is vendor-specific (mlx5: retransmits, timeouts).
COUNTER_DIRS = ("counters", "hw_counters")


class InfinibandCollector(AlwaysEnabled):
    """Every RDMA device's ports, their state and counters, as infiniband.json."""

    name = "infiniband"

    def __init__(self, sysfs: Path | str = "/sys") -> None:
        self.root = Path(sysfs) / "class" / "infiniband"

    def collect(self, target: HostTarget, options: CollectOptions) -> CollectorRecord:
        if not self.root.is_dir():
            return CollectorRecord(self.name, Status.SKIPPED,
                                   error=f"{self.root} does not exist (no RDMA adapter or driver): nothing to collect")
        devices: dict[str, dict] = {}
        for dev in sorted(self.root.iterdir()):
            ports: dict[str, dict] = {}
            for port in sorted((dev / "ports").glob("*")):
                entry = {name: read_small(port / name) for name in PORT_FILES}
                for folder in COUNTER_DIRS:
                    entry[folder] = {f.name: read_small(f) for f in sorted((port / folder).glob("*")) if f.is_file()}
                ports[port.name] = entry
            devices[dev.name] = {
                "fw_ver": read_small(dev / "fw_ver"),
                "node_desc": read_small(dev / "node_desc"),
                "ports": ports,
            }
        if not devices:
            return CollectorRecord(self.name, Status.SKIPPED, error=f"{self.root} is empty: nothing to collect")
        name = collector_file(self.name, "infiniband-json")
        rel = save_json(target, name, {"devices": devices})
        if rel is None:
            return left_out(target, self.name, name)
        return CollectorRecord(self.name, Status.OK, files=[rel], details={"devices": len(devices)})

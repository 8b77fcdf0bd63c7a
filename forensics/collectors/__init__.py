"""Every collector, in the order they run against a rank.

Rank collectors run per rank, ranks in parallel. Within one rank the ptrace tools
(py-spy, native-stack, gdb) run one after another: two tracers on one PID fail.
With --native, native frames come from native-stack (libdw) when libdw is present,
else from py-spy --native; gdb stays the opt-in deep tool.
"""

from __future__ import annotations

from forensics.collectors.base import HostCollector, RankCollector
from forensics.collectors.environment import EnvironmentCollector
from forensics.collectors.flight_recorder import FlightRecorderCollector
from forensics.collectors.gdb import GdbCollector
from forensics.collectors.host import host_collectors as _host_evidence_collectors
from forensics.collectors.native_stack import NativeStackCollector
from forensics.collectors.nccl_logs import NcclLogCollector
from forensics.collectors.process_state import ProcessStateCollector
from forensics.collectors.pyspy import PySpyCollector
from forensics.collectors.pyspy_samples import PySpySamplesCollector
from forensics.collectors.ras import RasCollector
from forensics.collectors.recorder import RecorderCollector
from forensics.collectors.stdio import StdioCollector


def rank_collectors() -> list[RankCollector]:
    """Fresh instances, cheapest first; process state first so 'before' is truly before."""
    return [
        ProcessStateCollector(),
        EnvironmentCollector(),
        StdioCollector(),
        NcclLogCollector(),
        FlightRecorderCollector(),
        RecorderCollector(),
        PySpyCollector(),
        PySpySamplesCollector(),
        NativeStackCollector(),
        GdbCollector(),
    ]


def host_collectors() -> list[HostCollector]:
    """Collectors run once per host: NCCL RAS first (it answers only while the job lives),
    then the host evidence (kernel log, GPUs, InfiniBand, CPU frequency, disk, memory)."""
    return [RasCollector(), *_host_evidence_collectors()]

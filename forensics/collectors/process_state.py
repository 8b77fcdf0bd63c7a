"""Process state from /proc: state letter, wait channels, threads, start time."""

from __future__ import annotations

import json

from forensics import safefs
from parsers.model.manifest import CollectorRecord, Status
from parsers.gather.registry import collector_file
from forensics.collectors.base import AlwaysEnabled, CollectOptions, RankTarget
from forensics.discover import procfs


class ProcessStateCollector(AlwaysEnabled):
    """Snapshot of /proc for one rank; cheap, so it always runs (first and last)."""

    name = "process_state"

    def collect(self, target: RankTarget, options: CollectOptions) -> CollectorRecord:
        try:
            state = procfs.read_proc_state(target.pid)
        except procfs.ProcessGone:
            return CollectorRecord(self.name, Status.GONE, error=f"pid {target.pid} no longer exists")
        path, rel = target.out(collector_file(self.name, "process-state"))
        text = json.dumps(state.to_dict(), indent=1) + "\n"
        # always written (the first evidence of a rank), and counted, so the stack tools after it get what is left:
        # 1,000 threads make about 90 KB
        target.budget.settle(target.budget.reserve(len(text)), len(text))
        safefs.write_new(path, text)
        return CollectorRecord(self.name, Status.OK, files=[rel], details={"state": state.state})

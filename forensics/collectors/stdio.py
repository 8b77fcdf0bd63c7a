"""The rank's stdout and stderr, when they go to files.

That is where PyTorch's watchdog, gloo errors, tracebacks and (without
NCCL_DEBUG_FILE) NCCL's own log lines end up. /proc/PID/fd/1 and /2 say where.
"""

from __future__ import annotations

from pathlib import Path

from parsers.model.manifest import CollectorRecord, Status
from forensics.collectors.base import CollectOptions, RankTarget
from forensics.collectors.files import copy_tail
from forensics.discover import procfs


class StdioCollector:
    name = "stdio"
    uses_ptrace = False

    def enabled(self, options: CollectOptions) -> bool:
        return True

    def collect(self, target: RankTarget, options: CollectOptions) -> CollectorRecord:
        if not procfs.pid_exists(target.pid):
            return CollectorRecord(self.name, Status.GONE, error=f"pid {target.pid} no longer exists")
        files, seen, details = [], {}, {}
        for fd, name in ((1, "stdout.log"), (2, "stderr.log")):
            where = procfs.fd_target(target.pid, fd)
            details[name.split(".")[0]] = where
            if not where or not where.startswith("/") or not Path(where).is_file():
                continue
            if where in seen:
                details[f"{name.split('.')[0]}_same_as"] = seen[where]
                continue
            path, rel = target.out(name)
            _, cut = copy_tail(Path(where), path, options.log_tail_bytes)
            seen[where] = rel
            files.append(rel)
            if cut:
                details[f"{name}_truncated_to_bytes"] = options.log_tail_bytes
        if not files:
            return CollectorRecord(self.name, Status.SKIPPED, error="stdout/stderr are not files (pipe or terminal)", details=details)
        return CollectorRecord(self.name, Status.OK, files=files, details=details)

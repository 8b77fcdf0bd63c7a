"""The rank's stdout and stderr, when they go to files.

That is where PyTorch's watchdog, gloo errors, tracebacks and (without
NCCL_DEBUG_FILE) NCCL's own log lines end up. /proc/PID/fd/1 and /2 say where.
"""

from __future__ import annotations

import os
from pathlib import Path

from forensics.bundle.manifest import CollectorRecord, Status
from forensics.collectors.base import CollectOptions, RankTarget
from forensics.collectors.files import copy_target_log
from parsers.safeio import UnsafeFile
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
            if not where or not where.startswith("/") or not os.path.lexists(where):
                continue  # a pipe, a terminal, a socket, or a file outside our mount namespace
            if where in seen:
                details[f"{name.split('.')[0]}_same_as"] = seen[where]
                continue
            path, rel = target.out(name)
            try:
                _, cut = copy_target_log(target.pid, Path(where), path, options.log_tail_bytes)
            except OSError as err:  # UnsafeFile included: a FIFO, a device, a link, another owner
                details[f"{name.split('.')[0]}_refused"] = str(err)
                continue
            seen[where] = rel
            files.append(rel)
            if cut:
                details[f"{name}_truncated_to_bytes"] = options.log_tail_bytes
        refused = [v for k, v in details.items() if k.endswith("_refused")]
        if not files and refused:
            return CollectorRecord(self.name, Status.DENIED, error="not copied: " + "; ".join(refused), details=details)
        if not files:
            return CollectorRecord(self.name, Status.SKIPPED, error="stdout/stderr are not files (pipe or terminal)", details=details)
        return CollectorRecord(self.name, Status.OK, files=files, details=details)

"""The rank's output files: stdout/stderr, torchrun logs, Slurm output, torchelastic error file.

That is where PyTorch's watchdog, gloo errors, tracebacks and (without
NCCL_DEBUG_FILE) NCCL's own log lines end up. forensics.discover.outputs says where
(and refuses what is not a regular file owned by the target); this copies bounded tails.
"""

from __future__ import annotations

from pathlib import Path

from parsers.input.ints import as_int
from parsers.model.manifest import CollectorRecord, Status
from forensics.collectors.base import AlwaysEnabled, CollectOptions, RankTarget
from forensics.collectors.files import copy_target_log
from forensics.discover import outputs, procfs


class StdioCollector(AlwaysEnabled):
    name = "stdio"

    def collect(self, target: RankTarget, options: CollectOptions) -> CollectorRecord:
        if not procfs.pid_exists(target.pid):
            return CollectorRecord(self.name, Status.GONE, error=f"pid {target.pid} no longer exists")
        details: dict = {"stdout": procfs.fd_target(target.pid, 1), "stderr": procfs.fd_target(target.pid, 2)}
        local_rank = as_int(target.environ.get("LOCAL_RANK"), text=True, low=0)  # hostile env: bounded
        files, found, taken, refused = [], [], set(), []
        for item in outputs.locate_outputs(target.pid, target.environ, local_rank) + list(target.outputs):
            name = outputs.bundle_name(item, taken)
            path, rel = target.out(name)
            # the whole tail is reserved (the file may have grown since discovery); settle() returns the rest
            want = options.log_tail_bytes
            granted = target.budget.reserve(want)  # the rank's and the collection's byte caps
            if granted < want and granted <= 0:
                refused.append(target.budget.cut(item.path, item.size, 0))
                continue
            try:  # owner-checked, no links followed, bounded tail, secrets redacted (collectors.files)
                copied = copy_target_log(target.pid, Path(item.path), path, granted)
            except OSError as err:  # UnsafeFile included: a FIFO, a device, a link, another owner
                target.budget.settle(granted, 0)
                refused.append(f"{item.path}: {err}")
                continue
            target.budget.settle(granted, copied[0])
            files.append(rel)
            entry = {"kind": item.kind, "stream": item.stream, "path": item.path, "file": rel, "size": item.size}
            if granted < want:
                entry["byte_cap"] = target.budget.cut(item.path, item.size, granted)
            if copied[1]:
                entry["truncated_to_bytes"] = granted
                details[f"{name}_truncated_to_bytes"] = granted
            found.append(entry)
        fd_paths = [e["path"] for e in found if e["kind"] == "fd"]
        if details["stdout"] and details["stdout"] == details["stderr"] and fd_paths:
            details["stderr_same_as"] = next(e["file"] for e in found if e["kind"] == "fd")
        details["outputs"] = found
        if refused:
            details["refused"] = refused
        if not files and refused:
            return CollectorRecord(self.name, Status.DENIED, error="not copied: " + "; ".join(refused), details=details)
        if not files:
            return CollectorRecord(self.name, Status.SKIPPED,
                                   error="no output file found (stdout/stderr are pipes or terminals; no torchrun log, "
                                         "Slurm output or error file)", details=details)
        return CollectorRecord(self.name, Status.OK, files=files, details=details)

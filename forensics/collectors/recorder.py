"""The recorder's state files of a rank (nccl_patches/), copied into the bundle.

The collect stage of the recorder; parsers/readers/recorder.py decodes what this copies and
parsers/judges/recorder.py judges it (one module per stage, one name for the component).

The recorder writes `<dir>/nccl-recorder.<host>.<pid>.<n>.bin` (one per
communicator, n counting from 0 in each process) plus, after a signal or at exit,
a text snapshot with the same stem and `.txt`. `<dir>` is FORENSICS_RECORDER_DIR
from the rank's environment, default /dev/shm. Reading these files never signals
the rank, so this works on hung and stopped processes alike.

This collector only copies bytes and notes when it copied them (the reader
measures heartbeat age against that time). It never interprets the files.
"""

from __future__ import annotations

import time

from parsers.model.manifest import CollectorRecord, Status
from parsers.gather.registry import collector_folder
from forensics.collectors.base import AlwaysEnabled, CollectOptions, RankTarget
from forensics.collect.budget import apparent_size
from forensics.collectors.files import copy_whole_or_refuse

from forensics.discover.recorder_files import (DEFAULT_DIR, DIR_KEY, MAX_FILES, MAX_SCAN, PREFIX,  # noqa: F401
                                               recorder_dir, state_files)

MAX_STATE_BYTES = 64 * 1024 * 1024  #: one state file or snapshot; larger is refused (a link to /dev/zero read 3.8 GB)


class RecorderCollector(AlwaysEnabled):
    """Copies the recorder's state files and text snapshots of one rank."""

    #: bundles written before the rename say "nccl_recorder" (parsers.model.manifest.COLLECTOR_ALIASES)
    name = "recorder"

    def collect(self, target: RankTarget, options: CollectOptions) -> CollectorRecord:
        directory = recorder_dir(target.pid, target.environ)
        found = state_files(directory, target.pid)
        if not found and target.recorder_files:  # an exited rank: its copy where its siblings' copies go
            found = list(target.recorder_files)[:MAX_FILES]
            directory = found[0].parent
        plugin = target.environ.get("NCCL_PROFILER_PLUGIN")
        if not found:
            why = f"no recorder state files for pid {target.pid} in {directory}"
            if not plugin:
                why += " (NCCL_PROFILER_PLUGIN is not set in the rank's environment)"
            return CollectorRecord(self.name, Status.SKIPPED, error=why, details={"dir": str(directory)})
        files, copied, refused = [], {}, {}
        for src in found:
            path, rel = target.out(f"{collector_folder(self.name, 'recorder-state')}/{src.name}")
            size = apparent_size(src)  # st_size: a sparse file counts whole
            want = MAX_STATE_BYTES if size is None else min(MAX_STATE_BYTES, size)
            granted = target.budget.reserve(want)  # the rank's and the collection's byte caps
            if granted < want:  # a cut state file is useless: whole or not at all
                target.budget.settle(granted, 0)
                refused[src.name] = target.budget.cut(str(src), size, 0)
                continue
            used = 0
            try:
                used = copy_whole_or_refuse(target.pid, src, path, granted)
            except FileNotFoundError:
                continue  # finalized and removed between listing and copying
            except OSError as err:  # a link, a FIFO or device, another owner, too large
                refused[src.name] = str(err)
                continue
            finally:
                target.budget.settle(granted, used)
            copied[rel] = time.time_ns()
            files.append(rel)
        status = Status.OK if files else (Status.DENIED if refused else Status.GONE)
        details = {"dir": str(directory), "copied_ns": copied, "profiler_plugin": plugin}
        if refused:
            details["refused"] = refused
        error = ("not copied: " + "; ".join(refused.values())) if refused and not files else None
        return CollectorRecord(self.name, status, error=error, files=files, details=details)

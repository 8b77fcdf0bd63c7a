"""PyTorch Flight Recorder dumps of a rank, copied byte for byte.

The dump file is `<prefix><rank>` where the prefix is TORCH_FR_DUMP_TEMP_FILE (older
name TORCH_NCCL_DEBUG_INFO_TEMP_FILE, default /tmp/nccl_trace_rank_). Dumps are
pickles: they are copied, never loaded here (the parsers load them as plain data).
"""

from __future__ import annotations

import os
from pathlib import Path

from parsers.model.manifest import CollectorRecord, Status
from parsers.gather.registry import collector_folder
from forensics.collectors.base import AlwaysEnabled, CollectOptions, RankTarget
from forensics.collectors.files import copy_whole_or_refuse, process_path
from forensics.collect.budget import apparent_size

PREFIX_KEYS = ("TORCH_FR_DUMP_TEMP_FILE", "TORCH_NCCL_DEBUG_INFO_TEMP_FILE")
DEFAULT_PREFIX = "/tmp/nccl_trace_rank_"
MAX_DUMP_BYTES = 256 * 1024 * 1024  #: a dump larger than this is refused, not copied (a cut pickle is useless)
MAX_CANDIDATES = 16  #: dump files per rank (a folder of thousands of look-alikes is not evidence)
MAX_SCAN = 100_000  #: directory entries looked at (the prefix may be a huge shared /tmp)


def dump_candidates(prefix: Path, rank: int) -> list[Path]:
    """Files named `<prefix><rank>` or `<prefix><rank>.<ext>` (not rank 1 matching rank 12)."""
    stem = prefix.name + str(rank)
    folder = prefix.parent
    found = []
    try:
        with os.scandir(folder) as entries:
            for seen, entry in enumerate(entries):
                if seen >= MAX_SCAN or len(found) >= MAX_CANDIDATES:
                    break
                if entry.name == stem or entry.name.startswith(stem + "."):
                    found.append(Path(entry.path))  # links and FIFOs too: the copy refuses them, and says so
    except OSError:
        return []
    return sorted(found)


class FlightRecorderCollector(AlwaysEnabled):
    name = "flight_recorder"

    def collect(self, target: RankTarget, options: CollectOptions) -> CollectorRecord:
        if target.rank is None:
            return CollectorRecord(self.name, Status.SKIPPED, error="rank unknown: cannot name its dump file")
        configured = next((target.environ[k] for k in PREFIX_KEYS if target.environ.get(k)), None)
        prefix = process_path(target.pid, configured or DEFAULT_PREFIX)
        found = dump_candidates(prefix, target.rank)
        if not found:
            why = f"no dump at {prefix}{target.rank}"
            if not configured:
                why += " (TORCH_FR_DUMP_TEMP_FILE not set; default prefix tried)"
            return CollectorRecord(self.name, Status.SKIPPED, error=why)
        files, refused = [], {}
        cap = int(options.extra.get("max_dump_bytes", MAX_DUMP_BYTES))
        for src in found:
            path, rel = target.out(f"{collector_folder(self.name, 'fr-dump')}/{src.name}")
            size = apparent_size(src)  # st_size: a sparse dump counts whole
            want = cap if size is None else min(cap, size)
            granted = target.budget.reserve(want)  # the rank's and the collection's byte caps
            if granted < want:  # a cut pickle is useless: whole or not at all
                target.budget.settle(granted, 0)
                refused[str(src)] = target.budget.cut(str(src), size, 0)
                continue
            used = 0
            try:
                used = copy_whole_or_refuse(target.pid, src, path, granted)
            except FileNotFoundError:
                continue  # removed between listing and copying
            except OSError as err:  # UnsafeFile: a link, a FIFO, another owner, too large
                refused[str(src)] = str(err)
                continue
            finally:
                target.budget.settle(granted, used)
            files.append(rel)
        details = {"prefix": str(prefix), **({"refused": refused} if refused else {})}
        if not files and refused:
            return CollectorRecord(self.name, Status.DENIED, error="not copied: " + "; ".join(refused.values()),
                                   details=details)
        if not files:
            return CollectorRecord(self.name, Status.GONE, error="dump files vanished while copying", details=details)
        return CollectorRecord(self.name, Status.OK, files=files, details=details)

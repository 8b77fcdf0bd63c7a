"""PyTorch Flight Recorder dumps of a rank, copied byte for byte.

The dump file is `<prefix><rank>` where the prefix is TORCH_FR_DUMP_TEMP_FILE (older
name TORCH_NCCL_DEBUG_INFO_TEMP_FILE, default /tmp/nccl_trace_rank_). Dumps are
pickles: they are copied, never loaded here (the parsers load them as plain data).
"""

from __future__ import annotations

from pathlib import Path

from parsers.model.manifest import CollectorRecord, Status
from forensics.collectors.base import CollectOptions, RankTarget
from forensics.collectors.files import copy_tail, process_path

PREFIX_KEYS = ("TORCH_FR_DUMP_TEMP_FILE", "TORCH_NCCL_DEBUG_INFO_TEMP_FILE")
DEFAULT_PREFIX = "/tmp/nccl_trace_rank_"


def dump_candidates(prefix: Path, rank: int) -> list[Path]:
    """Files named `<prefix><rank>` or `<prefix><rank>.<ext>` (not rank 1 matching rank 12)."""
    stem = prefix.name + str(rank)
    folder = prefix.parent
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.iterdir() if p.is_file() and (p.name == stem or p.name.startswith(stem + ".")))


class FlightRecorderCollector:
    name = "flight_recorder"
    uses_ptrace = False

    def enabled(self, options: CollectOptions) -> bool:
        return True

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
        files = []
        for src in found:
            path, rel = target.out(f"flight_recorder/{src.name}")
            copy_tail(src, path, 1 << 40)
            files.append(rel)
        return CollectorRecord(self.name, Status.OK, files=files, details={"prefix": str(prefix)})

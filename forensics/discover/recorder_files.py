"""Where a rank's NCCL recorder state files are (nccl_patches/): the directory and the file names.

Why in discover/: finding an exited rank's number reads its own recorder file (forensics.discover.exited),
and the recorder collector (forensics.collectors.recorder) copies the same files; both take the places
from here, so discovery imports nothing from the collectors.
"""

from __future__ import annotations

import itertools
from pathlib import Path

DIR_KEY = "FORENSICS_RECORDER_DIR"
DEFAULT_DIR = "/dev/shm"
PREFIX = "nccl-recorder."
MAX_FILES = 256  #: state files per process (one per communicator)
MAX_SCAN = 100_000  #: directory entries looked at (/dev/shm may be crowded)


def recorder_dir(pid: int, environ: dict[str, str]) -> Path:
    """The directory the rank writes to, as this process can reach it.

    A rank in a container sees its own /dev/shm: /proc/<pid>/root reaches it when
    we may look there; otherwise the path is taken as it is.
    """
    configured = environ.get(DIR_KEY) or DEFAULT_DIR
    via_root = Path(f"/proc/{pid}/root") / configured.lstrip("/")
    try:
        if via_root.is_dir():
            return via_root
    except OSError:
        pass
    return Path(configured)


def state_files(directory: Path, pid: int) -> list[Path]:
    """Files of process `pid`: `nccl-recorder.<host>.<pid>.<n>.bin|.txt` (the writer cuts host at its first dot)."""
    try:
        entries = list(itertools.islice(directory.iterdir(), MAX_SCAN))
    except OSError:
        return []
    found = []
    for path in entries:
        if len(found) >= MAX_FILES:
            break
        parts = path.name.split(".")
        # nccl-recorder . host . pid . n . ext
        if len(parts) == 5 and path.name.startswith(PREFIX) and parts[2] == str(pid) and parts[4] in ("bin", "txt"):
            found.append(path)
    return sorted(found)

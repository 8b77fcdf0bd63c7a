"""Copying files a rank writes (its stdout/stderr, NCCL logs, Flight Recorder dumps).

Logs can be huge, so only their last `max_bytes` are kept, which is where a hang's
story is. Paths a process names are relative to its working directory.
"""

from __future__ import annotations

import os
from pathlib import Path

from forensics.discover import procfs


def copy_tail(src: Path, dest: Path, max_bytes: int) -> tuple[int, bool]:
    """Copy the last max_bytes of src to dest; returns (bytes copied, whether cut)."""
    size = src.stat().st_size
    start = max(0, size - max_bytes)
    dest.parent.mkdir(parents=True, exist_ok=True)
    with open(src, "rb") as fin, open(dest, "wb") as fout:
        fin.seek(start)
        copied = 0
        while chunk := fin.read(1 << 20):
            fout.write(chunk)
            copied += len(chunk)
    return copied, start > 0


def process_path(pid: int, path: str) -> Path:
    """A path as the process sees it: relative ones resolve against its working directory."""
    if os.path.isabs(path):
        return Path(path)
    try:
        cwd = os.readlink(procfs.PROC / str(pid) / "cwd")
    except OSError:
        cwd = "."
    return Path(cwd) / path

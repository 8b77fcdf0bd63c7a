"""Unpack a tar archive of evidence safely: regular files and folders only, inside the destination.

Why: archives come from other machines and people. Links, devices, absolute or '..'
paths and setuid bits are refused or dropped; sizes are capped so a small archive
cannot fill the disk.
"""

from __future__ import annotations

import tarfile
from pathlib import Path

MAX_MEMBERS = 1_000_000
MAX_TOTAL_BYTES = 64 * 1024**3


def extract(archive: Path, dest: Path) -> None:
    """Extract `archive` into `dest`; ValueError when the archive breaks a rule."""
    total = 0
    with tarfile.open(archive) as tar:
        members = []
        for n, m in enumerate(tar):
            if n >= MAX_MEMBERS:
                raise ValueError(f"more than {MAX_MEMBERS} members")
            if not (m.isfile() or m.isdir()) or m.name.startswith("/") or ".." in Path(m.name).parts:
                continue
            total += m.size
            if total > MAX_TOTAL_BYTES:
                raise ValueError(f"expands to more than {MAX_TOTAL_BYTES} bytes")
            m.mode &= 0o755 if m.isdir() else 0o644
            members.append(m)
        tar.extractall(dest, members=members, filter="data") if hasattr(tarfile, "data_filter") else \
            tar.extractall(dest, members=members)  # noqa: S202 - members filtered above

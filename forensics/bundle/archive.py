"""Packs a bundle folder into one .tar.gz, the form that travels in tickets and chat."""

from __future__ import annotations

import os
import tarfile
from pathlib import Path

from forensics import safefs


def archive_path(folder: Path) -> Path:
    """`<folder>.tar.gz`, beside the folder: where collect --tar writes."""
    folder = Path(folder)
    return folder.with_name(folder.name + ".tar.gz")


def make_archive(folder: Path, dest: Path | None = None) -> Path:
    """Write `folder` as `<folder>.tar.gz` (or `dest`), with the folder name as top entry.

    The archive is a new file (O_CREAT|O_EXCL|O_NOFOLLOW, 0600): an existing name, or a link
    another user planted there, is refused (ForensicsError), never followed or overwritten.
    Links inside the folder are stored as links, not followed.
    """
    folder = Path(folder)
    dest = Path(dest) if dest else archive_path(folder)
    fd = safefs.create(dest)
    try:
        with os.fdopen(fd, "wb") as raw, tarfile.open(fileobj=raw, mode="w:gz") as tar:
            lock = f"{folder.name}/{safefs.LOCK_NAME}"  # held by a running collect (fleet packs before it ends)
            tar.add(folder, arcname=folder.name, filter=lambda info: None if info.name == lock else info)
    except BaseException:
        dest.unlink(missing_ok=True)
        raise
    return dest

"""Packs a bundle folder into one .tar.gz, the form that travels in tickets and chat."""

from __future__ import annotations

import tarfile
from pathlib import Path


def make_archive(folder: Path, dest: Path | None = None) -> Path:
    """Write `folder` as `<folder>.tar.gz` (or `dest`), with the folder name as top entry."""
    folder = Path(folder)
    dest = Path(dest) if dest else folder.with_name(folder.name + ".tar.gz")
    with tarfile.open(dest, "w:gz") as tar:
        tar.add(folder, arcname=folder.name)
    return dest

"""Opens a bundle (directory or .tar/.tar.gz archive) and validates its manifest.

Every failure becomes a ForensicsError that says what is wrong and where, so a
user handed a wrong path or a damaged bundle knows what to do next.
"""

from __future__ import annotations

import json
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path

from forensics.bundle.manifest import MANIFEST_NAME, Manifest, RankRecord, manifest_from_dict
from forensics.errors import ForensicsError


@dataclass
class Bundle:
    """An opened bundle: its root folder and validated manifest."""

    root: Path
    manifest: Manifest

    def path(self, rel: str) -> Path:
        """Absolute path of a file named in the manifest; refuses paths that leave the bundle."""
        full = (self.root / rel).resolve()
        if self.root.resolve() not in full.parents and full != self.root.resolve():
            raise ForensicsError(f"bundle names a file outside itself: {rel!r}")
        return full

    def rank_files(self, rank: RankRecord, collector: str) -> list[Path]:
        """Files that collector `collector` wrote for `rank` and that exist."""
        rec = rank.collector(collector)
        if rec is None:
            return []
        return [p for p in (self.path(f) for f in rec.files) if p.is_file()]


def is_bundle(path: Path) -> bool:
    """True when `path` looks like a bundle (a manifest.json or a tar archive)."""
    path = Path(path)
    return (path / MANIFEST_NAME).is_file() or (path.is_file() and tarfile.is_tarfile(path))


def open_bundle(path: Path | str) -> Bundle:
    """Open and validate a bundle directory or archive."""
    path = Path(path)
    if not path.exists():
        raise ForensicsError(f"{path}: no such file or directory")
    if path.is_file():
        path = _extract(path)
    manifest_path = path / MANIFEST_NAME
    if not manifest_path.is_file():
        raise ForensicsError(f"{path}: not a bundle (no {MANIFEST_NAME}); pass a folder written by 'forensics collect'")
    try:
        data = json.loads(manifest_path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ForensicsError(f"{manifest_path}: corrupted manifest ({err})") from err
    try:
        manifest = manifest_from_dict(data)
    except (ValueError, TypeError) as err:
        raise ForensicsError(f"{manifest_path}: invalid manifest: {err}") from err
    return Bundle(root=path, manifest=manifest)


def _extract(archive: Path) -> Path:
    """Unpack an archive into a temp folder, refusing links and paths that escape it."""
    if not tarfile.is_tarfile(archive):
        raise ForensicsError(f"{archive}: not a bundle (neither a folder nor a tar archive)")
    dest = Path(tempfile.mkdtemp(prefix="forensics-bundle-"))
    try:
        with tarfile.open(archive) as tar:
            members = [m for m in tar.getmembers() if _safe_member(m)]
            tar.extractall(dest, members=members)  # noqa: S202 - members filtered above
    except (tarfile.TarError, OSError, EOFError) as err:
        raise ForensicsError(f"{archive}: damaged archive ({err})") from err
    entries = [p for p in dest.iterdir()]
    if len(entries) == 1 and entries[0].is_dir() and (entries[0] / MANIFEST_NAME).exists():
        return entries[0]
    return dest


def _safe_member(member: tarfile.TarInfo) -> bool:
    name = member.name
    return (member.isfile() or member.isdir()) and not name.startswith("/") and ".." not in Path(name).parts

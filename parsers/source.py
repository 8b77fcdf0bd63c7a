"""Where evidence comes from: a bundle folder, a loose folder, or an archive of either.

Why one opener: every command (`analyze`, `report`, `hosts`, `postmortem.load`,
`bisect --from-bundles`) must accept what the user has. A bundle differs from a
loose folder only in its manifest, which adds hints (the rank, pid and host of each
process's files, the world size, which collectors ran and how they ended); the files
themselves go through the same readers either way.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tarfile
import tempfile
import weakref
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from parsers import safeio
from parsers.archive import remove_temp, temp_folder
from parsers.errors import InputError
from parsers.model.manifest import MANIFEST_NAME, Manifest, manifest_from_dict

#: a file named by a manifest or found in a folder is read only below this many per source
MAX_FILES = 2_000_000
#: folders deeper than this are not walked (hostile archives nest thousands)
MAX_DEPTH = 32
#: 'rank3.log', 'rank_3', 'node1.rank-12.err', 'r3.log', 'log_r3'; not 'open-r1-620.log' (an issue number)
_RANK_IN_NAME = re.compile(r"(?:^|[^a-z])rank[_.-]?(\d{1,6})(?:[_.-]|$)|(?:^|[_.])r(\d{1,6})(?:[_.]|$)", re.I)
_PID_IN_NAME = re.compile(r"(?:^|[^a-z])pid[_.-]?(\d{1,9})(?:\D|$)", re.I)
_GENERIC_DIRS = {"logs", "log", "nccl", "fr", "dumps", "stdout", "stderr", "out", "output", "artifacts", "tmp",
                 "ras", "pyspy", "stacks", "traces", "ranks", "hosts", "files", "nccl_recorder", "flight_recorder"}
#: the scenario runner's own answer key and our own saved analyses: never evidence
_SKIP_NAMES = {"truth.json", "summary.json", "analysis.json"}


@dataclass(slots=True)
class Hints:
    """What is known of a file before reading it: from the manifest (strong) or its path (weak)."""

    host: str | None = None
    pid: int | None = None
    rank: int | None = None
    collector: str | None = None  #: the collector that wrote it (bundles)
    from_manifest: bool = False
    observed_ns: int | None = None  #: recorder files: copy time
    parent_pid: int | None = None  #: a child's files (DataLoader worker...): the rank process it belongs to


@dataclass(slots=True)
class FileRef:
    """One file to read: absolute path, the path to cite (relative to the source), hints."""

    path: Path
    rel: str
    hints: Hints = field(default_factory=Hints)


@dataclass
class Source:
    """An opened source of evidence. Use as a context manager: archives unpack to a temp folder."""

    root: Path
    given: Path  #: what the user passed (the archive itself, for archives)
    form: str  #: 'bundle' | 'folder' | 'archive-bundle' | 'archive-folder'
    manifest: Manifest | None = None
    files: list[FileRef] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)
    _temp: Path | None = None

    @property
    def is_bundle(self) -> bool:
        return self.manifest is not None

    def close(self) -> None:
        if self._temp is not None:
            remove_temp(self._temp)
            self._temp = None

    def __enter__(self) -> "Source":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def path(self, rel: str) -> Path:
        """A path a manifest names, confined to the source (absolute and '..' paths refused).

        Folders are resolved once each (a bundle has a few files per rank folder): the check
        that no link leads outside costs one lstat per new folder, not a realpath per file.
        """
        if not isinstance(rel, str) or "/" not in rel or rel.startswith("/") or "\x00" in rel:
            return confine(self.root, rel)
        head, name = rel.rsplit("/", 1)
        if name in ("", ".", "..") or "\\" in rel:
            return confine(self.root, rel)
        return Path(self._folder(head) + "/" + name)

    def _folder(self, head: str) -> str:
        """A confined folder (as a string: a 100k-rank bundle has 400k of them), built from its confined
        parent; a link is resolved and checked whole, as confine does."""
        cache = self.__dict__.setdefault("_dirs", {})
        found = cache.get(head)
        if found is not None:
            return found
        parent, _, last = head.rpartition("/")
        if last in ("", ".", "..") or len(cache) > 4 * MAX_FILES:
            found = str(confine(self.root, head))
        else:
            base = self._folder(parent) if parent else self.__dict__.setdefault("_root", str(self.root.resolve()))
            found = base + "/" + last
            if os.path.islink(found):
                found = str(confine(self.root, head))
        cache[head] = found
        return found

    def rank_files(self, rank: Any, collector: str) -> list[Path]:
        """Files that collector `collector` wrote for manifest rank `rank` and that exist."""
        rec = rank.collector(collector)
        if rec is None:
            return []
        out = []
        for rel in rec.files:
            try:
                p = self.path(rel)
            except InputError:
                continue
            if p.is_file():
                out.append(p)
        return out


def confine(root: Path, rel: str) -> Path:
    """`root/rel` when it stays inside `root` (parsers.safeio.confine); InputError otherwise."""
    try:
        return safeio.confine(root, rel)
    except safeio.UnsafeFile as err:
        raise InputError(f"the manifest names a file outside the bundle: {rel!r} ({err})") from err


def open_source(path: Path | str) -> Source:
    """Open a bundle, a loose folder, or a tar archive of either; InputError on anything else."""
    given = Path(path).expanduser()
    if not given.exists():
        raise InputError(f"{given}: no such file or directory")
    if given.is_dir():
        return _open_folder(given, given, temp=None)
    if not given.is_file():
        raise InputError(f"{given}: not a regular file or folder")
    if not is_archive(given):
        raise InputError(f"{given}: not a bundle, folder or tar archive",
                         help="pass a folder written by 'forensics collect', a folder of logs, or a .tar.gz of either")
    temp = temp_folder("forensics-src-")  # removed on SIGTERM/SIGHUP too (parsers.archive.temp_folder)
    try:
        root = _extract(given, temp)
        src = _open_folder(root, given, temp=temp)
    except BaseException:
        remove_temp(temp)
        raise
    src.form = "archive-" + src.form
    weakref.finalize(src, remove_temp, str(temp))  # removed even when a caller never closes it
    return src


def is_archive(path: Path) -> bool:
    """True for a regular file that tarfile can open (plain or compressed tar)."""
    try:
        return Path(path).is_file() and tarfile.is_tarfile(path)
    except OSError:
        return False


def _open_folder(root: Path, given: Path, temp: Path | None) -> Source:
    """A folder with a manifest.json is a bundle and its manifest must be valid; any other folder is loose."""
    manifest = read_manifest(root) if (root / MANIFEST_NAME).is_file() else None
    src = Source(root=root, given=given, form="bundle" if manifest else "folder", manifest=manifest, _temp=temp)
    if manifest is not None:
        _bundle_files(src, manifest)
    else:
        _folder_files(src)
    return src


def is_manifest(path: Path) -> bool:
    """True when `path` is a hang-forensics manifest (its format field says so)."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(4096)
    except OSError:
        return False
    return b'"hang-forensics-bundle"' in head


def read_manifest(root: Path) -> Manifest:
    """The validated manifest of a bundle folder; InputError naming the fault otherwise."""
    return read_manifest_file(root / MANIFEST_NAME)


def read_manifest_file(path: Path) -> Manifest:
    """The validated manifest in file `path` (a bundle's manifest.json, or one filed under another name)."""
    try:
        if path.stat().st_size > 512 * 1024 * 1024:
            raise InputError(f"{path}: manifest too large")
        data = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as err:
        raise InputError(f"{path}: corrupted manifest ({err})") from err
    try:
        return manifest_from_dict(data)
    except (ValueError, TypeError, RecursionError) as err:
        raise InputError(f"{path}: invalid manifest: {err}") from err


def _bundle_files(src: Source, man: Manifest) -> None:
    """Every file the manifest names, with the identity of the process or host that it belongs to."""
    seen: set[str] = set()

    def add(rel: str, hints: Hints) -> None:
        if rel in seen or len(src.files) >= MAX_FILES:
            return
        seen.add(rel)
        try:
            full = src.path(rel)
        except InputError as err:
            src.skipped.append((rel, str(err)))
            return
        src.files.append(FileRef(full, rel, hints))  # a file the manifest names but that is gone: the read says so

    for rank in man.ranks:
        for col in rank.collectors:
            copied = (col.details or {}).get("copied_ns") if isinstance(col.details, dict) else None
            for rel in col.files:
                ns = copied.get(rel) if isinstance(copied, dict) else None
                add(rel, Hints(host=rank.host, pid=rank.pid, rank=rank.rank, collector=col.name, from_manifest=True,
                               observed_ns=ns if isinstance(ns, int) else None))
        for child in getattr(rank, "children", None) or []:
            for col in child.collectors:
                for rel in col.files:
                    add(rel, Hints(host=rank.host, pid=child.pid, collector=col.name, from_manifest=True,
                                   parent_pid=rank.pid))
    for host in man.hosts:
        for col in host.collectors:
            for rel in col.files:
                add(rel, Hints(host=host.host, collector=col.name, from_manifest=True))
    for art in man.artifacts:
        add(art.path, Hints(host=art.host, rank=art.rank, collector=art.kind, from_manifest=True))


def _folder_files(src: Source) -> None:
    """Every regular file under the folder: hidden files, our answer keys and nested bundles skipped.

    Why nested bundles are skipped: a bundle taken during the same hang holds copies of
    the loose logs under the collecting machine's identity; read twice, every rank's
    evidence would appear under two identities. Analyse such a bundle on its own.
    """
    root = src.root
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        here = Path(dirpath)
        depth = len(here.relative_to(root).parts)
        if here != root and (here / MANIFEST_NAME).is_file() and is_manifest(here / MANIFEST_NAME):
            src.skipped.append((str(here), "a forensics bundle inside the folder: analyse it on its own"))
            dirnames[:] = []
            continue
        if depth >= MAX_DEPTH:
            src.skipped.append((str(here.relative_to(root)), f"deeper than {MAX_DEPTH} folders: not read"))
            dirnames[:] = []
            continue
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        for name in sorted(filenames):
            if name.startswith(".") or name in _SKIP_NAMES:
                continue
            p = here / name
            rel = str(p.relative_to(root))
            if p.is_symlink() or not p.is_file():
                src.skipped.append((rel, "not a regular file"))
                continue
            if len(src.files) >= MAX_FILES:
                src.skipped.append((rel, f"more than {MAX_FILES} files: the rest not read"))
                return
            src.files.append(FileRef(p, rel, path_hints(p, root)))


def path_hints(path: Path, root: Path) -> Hints:
    """Weak identity from the path: a rank or pid in the name, a per-host parent folder."""
    rank = pid = host = None
    m = _RANK_IN_NAME.search(path.name)
    if m:
        rank = int(m.group(1) or m.group(2))
    m = _PID_IN_NAME.search(path.name) or _PID_IN_NAME.search(path.parent.name)
    if m:
        pid = int(m.group(1))
    parent = path.parent
    while parent != root and (parent.name.lower() in _GENERIC_DIRS or _RANK_IN_NAME.search(parent.name)):
        found = _RANK_IN_NAME.search(parent.name)
        if rank is None and found:
            rank = int(found.group(1) or found.group(2))
        parent = parent.parent
    if parent != root:
        host = parent.name
    return Hints(host=host, pid=pid, rank=rank)


def _extract(archive: Path, dest: Path) -> Path:
    """Unpack a tar archive under parsers.archive's rules (types, names, sizes, ratio); the bundle or folder root."""
    from parsers import archive as safe_archive

    try:
        safe_archive.extract_into(archive, dest)
    except (safe_archive.ArchiveRefused, OSError) as err:
        raise InputError(f"{archive}: archive refused: {err}") from err
    return safe_archive.bundle_root(dest)

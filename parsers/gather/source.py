"""Where evidence comes from: a bundle folder, a loose folder, an archive (tar, zip) of either, a
single log (plain or .gz), stdin, or several of these at once.

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
import stat
import weakref
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from parsers.input import safeio
from parsers.input.archive import looks_like_tar, remove_temp, temp_folder
from parsers.input.errors import InputError
from parsers.model.manifest import MANIFEST_NAME, Manifest, collector_name, manifest_from_dict
from parsers.model.summaries import StackClass
from parsers.input import archive as safe_archive

#: a file named by a manifest or found in a folder is read only below this many per source
MAX_FILES = 2_000_000
#: folders deeper than this are not walked (hostile archives nest thousands)
MAX_DEPTH = 32
#: 'rank3.log', 'rank_3', 'node1.rank-12.err', 'r3.log', 'log_r3'; not 'open-r1-620.log' (an issue number)
_RANK_IN_NAME = re.compile(r"(?:^|[^a-z])rank[_.-]?(\d{1,6})(?:[_.-]|$)|(?:^|[_.])r(\d{1,6})(?:[_.]|$)", re.I)
_PID_IN_NAME = re.compile(r"(?:^|[^a-z])pid[_.-]?(\d{1,9})(?:\D|$)", re.I)
_GENERIC_DIRS = {"logs", "log", "nccl", "fr", "dumps", "stdout", "stderr", "out", "output", "artifacts", "tmp",
                 "ras", "pyspy", "stacks", "traces", "ranks", "hosts", "files", "recorder", "nccl_recorder",
                 "flight_recorder"}
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
    form: str  #: 'bundle' | 'folder' | 'file' | 'archive-bundle' | 'archive-folder'; '+N': with N more inputs
    manifest: Manifest | None = None
    files: list[FileRef] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)
    #: ranks of the job collected and judged elsewhere, not in these files: from their hosts' digests' classes
    #: (parsers.scale.focus) or kept on the reduced tree's gateways. Present in the job, so never 'absent'.
    elsewhere: frozenset[int] = frozenset()
    #: what the main threads of those ranks do: their digests' stack classes (parsers.model.summaries.StackClass),
    #: for the rules that need every rank's activity (parsers/judges/p2p.py: unanswered sends)
    elsewhere_classes: tuple[StackClass, ...] = ()
    #: False: a bundle opened without its file list (`open_source(..., list_files=False)`): `list_files()` makes
    #: it; parsers.scale.focus lists only the files of the hosts it reads (600,000 paths cost 3-4 s at 100k ranks)
    listed: bool = True
    _temp: Path | None = None

    @property
    def is_bundle(self) -> bool:
        return self.manifest is not None

    def close(self) -> None:
        for part in self.__dict__.pop("_parts", []):
            part.close()
        if self._temp is not None:
            remove_temp(self._temp)
            self._temp = None

    def scratch(self, rel: str) -> Path:
        """A new empty folder of this source's temp area (removed at close), for a file made from
        `rel` (a decompressed .gz log)."""
        if self._temp is None:
            self._temp = temp_folder("forensics-src-")  # removed on SIGTERM/SIGHUP too
            weakref.finalize(self, remove_temp, str(self._temp))
        n = self.__dict__.setdefault("_scratch", [0])
        n[0] += 1
        folder = self._temp / f"gz-{n[0]}"
        folder.mkdir(mode=0o700)
        return folder

    def list_files(self) -> None:
        """The bundle's file list, where it was opened without one (every file its manifest names)."""
        if not self.listed and self.manifest is not None:
            self.files = manifest_refs(self, self.manifest)
        self.listed = True

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
        parent; a link is resolved and checked whole, as confine does.

        Iterative: the parents not yet known are found walking up, then built walking down, so a manifest
        path of thousands of parts costs a loop, not a Python frame per part."""
        cache = self.__dict__.setdefault("_dirs", {})
        found = cache.get(head)
        if found is not None:
            return found
        pending = []
        part = head
        while part and part not in cache:
            pending.append(part)
            part = part.rpartition("/")[0]
        for folder in reversed(pending):
            cache[folder] = self._one_folder(folder, cache)
        return cache[head]

    def _one_folder(self, head: str, cache: dict[str, str]) -> str:
        """`head` confined, its parent already in `cache` (or `head` at the root)."""
        parent, _, last = head.rpartition("/")
        if last in ("", ".", "..") or len(cache) > 4 * MAX_FILES:
            return str(confine(self.root, head))
        base = cache[parent] if parent else self.__dict__.setdefault("_root", str(self.root.resolve()))
        found = base + "/" + last
        return str(confine(self.root, head)) if os.path.islink(found) else found

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
    """`root/rel` when it stays inside `root` (parsers.input.safeio.confine); InputError otherwise."""
    try:
        return safeio.confine(root, rel)
    except safeio.UnsafeFile as err:
        raise InputError(f"the manifest names a file outside the bundle: {rel!r} ({err})") from err


#: what `-` (stdin) may bring, and what one gzip-compressed log may expand to
MAX_STREAM_BYTES = 8 << 30
#: a .gz log may expand this many times its size once past GZ_RATIO_FLOOR (a bomb is refused early)
GZ_RATIO, GZ_RATIO_FLOOR = 200, 64 << 20
_GZIP_MAGIC = b"\x1f\x8b"
_ZIP_MAGIC = b"PK\x03\x04"
#: how the paths given on the command line are shown where a file's source is cited
STDIN = "-"


def open_source(path: Path | str | list | tuple, list_files: bool = True) -> Source:
    """Open what the user has: a bundle, a loose folder, a tar or .zip archive of either, a single
    log (plain or gzip-compressed), `-` for stdin, or several of these at once (a bundle plus
    extra logs: one Source whose files are all of theirs). InputError on anything else.

    Why several: the logs a scheduler kept (Slurm output, a console log) often live beside the
    bundle `collect` wrote, and a verdict needs both. `list_files=False`: a bundle folder's file list is
    left for `Source.list_files()` (parsers.pipeline.analyze makes it only where it reads every host)."""
    if isinstance(path, (list, tuple)):
        paths = list(path)
        if not paths:
            raise InputError("no input named")
        if len(paths) > 1:
            return _open_many(paths)
        path = paths[0]
    if str(path) == STDIN:
        return _open_stdin()
    given = Path(path).expanduser()
    if not given.exists():
        raise InputError(f"{given}: no such file or directory")
    if given.is_dir():
        return _open_folder(given, given, temp=None, list_files=list_files)
    if not given.is_file():
        raise InputError(f"{given}: not a regular file or folder")
    return _open_file(given)


def _open_file(given: Path, shown: str | None = None) -> Source:
    """A tar or zip archive (unpacked, bounded), or one log (a .gz one decompressed, bounded)."""
    if is_archive(given) or is_zip(given):
        temp = temp_folder("forensics-src-")  # removed on SIGTERM/SIGHUP too
        try:
            root = _extract(given, temp) if is_archive(given) else _extract_zip(given, temp)
            src = _open_folder(root, given, temp=temp)
        except BaseException:
            remove_temp(temp)
            raise
        src.form = "archive-" + src.form
        weakref.finalize(src, remove_temp, str(temp))  # removed even when a caller never closes it
        return src
    src = Source(root=given.parent, given=given, form="file")
    name = shown or given.name
    hints = path_hints(given, given.parent)
    hints.host = None  # the folder a lone file sits in is no host's name
    if _is_gzip(given):
        try:
            plain = _gunzip(given, src.scratch(name))
        except InputError:
            src.close()
            raise
        src.files.append(FileRef(plain, name, hints))
        return src
    src.files.append(FileRef(given, name, hints))
    return src


def _open_stdin() -> Source:
    """`-`: what stdin holds, copied (bounded) to a temp file and opened as a file of that content
    (a log, a gzip-compressed log, a tar or zip archive)."""
    import sys

    temp = temp_folder("forensics-stdin-")  # removed on SIGTERM/SIGHUP too
    target = temp / "stdin"
    try:
        stream = sys.stdin.buffer
        with open(target, "xb") as out:
            _copy_bounded(stream, out, MAX_STREAM_BYTES, "stdin")
        if target.stat().st_size == 0:
            raise InputError("-: stdin was empty")
        src = _open_file(target, shown="stdin")
    except BaseException:
        remove_temp(temp)
        raise
    src.given = Path(STDIN)
    previous = src._temp
    if previous is None:
        src._temp = temp
    else:  # an archive or a .gz read from stdin: both temp folders go at close
        weakref.finalize(src, remove_temp, str(temp))
    return src


def _open_many(paths: list) -> Source:
    """Several inputs as one Source: at most one bundle, whose root, manifest and file names lead;
    every other input's files are cited under its own name ('extra.log', 'logs/rank3.out')."""
    parts: list[Source] = []
    try:
        for p in paths:
            parts.append(open_source(p))
        bundles = [s for s in parts if s.manifest is not None]
        if len(bundles) > 1:
            raise InputError(f"{bundles[1].given}: a second bundle; analyse one bundle at a time "
                             "(with the extra logs that go with it)")
        lead = bundles[0] if bundles else parts[0]
        combined = Source(root=lead.root, given=lead.given, form=lead.form + "+" + str(len(parts) - 1),
                          manifest=lead.manifest)
        seen: set[str] = set()
        for part in [lead] + [s for s in parts if s is not lead]:
            prefix = "" if part is lead else _shown_name(part)
            for ref in part.files:
                rel = ref.rel if not prefix or part.form in ("file", "archive-file") else f"{prefix}/{ref.rel}"
                while rel in seen:  # two inputs with one name: the second is told apart
                    rel = "+" + rel
                seen.add(rel)
                combined.files.append(FileRef(ref.path, rel, ref.hints))
            combined.skipped += [(f"{prefix}/{r}" if prefix else r, why) for r, why in part.skipped]
            if len(combined.files) > MAX_FILES:
                raise InputError(f"more than {MAX_FILES} files in the inputs together")
    except BaseException:
        for part in parts:
            part.close()
        raise
    combined.__dict__["_parts"] = parts  # closed with the combined source (temp folders)
    if lead is not None and lead.manifest is not None:
        combined.__dict__["_dirs"] = lead.__dict__.get("_dirs", {})
    return combined


def _shown_name(src: Source) -> str:
    return "stdin" if str(src.given) == STDIN else (src.given.name or str(src.given))


def is_zip(path: Path) -> bool:
    """True for a regular file that starts as a zip archive does (local file header)."""
    try:
        with open(path, "rb") as fh:
            return fh.read(4) == _ZIP_MAGIC
    except OSError:
        return False


def _is_gzip(path: Path) -> bool:
    try:
        with open(path, "rb") as fh:
            return fh.read(2) == _GZIP_MAGIC
    except OSError:
        return False


def _copy_bounded(src, out, limit: int, what: str, ratio_of: int | None = None) -> int:
    """Copy stream `src` into file `out`, refusing past `limit` bytes (or past GZ_RATIO times
    `ratio_of` compressed bytes, once over the floor): a bomb stops at the first chunk too many."""
    total = 0
    while True:
        chunk = src.read(1 << 20)
        if not chunk:
            return total
        total += len(chunk)
        if total > limit:
            raise InputError(f"{what}: more than {limit} bytes: refused")
        if ratio_of and total > GZ_RATIO_FLOOR and total / max(1, ratio_of) > GZ_RATIO:
            raise InputError(f"{what}: expands more than {GZ_RATIO} times its size: a compression bomb?")
        out.write(chunk)


def _gunzip(path: Path, dest: Path) -> Path:
    """Decompress a .gz log into `dest` (bounded); the plain file, named as the log without '.gz'."""
    import gzip
    import zlib

    name = path.name[:-3] if path.name.endswith(".gz") and len(path.name) > 3 else path.name + ".out"
    if name.startswith("."):
        name = "_" + name
    target = dest / name
    try:
        with gzip.open(path, "rb") as fh, open(target, "xb") as out:
            _copy_bounded(fh, out, MAX_STREAM_BYTES, str(path), ratio_of=path.stat().st_size)
    except (OSError, EOFError, zlib.error) as err:
        raise InputError(f"{path}: damaged gzip file ({err})") from err
    return target


def _extract_zip(archive: Path, dest: Path) -> Path:
    """Unpack a .zip under parsers.input.archive's rules: member count, per-member and total sizes,
    ratio, names (no absolute, no '..', bounded length and depth), regular files and folders only
    (a symlink member is refused), files created new (O_EXCL|O_NOFOLLOW) in folders made here."""
    import stat as stat_mod
    import zipfile
    import zlib


    limits = safe_archive.Limits()
    compressed = max(1, archive.stat().st_size)
    made: set[str] = set()
    total = 0
    try:
        with zipfile.ZipFile(archive) as zf:
            infos = zf.infolist()
            if len(infos) > limits.max_members:
                raise safe_archive.ArchiveRefused(f"more than {limits.max_members} members")
            for info in infos:
                parts = safe_archive._check_name(info.filename, limits)
                mode = info.external_attr >> 16
                if mode and not (stat_mod.S_ISREG(mode) or stat_mod.S_ISDIR(mode)):
                    raise safe_archive.ArchiveRefused(f"member {info.filename!r}: links and special "
                                                      f"files are not allowed")
                if info.flag_bits & 0x1:
                    raise safe_archive.ArchiveRefused(f"member {info.filename!r}: encrypted")
                if info.is_dir():
                    safe_archive._make_dirs(str(dest), parts, made)
                    continue
                if not parts:
                    raise safe_archive.ArchiveRefused(f"member {info.filename!r}: a file without a name")
                if info.file_size > limits.max_member_bytes:
                    raise safe_archive.ArchiveRefused(f"member {info.filename!r}: {info.file_size} bytes "
                                                      f"(at most {limits.max_member_bytes})")
                parent = safe_archive._make_dirs(str(dest), parts[:-1], made)
                try:
                    fd = os.open(f"{parent}/{parts[-1]}", safe_archive._CREATE, 0o600)
                except FileExistsError as err:
                    raise safe_archive.ArchiveRefused(
                        f"member {info.filename!r}: the name twice in one archive") from err
                with os.fdopen(fd, "wb") as out, zf.open(info) as fh:
                    while True:  # counted as written: a header that understates the size does not help
                        chunk = fh.read(1 << 20)
                        if not chunk:
                            break
                        total += len(chunk)
                        if total > limits.max_total_bytes:
                            raise safe_archive.ArchiveRefused(f"expands to more than {limits.max_total_bytes} bytes")
                        if total > limits.ratio_floor and total / compressed > limits.max_ratio:
                            raise safe_archive.ArchiveRefused(f"expands {total / compressed:.0f} times its size "
                                                              f"(at most {limits.max_ratio:.0f}): a compression bomb?")
                        out.write(chunk)
    except safe_archive.ArchiveRefused as err:
        raise InputError(f"{archive}: archive refused: {err}") from err
    except (zipfile.BadZipFile, zipfile.LargeZipFile, NotImplementedError, zlib.error, EOFError, OSError,
            ValueError, RuntimeError) as err:
        raise InputError(f"{archive}: archive refused: not a readable zip archive "
                         f"({type(err).__name__}: {err})") from err
    return safe_archive.bundle_root(dest)


def is_archive(path: Path) -> bool:
    """True for a regular file whose first header block is a tar header (plain or compressed tar)."""
    try:
        return Path(path).is_file() and looks_like_tar(Path(path))
    except OSError:
        return False


def _open_folder(root: Path, given: Path, temp: Path | None, list_files: bool = True) -> Source:
    """A folder with a valid manifest.json is a bundle; any other folder is loose.

    A manifest that cannot be read or is invalid (corrupt JSON, values out of range, too large or too deep)
    does not stop the analysis: the folder is read as a loose folder, which takes nothing from the manifest
    (no file list, no identities: every file is found by walking the folder and recognised by its content,
    as for any folder of logs), and the manifest's refusal is recorded as a skipped file with its reason.
    Why not refuse: the logs beside a damaged manifest (a disk that filled while the collector wrote it, a
    hand edit) are still the evidence, and the loose-folder path is the one built for untrusted folders."""
    manifest, refused = None, None
    if (root / MANIFEST_NAME).is_file():
        try:
            manifest = read_manifest(root)
        except InputError as err:
            refused = MANIFEST_REFUSED + _reason(err, root / MANIFEST_NAME)
    src = Source(root=root, given=given, form="bundle" if manifest else "folder", manifest=manifest, _temp=temp)
    if manifest is not None:
        src.listed = False
        if list_files:
            src.list_files()
    else:
        if refused is not None:
            src.skipped.append((MANIFEST_NAME, refused))
        _folder_files(src, skip_root_manifest=refused is not None)
    return src


MANIFEST_REFUSED = "manifest refused, the folder was read without it: "


def manifest_refusal(skipped: list[tuple[str, str]]) -> str | None:
    """Why the folder's manifest was refused (it was then read as a loose folder), or None."""
    for name, why in skipped:
        if name == MANIFEST_NAME and why.startswith(MANIFEST_REFUSED):
            return why[len(MANIFEST_REFUSED):]
    return None


def _reason(err: InputError, path: Path) -> str:
    """An InputError's words without the path it starts with (the skipped entry names the file)."""
    text = str(err)
    return text[len(str(path)) + 2:] if text.startswith(f"{path}: ") else text


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
        text = path.read_text()
        data = json.loads(text)
    except MemoryError as err:  # a manifest of tens of MiB of tiny repeated objects (found by the fuzzer)
        raise InputError(f"{path}: manifest too large to read in this process's memory") from err
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as err:
        raise InputError(f"{path}: corrupted manifest ({err})") from err
    try:
        return manifest_from_dict(data, plain_text=text.isascii() and "\\u" not in text)
    except (ValueError, TypeError, RecursionError) as err:
        raise InputError(f"{path}: invalid manifest: {err}") from err


def manifest_refs(src: Source, man: Manifest) -> list[FileRef]:
    """Every file the manifest `man` names (the source's, or a part of it), with the identity of the process or
    host that it belongs to; a path that leads outside is a skipped file of `src`."""
    seen: set[str] = set()
    out: list[FileRef] = []

    def add(rel: str, hints: Hints) -> None:
        if rel in seen or len(out) >= MAX_FILES:
            return
        seen.add(rel)
        try:
            full = src.path(rel)
        except InputError as err:
            src.skipped.append((rel, str(err)))
            return
        out.append(FileRef(full, rel, hints))  # a file the manifest names but that is gone: the read says so

    for rank in man.ranks:
        for col in rank.collectors:
            copied = (col.details or {}).get("copied_ns") if isinstance(col.details, dict) else None
            for rel in col.files:
                ns = copied.get(rel) if isinstance(copied, dict) else None
                add(rel, Hints(host=rank.host, pid=rank.pid, rank=rank.rank, collector=collector_name(col.name),
                               from_manifest=True,
                               observed_ns=ns if isinstance(ns, int) else None))
        for child in getattr(rank, "children", None) or []:
            for col in child.collectors:
                for rel in col.files:
                    add(rel, Hints(host=rank.host, pid=child.pid, collector=collector_name(col.name),
                                   from_manifest=True,
                                   parent_pid=rank.pid))
    for host in man.hosts:
        for col in host.collectors:
            for rel in col.files:
                add(rel, Hints(host=host.host, collector=collector_name(col.name), from_manifest=True))
    for art in man.artifacts:
        add(art.path, Hints(host=art.host, rank=art.rank, collector=art.kind, from_manifest=True))
    return out


def _folder_files(src: Source, skip_root_manifest: bool = False) -> None:
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
            if name.startswith(".") or name in _SKIP_NAMES or (skip_root_manifest and here == root
                                                                and name == MANIFEST_NAME):
                continue
            p = here / name
            rel = str(p.relative_to(root))
            try:
                st = os.lstat(p)
            except OSError as err:
                src.skipped.append((rel, f"cannot read: {err.strerror or err}"))
                continue
            if not stat.S_ISREG(st.st_mode):
                src.skipped.append((rel, "not a regular file"))
                continue
            if len(src.files) >= MAX_FILES:
                src.skipped.append((rel, f"more than {MAX_FILES} files: the rest not read"))
                return
            hints = path_hints(p, root)
            if name.endswith(".gz") and not name.endswith(".tar.gz") and _is_gzip(p):
                try:
                    p = _gunzip(p, src.scratch(rel))
                except InputError as err:
                    src.skipped.append((rel, str(err)))
                    continue
            src.files.append(FileRef(p, rel, hints))


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
    """Unpack a tar archive under parsers.input.archive's rules (types, names, sizes, ratio); the bundle or folder
    root."""

    try:
        safe_archive.extract_into(archive, dest)
    except (safe_archive.ArchiveRefused, OSError) as err:
        raise InputError(f"{archive}: archive refused: {err}") from err
    return safe_archive.bundle_root(dest)

"""Safe extraction of a bundle archive (.tar, .tar.gz, ...) into a temporary folder.

Archives arrive from tickets and chat: hostile. A 2.2 MB archive once expanded to
2.1 GB, temporary copies were never removed, and setuid bits survived. Here:

- one streaming pass; every member header is checked *before* its data is read,
  so a bomb is refused at its first oversized header, in milliseconds;
- only regular files and folders (no symlinks, hard links, devices, FIFOs, sparse
  members), no absolute names, no `..`, bounded name length and depth;
- caps on the member count, on each member's size, on the total size, and on the
  expansion ratio (total / archive size) once the total is past a floor, so small
  but very compressible bundles still open;
- files written here, not by tarfile: each created new (O_EXCL|O_NOFOLLOW) in folders
  made by this extraction, owner read/write only (no setuid/setgid/sticky, no
  group/other bits, no owner or times from the archive);
- a GNU long name (`././@LongLink`) or a PAX header record is a member header too: its
  size is checked *before* tarfile reads it (a 1 MB archive once named a member with
  1 GiB of long name, and a PAX `comment=` of 1 GiB was read whole into memory);
- `extracted(path)` is a context manager: the temporary folder is removed on exit,
  whatever happened inside, and on SIGTERM or SIGHUP as on Ctrl-C (`temp_folder`).

Pure, and ground floor (nothing above parsers/).
"""

from __future__ import annotations

import bz2
import gzip
import lzma
import os
import shutil
import signal
import tarfile
import tempfile
import threading
import zlib
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Callable, Iterator
from parsers.input.errors import UnsafeInput

MANIFEST_NAME = "manifest.json"


@dataclass(frozen=True)
class Limits:
    """Caps for one extraction; the defaults fit a large job's bundle (logs are capped at collection)."""

    max_members: int = 200_000
    max_member_bytes: int = 1 << 30
    max_total_bytes: int = 8 << 30
    max_ratio: float = 200.0  #: expanded / archive bytes, checked once the total passes ratio_floor
    ratio_floor: int = 64 << 20
    max_name: int = 1024
    max_depth: int = 32
    #: bytes of one PAX header record set (names, times, owners, xattrs of one member: a few KB when real)
    max_pax_bytes: int = 64 << 10


class ArchiveRefused(UnsafeInput, ValueError):
    """The archive is damaged, or breaks a rule above; the message says which member and why."""


def name_parts(name: str) -> list[str]:
    """The parts of a relative member name, as PurePosixPath(name).parts gives them ('' and '.' dropped,
    '..' kept), without building a path object: filing a fleet host checks ~30 names."""
    return [part for part in name.split("/") if part not in ("", ".")]


def _check_name(name: str, limits: Limits) -> list[str]:
    """Refuse a name that is empty, too long, absolute, leaves the archive or nests too deep; its parts."""
    if not name or len(name) > limits.max_name or "\0" in name:
        raise ArchiveRefused(f"member name {name[:80]!r}: empty or longer than {limits.max_name}")
    if name.startswith("/") or (len(name) > 1 and name[1] == ":"):
        raise ArchiveRefused(f"member {name[:80]!r}: absolute path")
    parts = name_parts(name)
    if ".." in parts:
        raise ArchiveRefused(f"member {name[:80]!r}: '..' leaves the archive")
    if len(parts) > limits.max_depth:
        raise ArchiveRefused(f"member {name[:80]!r}: nested deeper than {limits.max_depth}")
    return parts


def _check_member(member: tarfile.TarInfo, limits: Limits) -> None:
    """Refuse a member whose header alone breaks a rule."""
    _check_name(member.name, limits)
    if member.issym() or member.islnk():
        raise ArchiveRefused(f"member {member.name!r}: links are not allowed in a bundle")
    if member.issparse():
        raise ArchiveRefused(f"member {member.name!r}: sparse members are not allowed")
    if not (member.isfile() or member.isdir()):
        raise ArchiveRefused(f"member {member.name!r}: devices, FIFOs and other special files are not allowed")
    if member.size < 0 or member.size > limits.max_member_bytes:
        raise ArchiveRefused(f"member {member.name!r}: {member.size} bytes (at most {limits.max_member_bytes})")


def _bounded_info(limits: Limits) -> type[tarfile.TarInfo]:
    """A TarInfo whose extended headers are size-checked before tarfile reads them.

    Why here: tarfile reads a GNU long name or a PAX record set whole (`fileobj.read(size)`) while
    parsing the *next* member's header, before any rule of ours sees a member; the size is in the
    extended header's own header, so it can be refused first."""

    class BoundedInfo(tarfile.TarInfo):
        def _proc_gnulong(self, tarfile_):  # noqa: D401 - tarfile's hook
            if self.size > limits.max_name + 1:  # the name and its NUL
                raise ArchiveRefused(f"a GNU long name of {self.size} bytes (at most {limits.max_name})")
            return super()._proc_gnulong(tarfile_)

        def _proc_pax(self, tarfile_):  # noqa: D401 - tarfile's hook
            if self.size > limits.max_pax_bytes:
                raise ArchiveRefused(f"a PAX header of {self.size} bytes (at most {limits.max_pax_bytes})")
            return super()._proc_pax(tarfile_)

    return BoundedInfo


#: flags of every file written: a new file only (a name twice, or a planted link, is refused), never followed
_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
_CHUNK = 1 << 20


def _write_member(tar: tarfile.TarFile, member: tarfile.TarInfo, dest: Path, made: set[str]) -> None:
    """Write one checked member under `dest` ourselves, owner-only modes, no owner or times from the archive.

    Why not tarfile.extract: with its data filter it cost 0.5 ms a member (realpath of every
    name, chown, chmod, utime), most of a fleet host's filing time. The same guarantees hold by
    construction: names were checked (no absolute, no '..'), the archive holds no links, every
    folder is made here (mode 0o700, never followed) and every file is created new with
    O_EXCL|O_NOFOLLOW, so nothing can point a write outside `dest`. Paths are plain strings
    here (no pathlib): a fleet of 4,096 hosts files ~50k members."""
    parts = name_parts(member.name)
    if member.isdir():
        _make_dirs(str(dest), parts, made)
        return
    if not parts:  # a file named '.' or '/': nothing to create
        raise ArchiveRefused(f"member {member.name!r}: a file without a name")
    parent = _make_dirs(str(dest), parts[:-1], made)
    try:
        fd = os.open(f"{parent}/{parts[-1]}", _CREATE, 0o600)
    except FileExistsError as err:
        raise ArchiveRefused(f"member {member.name!r}: the name twice in one archive") from err
    src = tar.extractfile(member)
    with os.fdopen(fd, "wb") as out:
        left = member.size
        while src is not None and left > 0:
            chunk = src.read(min(_CHUNK, left))
            if not chunk:
                raise ArchiveRefused(f"member {member.name!r}: shorter than its header says")
            out.write(chunk)
            left -= len(chunk)


def _make_dirs(dest: str, parts: list[str], made: set[str]) -> str:
    """dest/parts..., each folder made here (or already made by this extraction); a folder that
    exists from elsewhere is entered only when it is a real folder, not a link."""
    path = dest
    key = ""
    for part in parts:
        path = f"{path}/{part}"
        key = f"{key}/{part}" if key else part
        if key in made:
            continue
        try:
            os.mkdir(path, 0o700)
        except FileExistsError:
            if os.path.islink(path) or not os.path.isdir(path):
                raise ArchiveRefused(f"folder {key!r}: exists and is not a folder made by this extraction")
        made.add(key)
    return path


#: where a checked member goes under the destination (a relative name, checked again), or None to skip it
Place = Callable[[tarfile.TarInfo], "str | None"]


def extract_into(archive: Path, dest: Path, limits: Limits = Limits()) -> int:
    """Extract `archive` into the existing empty folder `dest` under `limits`; returns member count.

    Raises ArchiveRefused; what was extracted before the refusal stays in `dest`
    (extracted() removes it).
    """
    with open(archive, "rb") as raw:
        return extract_stream(raw, os.fstat(raw.fileno()).st_size, dest, limits)


def extract_stream(raw: BinaryIO, compressed: int, dest: Path, limits: Limits = Limits(),
                   place: Place | None = None) -> int:
    """Extract the tar stream `raw` (`compressed` bytes long, for the ratio rule) into `dest`; returns member count.

    Every rule above applies to each member header before its data is read. `place`
    lets a caller file members straight into their final layout (the fleet puts a
    host's archive under hosts/<host>/ of the job bundle), so nothing is copied twice;
    the name it returns is checked by the same name rules before anything is written.
    """
    compressed = max(1, compressed)
    total = count = 0
    made: set[str] = set()
    try:
        with tarfile.open(fileobj=raw, mode="r|*", tarinfo=_bounded_info(limits)) as tar:
            for member in tar:
                count += 1
                if count > limits.max_members:
                    raise ArchiveRefused(f"more than {limits.max_members} members")
                _check_member(member, limits)
                total += member.size
                if total > limits.max_total_bytes:
                    raise ArchiveRefused(f"expands to more than {limits.max_total_bytes} bytes")
                if total > limits.ratio_floor and total / compressed > limits.max_ratio:
                    raise ArchiveRefused(f"expands {total / compressed:.0f} times its size "
                                         f"(at most {limits.max_ratio:.0f}): a compression bomb?")
                if place is not None:
                    target = place(member)
                    if target is None:
                        continue
                    _check_name(target, limits)
                    member.name = target
                _write_member(tar, member, dest, made)
    except ArchiveRefused:
        raise
    except (tarfile.TarError, EOFError, OSError, ValueError) as err:
        raise ArchiveRefused(f"not a readable tar archive ({type(err).__name__}: {err})") from err
    return count


#: how each compression a tar stream may come in starts, and what opens it
_MAGIC: tuple[tuple[bytes, Callable[[BinaryIO], BinaryIO]], ...] = (
    (b"\x1f\x8b", lambda raw: gzip.GzipFile(fileobj=raw, mode="rb")),
    (b"BZh", lambda raw: bz2.BZ2File(raw, "rb")),
    (b"\xfd7zXZ\x00", lambda raw: lzma.LZMAFile(raw, "rb")),
)
_BLOCK = 512


def header_ok(block: bytes) -> bool:
    """True when `block` is one tar header: its checksum (unsigned or signed, as tarfile accepts) matches."""
    if len(block) < _BLOCK or not block.strip(b"\0"):
        return False
    field = block[148:156].split(b"\0", 1)[0].strip()
    try:
        stated = int(field, 8)
    except ValueError:
        return False
    rest = block[:148] + block[156:_BLOCK]
    unsigned = 8 * 0x20 + sum(rest)
    signed = unsigned - 256 * sum(1 for b in rest if b > 127)
    return stated in (unsigned, signed)


def looks_like_tar(path: Path) -> bool:
    """Whether `path` is a tar archive (plain or gzip/bz2/xz), from its first header block only.

    Why not tarfile.is_tarfile: it opens the first member, and a GNU long name or a PAX header of
    gigabytes is read whole to do so (3 GB resident, before any rule here sees its size)."""
    try:
        with open(path, "rb") as raw:
            head = raw.read(8)
            raw.seek(0)
            opener = next((open_ for magic, open_ in _MAGIC if head.startswith(magic)), None)
            stream = opener(raw) if opener else raw
            return header_ok(stream.read(_BLOCK))
    except (OSError, EOFError, ValueError, zlib.error, lzma.LZMAError):  # a damaged stream: not an archive
        return False


def bundle_root(folder: Path) -> Path:
    """The bundle inside an extracted archive: the folder itself, or its single top folder."""
    if (folder / MANIFEST_NAME).is_file():
        return folder
    entries = list(folder.iterdir())
    if len(entries) == 1 and entries[0].is_dir() and not entries[0].is_symlink():
        return entries[0]
    return folder


@contextmanager
def extracted(archive: Path, limits: Limits = Limits(), tmp_parent: Path | None = None) -> Iterator[Path]:
    """`with extracted(path) as root:` the bundle root of a safely extracted archive; the
    temporary folder is removed when the block ends, on success or error, or on SIGTERM/SIGHUP."""
    tmp = temp_folder("forensics-bundle-", tmp_parent)
    try:
        extract_into(Path(archive), tmp, limits)
        yield bundle_root(tmp)
    finally:
        remove_temp(tmp)


# ----------------------------------------------------------------------------- temp folders and signals

#: temp folders of this process, removed by the SIGTERM/SIGHUP handler
_TEMPS: set[str] = set()
_OWNER: list[int] = []  #: the pid whose handlers are installed (a forked reader worker inherits them)
_CLEANUP_SIGNALS = tuple(getattr(signal, name) for name in ("SIGTERM", "SIGHUP") if hasattr(signal, name))


class Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP arrived while a temp folder of ours existed: the folders are removed and the
    program unwinds as on Ctrl-C, so its own `finally` blocks (a CLI's scoped temp folder, a worker
    pool) run too."""

    def __init__(self, signum: int) -> None:
        super().__init__(f"ended by signal {signum}")
        self.signum = signum


def temp_folder(prefix: str, parent: Path | None = None) -> Path:
    """A new private temp folder, removed by remove_temp, and also when this process is ended by
    SIGTERM or SIGHUP. Why: Ctrl-C unwinds (KeyboardInterrupt runs every `finally`), but those two
    signals kill a Python process at once by default, and an unpacked bundle (logs, environments) was
    left in /tmp."""
    tmp = tempfile.mkdtemp(prefix=prefix, dir=parent)
    _TEMPS.add(tmp)
    _install_cleanup()
    return Path(tmp)


def remove_temp(path: Path | str) -> None:
    _TEMPS.discard(str(path))
    shutil.rmtree(path, ignore_errors=True)
    if not _TEMPS:
        _uninstall_cleanup()


def _install_cleanup() -> None:
    """Handlers for SIGTERM/SIGHUP, where the signal still has its default action (a caller's own
    handler, e.g. collect's, is left alone) and this is the main thread (only it may set them)."""
    if threading.current_thread() is not threading.main_thread():
        return
    for sig in _CLEANUP_SIGNALS:
        try:
            if signal.getsignal(sig) == signal.SIG_DFL:
                signal.signal(sig, _on_signal)
        except (ValueError, OSError):  # not settable here
            continue
    _OWNER[:] = [os.getpid()]


def _uninstall_cleanup() -> None:
    """No temp folder left: the signals get their default action back (ours only)."""
    if threading.current_thread() is not threading.main_thread():
        return
    for sig in _CLEANUP_SIGNALS:
        try:
            if signal.getsignal(sig) is _on_signal:
                signal.signal(sig, signal.SIG_DFL)
        except (ValueError, OSError):
            continue


def _on_signal(signum: int, _frame) -> None:
    """Remove this process's temp folders, then unwind (Terminated). In a forked child that inherited
    the handler, die of the signal as by default (the folders are the parent's)."""
    if not _OWNER or _OWNER[0] != os.getpid():
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)
        return
    for tmp in list(_TEMPS):
        shutil.rmtree(tmp, ignore_errors=True)
        _TEMPS.discard(tmp)
    _uninstall_cleanup()
    raise Terminated(signum)

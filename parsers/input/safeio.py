"""Bounded, non-blocking, link-aware file access for hostile paths (the ground floor).

Every file forensics touches may be hostile: a FIFO named `rank0.log` blocks a plain
`open()` forever, a recorder `.bin` symlinked to /dev/zero reads without end, a dump
symlinked to /etc/shadow leaks it, and a path in a manifest may point out of the
bundle. So here, and nowhere else, files are opened:

- with O_NONBLOCK (a FIFO or device never blocks the open) and O_NOCTTY;
- with O_NOFOLLOW when asked (a final symlink component is refused, not followed);
- then checked with fstat on the open descriptor (no race with a rename): regular
  files only, and optionally only when a given uid owns them;
- read with a byte cap (head or tail), never to the end of an unknown file.

`confine(root, rel)` turns a path named by a manifest into a path inside the bundle,
refusing absolute paths, `..` and links that lead out.

This module is ground floor: it depends on nothing above parsers/.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path
from typing import BinaryIO, Collection, Iterable
from parsers.input.errors import UnsafeInput

#: default caps; callers pass their own where they know better
DEFAULT_MAX_BYTES = 64 * 1024 * 1024
DEFAULT_MAX_LINES = 1_000_000
_CHUNK = 1 << 20


class UnsafeFile(OSError, UnsafeInput):
    """A path that is not a regular file, is a link when links are refused, is owned by
    someone else, or leaves its root. An OSError, so callers that catch OSError for
    unreadable files handle it too; `reason` is a short word for manifests."""

    def __init__(self, path: object, reason: str, detail: str = "") -> None:
        self.reason = reason
        message = f"{path}: {reason}" + (f" ({detail})" if detail else "")
        super().__init__(errno.EPERM, message)
        self.filename = str(path)

    def __str__(self) -> str:
        return self.strerror or ""


def _kind(mode: int) -> str:
    """A word for a non-regular file type, for messages."""
    for test, word in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"),
                       (stat.S_ISLNK, "a symbolic link")):
        if test(mode):
            return word
    return "not a regular file"


def open_regular(path: str | os.PathLike, *, follow: bool = True, owners: Collection[int] | None = None,
                 dir_fd: int | None = None, expected: str | None = None) -> BinaryIO:
    """Open `path` for reading as a binary file object, without ever blocking.

    follow=False refuses a symlink as the last component (O_NOFOLLOW -> ELOOP).
    owners, when given, is the set of uids allowed to own the file: a root collector
    copies a file a target named only when the target owns it. Raises UnsafeFile for
    refused files and OSError (FileNotFoundError, PermissionError...) as open does.
    """
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | getattr(os, "O_CLOEXEC", 0)
    if not follow:
        flags |= os.O_NOFOLLOW
    try:
        fd = os.open(path, flags, dir_fd=dir_fd)
    except OSError as err:
        if err.errno == errno.ELOOP and not follow:
            raise UnsafeFile(path, "is a symbolic link", "links are not followed") from err
        raise
    return checked_file(fd, path, owners, expected)


def checked_file(fd: int, path: str | os.PathLike, owners: Collection[int] | None = None,
                 expected: str | None = None) -> BinaryIO:
    """An open descriptor as a binary file object once it is a regular file owned by one of `owners`
    (any owner with None); UnsafeFile otherwise, and the descriptor is closed. `expected` says who
    should own it in the refusal (default: the uids). One check for every opener: here and the
    forensics.safefs opener that opens as the job's user."""
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise UnsafeFile(path, "not a regular file", _kind(st.st_mode))
        if owners is not None and st.st_uid not in owners:
            raise UnsafeFile(path, "owned by another user",
                             f"uid {st.st_uid}, {expected or f'expected {sorted(set(owners))}'}")
        os.set_blocking(fd, True)  # a regular file: reads never block anyway; keep read() simple
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def file_size(fh: BinaryIO) -> int:
    """Size of an open file, from its descriptor."""
    return os.fstat(fh.fileno()).st_size


def read_bytes(fh: BinaryIO, max_bytes: int = DEFAULT_MAX_BYTES, tail: bool = False) -> tuple[bytes, bool]:
    """At most `max_bytes` of an open file: its head, or with tail=True its end.

    Returns (data, cut): cut is True when the file held more than was read. The
    size is taken at open time; a file that grows while read is still cut at the cap.
    """
    max_bytes = max(0, int(max_bytes))
    size = file_size(fh)
    if tail and size > max_bytes:
        fh.seek(size - max_bytes)
    data = fh.read(max_bytes + (0 if tail else 1))
    cut = len(data) > max_bytes or size > max_bytes
    return data[:max_bytes], cut


def read_path_bytes(path: str | os.PathLike, max_bytes: int = DEFAULT_MAX_BYTES, *, tail: bool = False,
                    follow: bool = True, owners: Collection[int] | None = None) -> tuple[bytes, bool]:
    """open_regular + read_bytes in one call."""
    with open_regular(path, follow=follow, owners=owners) as fh:
        return read_bytes(fh, max_bytes, tail)


def read_text(path: str | os.PathLike, max_bytes: int = DEFAULT_MAX_BYTES, *, tail: bool = False,
              follow: bool = True, owners: Collection[int] | None = None) -> tuple[str, bool]:
    """Bounded text of a file, decoded as UTF-8 with replacement (logs are not always UTF-8).

    A tail read drops the first, probably partial, line when the file was cut.
    """
    data, cut = read_path_bytes(path, max_bytes, tail=tail, follow=follow, owners=owners)
    text = data.decode("utf-8", "replace")
    if cut and tail:
        newline = text.find("\n")
        text = text[newline + 1:] if newline >= 0 else text
    return text, cut


def read_lines(path: str | os.PathLike, max_lines: int = DEFAULT_MAX_LINES, max_bytes: int = DEFAULT_MAX_BYTES, *,
               tail: bool = False, max_line_chars: int = 65536, follow: bool = True,
               owners: Collection[int] | None = None) -> tuple[list[str], bool]:
    """At most `max_lines` lines (head, or tail) within `max_bytes`; each line cut at
    `max_line_chars` so that one 1 GB line cannot become one 1 GB string downstream."""
    text, cut = read_text(path, max_bytes, tail=tail, follow=follow, owners=owners)
    lines = text.splitlines()
    if len(lines) > max_lines:
        lines = lines[-max_lines:] if tail else lines[:max_lines]
        cut = True
    out = []
    for line in lines:
        if len(line) > max_line_chars:
            line, cut = line[:max_line_chars], True
        out.append(line)
    return out, cut


def copy_bounded(fh: BinaryIO, dest: str | os.PathLike, max_bytes: int, *, tail: bool = True,
                 mode: int = 0o600) -> tuple[int, bool]:
    """Copy at most `max_bytes` of an open file to a new file `dest` with `mode`.

    dest is created fresh (an existing file or link there is replaced, never written
    through), so a planted link in the bundle folder cannot redirect the copy.
    Returns (bytes written, cut).
    """
    max_bytes = max(0, int(max_bytes))
    size = file_size(fh)
    start = size - max_bytes if tail and size > max_bytes else 0
    fh.seek(start)
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    try:
        dest.unlink()
    except FileNotFoundError:
        pass
    out = os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0), mode)
    written = 0
    try:
        os.fchmod(out, mode)  # the umask may only have narrowed it; make it exact
        while written < max_bytes:
            chunk = fh.read(min(_CHUNK, max_bytes - written))
            if not chunk:
                break
            os.write(out, chunk)
            written += len(chunk)
    finally:
        os.close(out)
    cut = start > 0 or written < size - start or size > max_bytes
    return written, cut


def confine(root: str | os.PathLike, rel: object) -> Path:
    """The path of `rel` inside `root`, for paths a manifest names.

    Refused (UnsafeFile): non-strings, empty, NUL, absolute paths, any `..` part, and
    paths whose resolved form (symlinks followed) leaves the resolved root.
    """
    if not isinstance(rel, str) or not rel or "\0" in rel:
        raise UnsafeFile(repr(rel), "not a relative path")
    if rel.startswith("/") or rel.startswith("\\") or (len(rel) > 1 and rel[1] == ":"):
        raise UnsafeFile(rel, "absolute path", "paths in a bundle are relative to its root")
    parts = rel.replace("\\", "/").split("/")
    if any(p == ".." for p in parts):
        raise UnsafeFile(rel, "leaves the bundle", "'..' is not allowed")
    base = Path(root).resolve()
    full = (base / rel).resolve()
    if full != base and base not in full.parents:
        raise UnsafeFile(rel, "leaves the bundle", "a link inside points outside")
    return full


def walk_files(root: str | os.PathLike, max_files: int = 100_000, max_depth: int = 32) -> Iterable[Path]:
    """Regular files under root, links not followed, bounded in count and depth."""
    base = Path(root)
    count = 0
    stack: list[tuple[Path, int]] = [(base, 0)]
    while stack:
        folder, depth = stack.pop()
        try:
            entries = sorted(os.scandir(folder), key=lambda e: e.name)
        except OSError:
            continue
        for entry in entries:
            if entry.is_symlink():
                continue
            if entry.is_dir(follow_symlinks=False):
                if depth + 1 < max_depth:
                    stack.append((Path(entry.path), depth + 1))
            elif entry.is_file(follow_symlinks=False):
                count += 1
                if count > max_files:
                    return
                yield Path(entry.path)

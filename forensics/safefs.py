"""Where a root `forensics` meets files other users control: reading for a job, and writing its own.

Why: `collect` runs as root, and two kinds of path reach it from hostile hands.

Reading. A target names files in its environment (NCCL_DEBUG_FILE, TORCHELASTIC_ERROR_FILE,
TORCH_FR_DUMP_TEMP_FILE) and holds others open (stdout/stderr). Any user can name
/etc/shadow, and a setuid-root program run by that user holds every uid check a
"does the target own it" test could make. So a file a target names is opened *as the job's
user*: a forked child drops to the target's REAL uid and gid (no supplementary groups, no
capabilities) and opens it with O_NOFOLLOW|O_NONBLOCK, then hands the descriptor back over a
socket. What that user could not open, we do not copy; and the file must also be owned by
that uid (so a root-owned file is never copied for a non-root job, even one all may read).
When `forensics` itself is not root, it cannot read more than its caller anyway: the file
is opened directly, under the same owner check.

Writing. Every file a command writes is created new (O_CREAT|O_EXCL|O_NOFOLLOW): an
existing path, or a link another user planted there, is never followed or overwritten.
Folders are made by the command (0700), or taken only when they are empty and the caller
owns them (`claim_folder`); a folder that other users may write to is refused
(`private_folder`), since they could plant a name between our check and our write.

Ground rule: nothing here runs a shell or follows a link; every refusal is an UnsafeFile
(an OSError with a short reason word) or a ForensicsError with one line for the user.
"""

from __future__ import annotations

import errno
import os
import signal
import socket
import stat
import struct
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from forensics.errors import ForensicsError
from parsers.input.safeio import UnsafeFile, checked_file, open_regular

READ_FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
CREATE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
FILE_MODE = 0o600  #: everything written may hold what a target wrote: owner only
DIR_MODE = 0o700
OPEN_TIMEOUT_S = 10.0  #: an open as the job's user that takes longer (a hung network mount) is given up
LOCK_NAME = ".forensics.lock"  #: created O_EXCL first in a claimed folder: a second command there is refused
_CHILD_BLOCKS = {signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2}
_ERR = struct.Struct("i")


@dataclass(frozen=True)
class JobUser:
    """The real uid and gid of a target: whose files it may name, and as whom they are opened."""

    uid: int
    gid: int

    @property
    def is_root(self) -> bool:
        return self.uid == 0


def job_user(pid: int) -> JobUser | None:
    """The REAL uid and gid of process `pid` (first fields of Uid:/Gid: in /proc/PID/status), or None.

    Real, not effective, saved or filesystem ids: a setuid program keeps its caller's real
    uid, and it is that caller's job.
    """
    try:
        with open(f"/proc/{int(pid)}/status", "rb") as fh:
            text = fh.read(65536).decode("ascii", "replace")
    except OSError:
        return None
    ids: dict[str, int] = {}
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key in ("Uid", "Gid"):
            parts = value.split()
            if parts and parts[0].isdigit():
                ids[key] = int(parts[0])
    if "Uid" not in ids or "Gid" not in ids:
        return None
    return JobUser(ids["Uid"], ids["Gid"])


# ----------------------------------------------------------------------------- reading as the job


def open_for_job(path: str | os.PathLike, user: JobUser | None, *, follow: bool = False) -> BinaryIO:
    """Open a file a target named, for reading, as that target's user would; a binary file object.

    Refused (UnsafeFile): the owner is unknown; a job with real gid 0 but a non-root uid (its
    group could read root's files); a link as last component (unless follow, for /proc/PID/fd/N);
    not a regular file; not owned by `user.uid`. OSError (PermissionError, FileNotFoundError)
    when the user could not open it.
    """
    if user is None:
        raise UnsafeFile(path, "owner unknown", "cannot read the target's uid and gid")
    expected = f"the job runs as uid {user.uid}"
    if os.geteuid() == 0 and not user.is_root:
        if user.gid == 0:
            raise UnsafeFile(path, "job runs with group root", f"uid {user.uid} with real gid 0: not opened for it")
        fd = _open_as(user, path, READ_FLAGS | (0 if follow else os.O_NOFOLLOW))
        return checked_file(fd, path, (user.uid,), expected)
    return open_regular(path, follow=follow, owners=(user.uid,), expected=expected)  # as ourselves: no child


def _open_as(user: JobUser, path: str | os.PathLike, flags: int) -> int:
    """os.open(path, flags) in a forked child that runs as `user` only; the descriptor comes back
    over a socket pair (SCM_RIGHTS). The child does nothing but drop ids, open and send."""
    target = os.fsencode(path)
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    old_mask = signal.pthread_sigmask(signal.SIG_BLOCK, _CHILD_BLOCKS)  # the child must not run our handlers
    try:
        pid = os.fork()
    except BaseException:
        signal.pthread_sigmask(signal.SIG_SETMASK, old_mask)
        ours.close()
        theirs.close()
        raise
    if pid == 0:  # child: never returns
        code = 3
        try:
            os.setgroups([])
            os.setresgid(user.gid, user.gid, user.gid)
            os.setresuid(user.uid, user.uid, user.uid)
            if os.getuid() != user.uid or os.geteuid() != user.uid or os.getgid() != user.gid or os.getgroups():
                os._exit(4)
            try:
                fd = os.open(target, flags)
            except OSError as err:
                theirs.sendall(_ERR.pack(err.errno or errno.EIO))
                code = 0
            else:
                socket.send_fds(theirs, [_ERR.pack(0)], [fd])
                code = 0
        finally:
            os._exit(code)
    signal.pthread_sigmask(signal.SIG_SETMASK, old_mask)
    theirs.close()
    fds: list[int] = []
    msg = b""
    timed_out = False
    try:
        ours.settimeout(OPEN_TIMEOUT_S)
        msg, fds, _flags, _addr = socket.recv_fds(ours, _ERR.size, 1)
    except socket.timeout:
        timed_out = True
    except OSError:
        msg = b""
    finally:
        ours.close()
        _reap(pid)
    if len(msg) != _ERR.size:
        for fd in fds:
            os.close(fd)
        why = (f"opening it as uid {user.uid} took over {OPEN_TIMEOUT_S:.0f} s" if timed_out
               else f"could not become uid {user.uid} gid {user.gid} to open it")
        raise UnsafeFile(path, "not opened", why)
    err = _ERR.unpack(msg)[0]
    if err:
        for fd in fds:
            os.close(fd)
        if err == errno.ELOOP and flags & os.O_NOFOLLOW:
            raise UnsafeFile(path, "is a symbolic link", "links are not followed")
        raise OSError(err, f"{os.strerror(err)} (as uid {user.uid})", str(path))
    if len(fds) != 1:
        for fd in fds:
            os.close(fd)
        raise UnsafeFile(path, "not opened", "no descriptor came back")
    return fds[0]


def _reap(pid: int) -> None:
    """Wait for the opener child; one stuck (a hung mount) is killed and not waited on for long."""
    deadline = time.monotonic() + 1.0
    killed = False
    while True:
        try:
            done, _status = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            return
        if done:
            return
        if time.monotonic() > deadline:
            if killed:
                return  # in uninterruptible sleep: it ends when the mount answers; nothing of ours waits
            os.kill(pid, signal.SIGKILL)
            killed, deadline = True, time.monotonic() + 1.0
        time.sleep(0.002)


# ----------------------------------------------------------------------------- writing our own


MAX_LINKS = 40  #: links followed in one output path, as the kernel's own limit: a loop is refused


def _refuse(path: str | os.PathLike, where: str, why: str) -> ForensicsError:
    return ForensicsError(f"{path}: refused as root: {where} {why}; write elsewhere (a folder of root's or yours)")


def _trusted(st: os.stat_result) -> bool:
    """Owned by root or by us: no other user can rename, replace or relink what is in it."""
    return st.st_uid in (0, os.geteuid())


def _check_folder(path: str | os.PathLike, where: str, st: os.stat_result) -> None:
    if not stat.S_ISDIR(st.st_mode):
        raise _refuse(path, where, "is not a folder")
    if not _trusted(st):
        raise _refuse(path, where, f"belongs to uid {st.st_uid} (another user could replace what lies below it)")
    if st.st_mode & 0o022 and not st.st_mode & stat.S_ISVTX:
        raise _refuse(path, where, "may be written by other users (they could plant a link below it)")


def _walk_folder(folder: str | os.PathLike, make: bool) -> None:
    """As root: walk `folder` from / one component at a time with lstat (no link followed by us blindly), as
    the kernel will resolve it: each folder must be root's or ours and not writable by others (a sticky folder
    such as /tmp passes: its entries are then checked by owner); a link is followed only when root or we own
    it (one another user planted, e.g. /home/evil/out -> /etc, is refused). make=True creates missing folders
    (0755, root's). Why a walk and not one check: every component is a place another user could swap."""
    pending = [c for c in os.fspath(os.path.join(os.getcwd(), folder)).split("/") if c not in ("", ".")]
    current, links = "/", 0
    _check_folder(folder, "/", os.lstat("/"))
    while pending:
        comp = pending.pop(0)
        if comp == "..":
            current = os.path.dirname(current)
            continue
        nxt = os.path.join(current, comp)
        try:
            st = os.lstat(nxt)
        except FileNotFoundError:
            if not make:
                return  # nothing below exists: the write itself fails, nothing is followed
            try:
                os.mkdir(nxt, 0o755)
            except FileExistsError:
                pass  # made meanwhile (a sticky folder): checked below like any other
            st = os.lstat(nxt)
        if stat.S_ISLNK(st.st_mode):
            links += 1
            if not _trusted(st):
                raise _refuse(folder, nxt, f"is a symbolic link of uid {st.st_uid}; not followed")
            if links > MAX_LINKS:
                raise _refuse(folder, nxt, f"is one link too many (over {MAX_LINKS}): a loop?")
            target = os.readlink(nxt)
            pending[:0] = [c for c in target.split("/") if c not in ("", ".")]
            current = "/" if target.startswith("/") else current
            continue
        _check_folder(folder, nxt, st)
        current = nxt


def check_parents(path: str | os.PathLike) -> None:
    """Before root writes `path`: the folders above it must be root's or ours all the way down (_walk_folder);
    a ForensicsError that says which component and why otherwise. Not root: nothing (the kernel already
    confines us to what the caller may write)."""
    if os.geteuid() == 0:
        _walk_folder(os.path.dirname(os.path.join(os.getcwd(), path)) or "/", make=False)


def ensure_folder(folder: str | os.PathLike) -> Path:
    """`folder` and its missing parents made, for an output path (-o FILE's folder, collect -o's parent).
    As root, every existing component is checked as check_parents does before anything is made below it."""
    folder = Path(folder)
    try:
        if os.geteuid() == 0:
            _walk_folder(folder, make=True)
        else:
            folder.mkdir(parents=True, exist_ok=True)
    except ForensicsError:
        raise
    except OSError as err:
        raise ForensicsError(f"{folder}: cannot create the folder ({err.strerror or err})") from err
    return folder



def create(path: str | os.PathLike, mode: int = FILE_MODE) -> int:
    """A new file at `path` for writing (O_CREAT|O_EXCL|O_NOFOLLOW), its mode exactly `mode`.

    An existing name, a planted link included, is refused with a one-line ForensicsError; as root, so is a
    path whose folders another user could change (check_parents).
    """
    check_parents(path)
    try:
        fd = os.open(path, CREATE_FLAGS, mode)
    except FileExistsError as err:
        raise ForensicsError(f"{path}: already exists; not overwritten") from err
    except OSError as err:
        if err.errno == errno.ELOOP:
            raise ForensicsError(f"{path}: is a symbolic link; not followed") from err
        raise
    try:
        os.fchmod(fd, mode)
    except BaseException:
        os.close(fd)
        raise
    return fd


def write_new(path: str | os.PathLike, data: bytes | str, mode: int = FILE_MODE, *, durable: bool = False) -> int:
    """Write `data` (str as UTF-8, undecodable bytes kept) into a new file; returns bytes written.
    durable=True: on disk (fsync) before it returns."""
    raw = data.encode("utf-8", "surrogateescape") if isinstance(data, str) else data
    fd = create(path, mode)
    try:
        view = memoryview(raw)
        while view:
            view = view[os.write(fd, view):]
        if durable:
            os.fsync(fd)
    except BaseException:
        os.close(fd)
        _remove_partial(path)
        raise
    os.close(fd)
    return len(raw)


def _remove_partial(path: str | os.PathLike) -> None:
    """A file we created and could not finish (a full disk, a signal): removed, so no half file stays."""
    try:
        os.unlink(path)
    except OSError:
        pass


def write_first_free(first: str | os.PathLike, data: bytes | str, limit: int = 100) -> Path:
    """`data` in a new file at `first`, or at NAME-2.EXT, NAME-3.EXT... where that is taken: never over a
    file, never through a link (report's default output, analyze --save). ForensicsError past `limit` names."""
    first = Path(first)
    check_parents(first)  # a refused folder is said once, not taken for 100 names in use
    for n in range(1, limit + 1):
        path = first if n == 1 else first.with_name(f"{first.stem}-{n}{first.suffix}")
        if os.path.lexists(path):
            continue
        try:
            write_new(path, data)
        except ForensicsError:
            continue  # taken meanwhile
        except OSError as err:
            raise ForensicsError(f"{path}: cannot write ({err.strerror or err})") from err
        return path
    raise ForensicsError(f"{first}: {limit} files of this name exist already")


def copy_from(fh: BinaryIO, dest: str | os.PathLike, max_bytes: int, *, tail: bool = True,
              mode: int = FILE_MODE) -> tuple[int, bool]:
    """Copy at most `max_bytes` of an open file (its end with tail=True) into a new file; (bytes, cut)."""
    max_bytes = max(0, int(max_bytes))
    size = os.fstat(fh.fileno()).st_size
    start = size - max_bytes if tail and size > max_bytes else 0
    fh.seek(start)
    fd = create(dest, mode)
    written = 0
    try:
        while written < max_bytes:
            chunk = fh.read(min(1 << 20, max_bytes - written))
            if not chunk:
                break
            view = memoryview(chunk)
            while view:
                view = view[os.write(fd, view):]
            written += len(chunk)
    except BaseException:
        os.close(fd)
        _remove_partial(dest)
        raise
    os.close(fd)
    return written, start > 0 or size > max_bytes


def replace_file(path: str | os.PathLike, data: bytes | str, mode: int = FILE_MODE, *, durable: bool = False) -> None:
    """Write `data` to a new temporary name beside `path` (O_EXCL), then rename it over `path`.

    For files a command rewrites in a folder it owns (a manifest, a bisect state, an -o FILE): the rename
    replaces the name itself, so a link there is replaced, never written through, and a reader sees the
    old file or the new one, never half; a failed write (a full disk) leaves no temp file. The temp name
    carries the pid and thread, so writers in several threads never meet; durable=True fsyncs it first.
    """
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.{time.monotonic_ns()}.tmp")
    try:
        write_new(tmp, data, mode, durable=durable)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def make_dirs(root: str | os.PathLike, rel: str | os.PathLike = "") -> Path:
    """root/rel, making each missing folder below `root` (0700); an existing part must be a real
    folder, not a link. `root` itself must exist (as root: checked like every output folder, check_parents).
    Returns the full path."""
    path = Path(root)
    as_root = os.geteuid() == 0
    if as_root:
        _walk_folder(path, make=False)
    for part in Path(rel).parts:
        if part in ("", ".", "..", "/"):
            raise ForensicsError(f"{rel}: not a plain relative folder")
        path = path / part
        try:
            os.mkdir(path, DIR_MODE)
        except FileExistsError:
            st = os.lstat(path)
            if not stat.S_ISDIR(st.st_mode):
                raise ForensicsError(f"{path}: exists and is not a folder (a link is not followed)") from None
            if as_root:
                _check_folder(path, path, st)
    return path


def ensure_parent(root: str | os.PathLike, path: str | os.PathLike) -> None:
    """make_dirs for the folder that holds `path`, when `path` lies under `root`; else nothing."""
    try:
        rel = Path(path).parent.relative_to(Path(root))
    except ValueError:
        return
    make_dirs(root, rel)


def private_folder(folder: str | os.PathLike, what: str = "folder") -> None:
    """Refuse (ForensicsError) a folder that is a link, not a folder, not the caller's, or that
    others may write to: there another user could plant the names we are about to create."""
    check_parents(Path(folder) / "x")
    try:
        st = os.lstat(folder)
    except OSError as err:
        raise ForensicsError(f"{folder}: cannot use this {what} ({err.strerror or err})") from err
    if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode):
        raise ForensicsError(f"{folder}: the {what} is not a folder (a link is not followed)")
    if st.st_uid != os.geteuid():
        raise ForensicsError(f"{folder}: the {what} belongs to uid {st.st_uid}, not to you; write elsewhere (-o)")
    if st.st_mode & 0o022:
        raise ForensicsError(f"{folder}: other users may write to this {what}; write elsewhere (-o)")


def claim_folder(folder: str | os.PathLike, what: str = "output folder") -> Path:
    """A folder for a command's output: created now (0700, parents as needed), or an existing
    EMPTY folder that the caller owns (made 0700). Then LOCK_NAME is created in it (O_EXCL),
    so a second command into it is refused. Returns the folder; release_folder() removes the lock."""
    folder = Path(folder)
    ensure_folder(folder.parent)
    try:
        os.mkdir(folder, DIR_MODE)
    except FileExistsError:
        _take_empty(folder, what)
    except OSError as err:
        raise ForensicsError(f"{folder}: cannot create the {what} ({err.strerror or err})") from err
    try:
        fd = os.open(folder / LOCK_NAME, CREATE_FLAGS, FILE_MODE)
    except FileExistsError as err:
        raise ForensicsError(f"{folder}: in use by another forensics command ({LOCK_NAME} exists)") from err
    except OSError as err:
        raise ForensicsError(f"{folder}: cannot write in the {what} ({err.strerror or err})") from err
    try:
        os.write(fd, f"{os.getpid()}\n".encode())
    finally:
        os.close(fd)
    return folder


def _take_empty(folder: Path, what: str) -> None:
    if folder.is_symlink():
        raise ForensicsError(f"{folder}: exists and is a symbolic link; not followed, give a new folder")
    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as err:
        raise ForensicsError(f"{folder}: exists and is not a folder the {what} can use "
                             f"({'a symbolic link' if err.errno == errno.ELOOP else err.strerror or err})") from err
    try:
        st = os.fstat(fd)
        if st.st_uid != os.geteuid():
            raise ForensicsError(f"{folder}: exists and belongs to uid {st.st_uid}, not to you; give a new folder")
        if stat.S_IMODE(st.st_mode) != DIR_MODE:
            os.fchmod(fd, DIR_MODE)  # ours: from now on nobody else can add a name to it
        entries = os.listdir(fd)
    finally:
        os.close(fd)
    if LOCK_NAME in entries:
        raise ForensicsError(f"{folder}: in use by another forensics command ({LOCK_NAME} exists)")
    if entries:
        raise ForensicsError(f"{folder}: exists and is not empty; give a new or empty folder")


def release_folder(folder: str | os.PathLike) -> None:
    """Remove the lock claim_folder created (the folder is no longer empty: it stays refused)."""
    try:
        os.unlink(Path(folder) / LOCK_NAME)
    except FileNotFoundError:
        pass

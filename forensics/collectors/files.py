"""Copying files a rank names (its stdout/stderr, NCCL logs, Flight Recorder dumps, recorder state).

Collection runs as root, and the paths come from the target's own environment and
file descriptors, so they are hostile: a process running as `nobody` could set
NCCL_DEBUG_FILE=/etc/shadow, or plant a symlink at the world-writable default dump
prefix /tmp/nccl_trace_rank_. So a file is copied only when

- it is opened AS THE JOB'S USER: the target's real uid and gid, no other groups
  (forensics.safefs.open_for_job; a setuid target gives no more than its caller could read),
- it is a regular file (a FIFO or device never blocks and never streams forever),
- the last path component is not a symlink (O_NOFOLLOW),
- the target's real uid owns it (checked with fstat on the open descriptor), and
- at most a cap of bytes is copied, into a new 0600 file in the bundle (O_EXCL|O_NOFOLLOW);
- logs (text) go through the one redaction rule set (forensics.bundle.redact) on the way.

Logs keep their last bytes (where a hang's story is); dumps and state files are
copied whole or not at all (a cut pickle is useless). Paths a process names are
relative to its working directory.
"""

from __future__ import annotations

import os
from pathlib import Path

from forensics import safefs
from forensics.discover import procfs
from forensics.safefs import JobUser
from forensics.bundle import redact
from parsers.input import safeio
from parsers.input.safeio import UnsafeFile

COPY_MODE = 0o600  #: copied target files may hold anything the target wrote: owner-only


def process_path(pid: int, path: str) -> Path:
    """A path as the process sees it: relative ones resolve against its working directory."""
    if os.path.isabs(path):
        return Path(path)
    try:
        cwd = os.readlink(procfs.PROC / str(pid) / "cwd")
    except OSError:
        cwd = "."
    return Path(cwd) / path


def target_user(pid: int) -> JobUser | None:
    """The real uid and gid of process `pid`: as whom the files it names are opened (forensics.safefs)."""
    return safefs.job_user(pid)


def copy_target_file(pid: int, src: Path, dest: Path, max_bytes: int, tail: bool = True) -> tuple[int, bool]:
    """Copy at most max_bytes of a file that process `pid` named, if it may be copied.

    Raises UnsafeFile (an OSError) when the file is refused: not regular, a link, or
    not owned by the target's real uid; OSError when its user could not open it.
    Returns (bytes copied, whether cut).
    """
    with safefs.open_for_job(src, target_user(pid)) as fh:
        return safefs.copy_from(fh, dest, max_bytes, tail=tail, mode=COPY_MODE)


def copy_target_log(pid: int, src: Path, dest: Path, max_bytes: int, follow: bool = False) -> tuple[int, bool]:
    """Copy the last max_bytes of a log a process named, with secrets redacted
    (forensics.bundle.redact), under the same checks as copy_target_file.

    Bytes that are not UTF-8 pass through unchanged (surrogateescape), so only the
    redacted spans differ from the original. follow=True only for /proc/PID/fd/N (the very
    file the process holds, reopened as its user). Returns (bytes written, whether cut).
    """
    with safefs.open_for_job(src, target_user(pid), follow=follow) as fh:
        data, cut = safeio.read_bytes(fh, max_bytes, tail=True)
    text = redact.redact_text(data.decode("utf-8", "surrogateescape"))
    return safefs.write_new(dest, text, COPY_MODE), cut


def copy_whole_or_refuse(pid: int, src: Path, dest: Path, max_bytes: int) -> int:
    """Copy a file that is only useful whole (a pickle, a binary state file).

    Raises UnsafeFile with reason 'too large' when it is bigger than max_bytes.
    """
    with safefs.open_for_job(src, target_user(pid)) as fh:
        size = safeio.file_size(fh)
        if size > max_bytes:
            raise UnsafeFile(src, "too large", f"{size} bytes, the cap is {max_bytes}")
        written, _ = safefs.copy_from(fh, dest, max_bytes, tail=False, mode=COPY_MODE)
        return written

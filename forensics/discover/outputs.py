"""Where a rank's output lives: its stdout/stderr files, torchrun log folders, Slurm files, error file.

Why: the exception that ended a rank (CUDA OOM, DistStoreError, an NCCL error) is in its
own output, and that output is rarely where a collector first looks. Places, from facts:
- /proc/PID/fd/1 and /2 when they are regular files (`> file`, torchrun --redirects);
- torchrun --log-dir: `<log_dir>/<run_id>_<rand>/attempt_<N>/<local_rank>/{stdout,stderr}.log`,
  the folder of TORCHELASTIC_ERROR_FILE, which torchrun puts into each worker's environment;
- TORCHELASTIC_ERROR_FILE itself (JSON written by `@record`);
- Slurm batch output: `slurm-<jobid>.out` (arrays `slurm-<array>_<task>.out`) in SLURM_SUBMIT_DIR.

Every path here is named by the (hostile) target, and collect runs as root: a file is
opened as the job's user (its real uid and gid: forensics.safefs.open_for_job) without
following symlinks (or, for fd 1/2, through /proc/PID/fd itself, which is the very file
the process holds), only when it is a regular file owned by the target's real uid (never
root's for a non-root job), and only its bounded tail is read.
"""

from __future__ import annotations

import os
import re
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import BinaryIO

from forensics import safefs
from forensics.bundle.writer import unique_name
from parsers.gather.registry import collector_file
from forensics.discover import procfs
from forensics.safefs import JobUser

MAX_LOG_DIR_ENTRIES = 256  #: entries looked at per folder level of a torchrun --log-dir
_JOB_ID = re.compile(r"^\d{1,12}$")


@dataclass
class OutputFile:
    """One place a rank's output was found.

    kind: fd (the file behind fd 1/2), torchrun-log, error-file, slurm-output, sibling-named (an
    exited rank's file, named as its siblings' are: forensics.discover.exited).
    stream: stdout, stderr, error (error file) or combined (Slurm output, both streams).
    open_path: what to open; for fd outputs it is /proc/PID/fd/N, not the named path.
    """

    kind: str
    stream: str
    path: str  #: the path as the process or its launcher names it
    open_path: str
    size: int | None = None

    def to_dict(self) -> dict:
        return asdict(self)


def target_user(pid: int) -> JobUser | None:
    """Real uid and gid of the process: as whom the files it names are opened (forensics.safefs)."""
    return safefs.job_user(pid)


def open_owned(path: str, user: JobUser | None, follow: bool = False) -> BinaryIO | None:
    """`path` opened for reading as the job's user (forensics.safefs.open_for_job): a regular file
    its real uid owns and could open itself; None when refused.

    `follow=False` refuses a symlink as the last component (O_NOFOLLOW); /proc/PID/fd/N
    links are opened with follow=True, which reopens the process's own file.
    """
    try:
        return safefs.open_for_job(path, user, follow=follow)
    except OSError:
        return None


def _size_if_owned(path: str, user: JobUser | None, follow: bool = False) -> int | None:
    fh = open_owned(path, user, follow)
    if fh is None:
        return None
    with fh:
        return os.fstat(fh.fileno()).st_size


def copy_tail(fh: BinaryIO, dest: Path, max_bytes: int) -> tuple[int, bool]:
    """Copy the last max_bytes of an open file into a new file dest; (bytes copied, whether cut). Closes fh."""
    with fh:
        return safefs.copy_from(fh, dest, max_bytes, tail=True)


def _fd_outputs(pid: int, user: JobUser | None) -> list[OutputFile]:
    found = []
    seen: set[str] = set()
    for fd, stream in ((1, "stdout"), (2, "stderr")):
        where = procfs.fd_target(pid, fd)
        if not where or not where.startswith("/") or where in seen:
            continue
        open_path = str(procfs.PROC / str(pid) / "fd" / str(fd))
        size = _size_if_owned(open_path, user, follow=True)
        if size is None:
            continue
        seen.add(where)
        found.append(OutputFile("fd", stream, where, open_path, size))
    return found


def _under_cwd(pid: int, path: str) -> str:
    if os.path.isabs(path):
        return path
    try:
        return os.path.join(os.readlink(procfs.PROC / str(pid) / "cwd"), path)
    except OSError:
        return path


def _error_file_outputs(pid: int, environ: dict[str, str], user: JobUser | None) -> list[OutputFile]:
    """TORCHELASTIC_ERROR_FILE and, beside it, torchrun's stdout.log/stderr.log of this worker."""
    named = environ.get("TORCHELASTIC_ERROR_FILE")
    if not named or "\0" in named or len(named) > 4096:
        return []
    path = os.path.normpath(_under_cwd(pid, named))
    found = []
    size = _size_if_owned(path, user)
    if size is not None:
        found.append(OutputFile("error-file", "error", path, path, size))
    folder = os.path.dirname(path)
    for stream in ("stdout", "stderr"):
        log = os.path.join(folder, f"{stream}.log")
        size = _size_if_owned(log, user)
        if size is not None:
            found.append(OutputFile("torchrun-log", stream, log, log, size))
    return found


def torchrun_log_dir(cmdline: list[str]) -> str | None:
    """The --log-dir (--log_dir) a torchrun agent was started with, if any."""
    for i, arg in enumerate(cmdline[:4096]):
        for flag in ("--log-dir", "--log_dir"):
            if arg == flag and i + 1 < len(cmdline):
                return cmdline[i + 1]
            if arg.startswith(flag + "="):
                return arg.split("=", 1)[1]
    return None


def _scan_log_dir(log_dir: str, local_rank: int, user: JobUser | None) -> list[OutputFile]:
    """`<log_dir>/<run>/attempt_<N>/<local_rank>/{stdout,stderr}.log`, newest run, highest attempt."""
    best: tuple[float, int, str] | None = None
    try:
        runs = sorted(os.scandir(log_dir), key=lambda e: e.name)[:MAX_LOG_DIR_ENTRIES]
    except OSError:
        return []
    for run in runs:
        if not run.is_dir(follow_symlinks=False):
            continue
        try:
            attempts = sorted(os.scandir(run.path), key=lambda e: e.name)[:MAX_LOG_DIR_ENTRIES]
        except OSError:
            continue
        for att in attempts:
            m = re.fullmatch(r"attempt_(\d{1,6})", att.name)
            if not m or not att.is_dir(follow_symlinks=False):
                continue
            folder = os.path.join(att.path, str(local_rank))
            try:
                mtime = os.lstat(folder).st_mtime
            except OSError:
                continue
            key = (mtime, int(m.group(1)), folder)
            if best is None or key > best:
                best = key
    if best is None:
        return []
    found = []
    for stream in ("stdout", "stderr"):
        log = os.path.join(best[2], f"{stream}.log")
        size = _size_if_owned(log, user)
        if size is not None:
            found.append(OutputFile("torchrun-log", stream, log, log, size))
    return found


def slurm_output_names(environ: dict[str, str]) -> list[str]:
    """Default Slurm batch output files of the job in its submit folder (`slurm-%j.out`, `slurm-%A_%a.out`)."""
    submit = environ.get("SLURM_SUBMIT_DIR")
    job = environ.get("SLURM_JOB_ID") or environ.get("SLURM_JOBID")
    if not submit or not job or not _JOB_ID.match(job) or "\0" in submit:
        return []
    names = [f"slurm-{job}.out"]
    array, task = environ.get("SLURM_ARRAY_JOB_ID"), environ.get("SLURM_ARRAY_TASK_ID")
    if array and task and _JOB_ID.match(array) and _JOB_ID.match(task):
        names.insert(0, f"slurm-{array}_{task}.out")
    return [os.path.join(submit, n) for n in names]


def _slurm_outputs(environ: dict[str, str], user: JobUser | None) -> list[OutputFile]:
    for path in slurm_output_names(environ):
        size = _size_if_owned(path, user)
        if size is not None:
            return [OutputFile("slurm-output", "combined", path, path, size)]
    return []


def locate_outputs(pid: int, environ: dict[str, str], local_rank: int | None = None) -> list[OutputFile]:
    """Every output file of rank process `pid` that can be read safely, fd ones first, no duplicates."""
    user = target_user(pid)
    found = _fd_outputs(pid, user)
    found += _error_file_outputs(pid, environ, user)
    if not any(f.kind == "torchrun-log" for f in found):
        parent = procfs.read_ppid(pid)
        log_dir = torchrun_log_dir(procfs.read_cmdline(parent)) if parent else None
        if log_dir and local_rank is not None:
            found += _scan_log_dir(_under_cwd(parent, log_dir), local_rank, user)
    found += _slurm_outputs(environ, user)
    unique, seen = [], set()
    for item in found:
        key = os.path.realpath(item.path) if item.kind != "fd" else item.path
        if key in seen:
            continue
        seen.add(key)
        unique.append(item)
    return unique


def _rank_log(name: str) -> str:
    return collector_file("stdio", "rank-log", name)  # a name the registry does not declare: KeyError, a bug


#: (kind, stream) -> the name of its copy in the rank folder; every one declared by the rank-log kind
_BUNDLE_NAMES = {
    ("fd", "stdout"): _rank_log("stdout.log"), ("fd", "stderr"): _rank_log("stderr.log"),
    ("torchrun-log", "stdout"): _rank_log("torchrun.stdout.log"),
    ("torchrun-log", "stderr"): _rank_log("torchrun.stderr.log"),
    ("error-file", "error"): _rank_log("torchelastic_error.json"),
    ("sibling-named", "stdout"): _rank_log("stdout.log"), ("sibling-named", "stderr"): _rank_log("stderr.log"),
    ("slurm-output", "combined"): _rank_log("slurm-output.log"),
}


def bundle_name(item: OutputFile, taken: set[str]) -> str:
    """File name in the rank folder: stdout.log / stderr.log for fds (as before), else by kind; the names
    are the registry's (parsers.gather.registry: the rank-log kind)."""
    return unique_name(_BUNDLE_NAMES.get((item.kind, item.stream)) or _rank_log(f"{item.kind}.log"), taken)


def copy_output(item: OutputFile, dest: Path, max_bytes: int, user: JobUser | None) -> tuple[int, bool] | None:
    """Copy the bounded tail of one located output, opened again as the job's user; None if refused."""
    fh = open_owned(item.open_path, user, follow=item.kind == "fd")
    if fh is None:
        return None
    return copy_tail(fh, dest, max_bytes)

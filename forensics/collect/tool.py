"""Runs an external tool (py-spy, gdb, ...) with a hard time limit, safely.

Field-measured hazards shape this: SIGINT to gdb was once forwarded into the target
and SIGTERM once left it stopped, while SIGKILL to the tool left the target running.
So every tool starts in its own session and is ended with SIGKILL to its group only.

Tools must also never outlive `collect` (issue 16: Ctrl-C while gdb was attached left
the target ptrace-stopped for a minute). Every tool process is registered here;
`interrupt()` (called from collect's SIGINT/SIGTERM handler) SIGKILLs them all at
once and stops new ones from starting. A ptrace tool (given `target_pid`) runs under
forensics/collect/supervise.py, which also covers collect being SIGKILLed: it holds
a pipe only collect writes to, and on EOF kills the tool and resumes the target if
the tool left it stopped. Other tools get PR_SET_PDEATHSIG=SIGKILL.
"""

from __future__ import annotations

import ctypes
import os
from collections import deque
import selectors
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

SUPERVISOR = Path(__file__).with_name("supervise.py")
PR_SET_PDEATHSIG = 1

#: set once collect is interrupted: no tool starts after it, running ones are killed
INTERRUPTED = threading.Event()
REASON: list[str] = []  #: what interrupted the collection (the signal's name), for the manifest's note
_RUNNING: set[subprocess.Popen] = set()
_LOCK = threading.Lock()
_LIFELINE: list[int] = []  #: [read end, write end] of the pipe whose EOF tells supervisors collect is gone


@dataclass
class ToolResult:
    """What one tool run produced."""

    argv: list[str]
    returncode: int | None
    stdout: str
    stderr: str
    seconds: float
    timed_out: bool = False
    missing: bool = False
    interrupted: bool = False
    cut: bool = False  #: stopped once its stdout reached the cap: `stdout` holds what came before (keep_tail: the
    #: tool ran on and `stdout` holds its last bytes)

    @property
    def ok(self) -> bool:
        return (self.returncode == 0 and not self.timed_out and not self.missing and not self.interrupted
                and not self.cut)


def _lifeline() -> int:
    """The read end of the lifeline pipe (created once; collect keeps the write end open until it dies)."""
    with _LOCK:
        if not _LIFELINE:
            _LIFELINE.extend(os.pipe())  # both ends non-inheritable: only pass_fds hands the read end on
        return _LIFELINE[0]


def _die_with_us() -> None:
    """preexec: SIGKILL the tool when collect's thread that started it dies."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def spawn(argv: list[str], target_pid: int | None = None, **popen: object) -> subprocess.Popen:
    """Start a tool in its own session, registered for interrupt(); a ptrace tool
    (target_pid given) under the supervisor. Raises OSError when it cannot start, and
    InterruptedError once collect is interrupted."""
    if INTERRUPTED.is_set():
        raise InterruptedError("collection interrupted")
    if target_pid is not None:
        read_end = _lifeline()
        full = [sys.executable, "-I", "-S", str(SUPERVISOR), str(read_end), str(int(target_pid)), "--", *argv]
        try:
            proc = subprocess.Popen(full, start_new_session=True, pass_fds=(read_end,), **popen)  # type: ignore[arg-type]
        except OSError:  # no usable Python for the supervisor: the tool still dies with us (PDEATHSIG)
            proc = subprocess.Popen(argv, start_new_session=True, preexec_fn=_die_with_us, **popen)  # type: ignore[arg-type]
    else:
        proc = subprocess.Popen(argv, start_new_session=True, preexec_fn=_die_with_us, **popen)  # type: ignore[arg-type]
    with _LOCK:
        _RUNNING.add(proc)
    if INTERRUPTED.is_set():  # interrupted while starting: do not let it run
        kill_group(proc)
    return proc


def forget(proc: subprocess.Popen) -> None:
    """Drop a finished tool from the registry."""
    with _LOCK:
        _RUNNING.discard(proc)


def interrupt(reason: str = "") -> None:
    """Stop every tool now (SIGKILL to each group) and refuse new ones. Safe in a signal handler.
    `reason` ('SIGHUP') is said in the manifest's note (REASON)."""
    if reason and not REASON:
        REASON.append(reason)
    INTERRUPTED.set()
    # no lock: the handler may run while the main thread holds it; list() of a set is atomic under the GIL
    running = list(_RUNNING)
    for proc in running:
        kill_group(proc)


def tool_override_var(name: str) -> str:
    """Environment variable that points a tool elsewhere: py-spy -> FORENSICS_PY_SPY."""
    return "FORENSICS_" + name.upper().replace("-", "_")


def find_tool(name: str) -> str | None:
    """Path of `name`: FORENSICS_<NAME> if set, else PATH, else beside the running Python
    (a venv's bin is often not on PATH). An override that is not executable means 'missing'."""
    override = os.environ.get(tool_override_var(name))
    if override:
        return override if os.access(override, os.X_OK) else None
    found = shutil.which(name)
    if found:
        return found
    import sys

    beside = os.path.join(os.path.dirname(sys.executable), name)
    return beside if os.access(beside, os.X_OK) else None


def clear_interrupt() -> None:
    """Allow tools again (for a process that collects more than once, e.g. tests)."""
    INTERRUPTED.clear()
    REASON.clear()


#: stdout a tool may send before it is stopped (a collector passes a smaller cap: its rank's bytes left)
TOOL_STDOUT_BYTES = 64 << 20
#: stderr kept of a tool (its first lines say why it failed; the rest is read and dropped)
TOOL_STDERR_BYTES = 64 << 10
_CHUNK = 1 << 16
KILLED_READ_S = 2.0  #: how long a killed tool's pipes are read on


def run_tool(argv: list[str], timeout: float, env: dict[str, str] | None = None,
             target_pid: int | None = None, max_stdout: int = TOOL_STDOUT_BYTES, keep_tail: bool = False) -> ToolResult:
    """Run argv; on timeout SIGKILL its whole process group. Never raises for tool failures.

    target_pid names the process a ptrace tool attaches to (see spawn). stdout is read as it comes and the
    tool is stopped (SIGKILL to its group, as on a timeout) once it has sent `max_stdout` bytes: a target of
    1,000 threads of 300 frames made py-spy print 78 MB, all of it held in memory before any cap looked at it.
    What came before the cut is kept (`cut`); a ptrace tool's caller resumes a target the kill left stopped
    (forensics.collect.guard.StateGuard). `keep_tail`: the tool runs on (to its time limit) and its last
    `max_stdout` bytes are kept instead, `cut` when its start was dropped: a kernel log's newest lines are the ones
    that matter, and a log of GBs kept its oldest 64 MiB."""
    exe = find_tool(argv[0])
    start = time.monotonic()
    if exe is None:
        return ToolResult(argv, None, "", f"{argv[0]}: not installed", 0.0, missing=True)
    try:
        proc = spawn([exe, *argv[1:]], target_pid=target_pid, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                     stderr=subprocess.PIPE, env=env)
    except InterruptedError:
        return ToolResult(argv, None, "", "collection interrupted", 0.0, interrupted=True)
    except OSError as err:
        return ToolResult(argv, None, "", f"{argv[0]}: {err}", time.monotonic() - start, missing=True)
    try:
        out, err, timed_out, cut = _read_capped(proc, start + timeout, max(0, int(max_stdout)), keep_tail)
    finally:
        forget(proc)
    return ToolResult(argv, proc.returncode, out.decode("utf-8", "replace"), err.decode("utf-8", "replace"),
                      time.monotonic() - start, timed_out=timed_out,
                      interrupted=INTERRUPTED.is_set() and proc.returncode != 0, cut=cut)


def _read_capped(proc: subprocess.Popen, deadline: float, max_stdout: int,
                 keep_tail: bool = False) -> tuple[bytes, bytes, bool, bool]:
    """Read the tool's stdout (up to `max_stdout` bytes) and stderr (its first TOOL_STDERR_BYTES) as they come,
    until both close; SIGKILL its group at the deadline or once stdout passes the cap, then read on for at most
    KILLED_READ_S (a child that left the group may hold a pipe open). (stdout, stderr, timed_out, cut).
    `keep_tail`: stdout's chunks are kept while their last `max_stdout` bytes need them (no kill at the cap)."""
    out, err = bytearray(), bytearray()
    tail: deque[bytes] | None = deque() if keep_tail else None
    held = 0  # bytes in `tail`
    out_fd = proc.stdout.fileno()  # type: ignore[union-attr]
    streams = {out_fd: (out, max_stdout), proc.stderr.fileno(): (err, TOOL_STDERR_BYTES)}  # type: ignore[union-attr]
    timed_out = cut = False
    killed_at: float | None = None
    with selectors.DefaultSelector() as sel:
        for fd in streams:
            sel.register(fd, selectors.EVENT_READ)
        while sel.get_map():
            now = time.monotonic()
            if killed_at is None and now >= deadline:
                timed_out, killed_at = True, now
                kill_group(proc)
            if killed_at is not None and now - killed_at > KILLED_READ_S:
                break
            for key, _ in sel.select(min(0.5, max(0.0, deadline - now)) if killed_at is None else 0.1):
                chunk = os.read(key.fd, _CHUNK)
                if not chunk:
                    sel.unregister(key.fd)
                    continue
                if tail is not None and key.fd == out_fd:
                    tail.append(chunk)
                    held += len(chunk)
                    while len(tail) > 1 and held - len(tail[0]) >= max_stdout:  # the oldest chunk is not needed
                        held -= len(tail.popleft())
                        cut = True
                    continue
                buf, cap = streams[key.fd]
                room = max(0, cap - len(buf))
                buf += chunk[:room]
                if key.fd == out_fd and len(chunk) > room and killed_at is None:
                    cut, killed_at = True, time.monotonic()
                    kill_group(proc)  # its pipes close with it; what came before the cap is kept
    for stream in (proc.stdout, proc.stderr):
        stream.close()  # type: ignore[union-attr]
    try:
        proc.wait(timeout=max(0.1, deadline - time.monotonic()))  # a tool that closed its pipes and runs on
    except subprocess.TimeoutExpired:
        timed_out = not cut
        kill_group(proc)
        proc.wait()
    if tail is not None:
        kept = b"".join(tail)
        cut = cut or len(kept) > max_stdout
        return kept[len(kept) - min(len(kept), max_stdout):], bytes(err), timed_out, cut
    return bytes(out), bytes(err), timed_out, cut


def kill_group(proc: subprocess.Popen) -> None:
    """SIGKILL the tool and anything it started; never a softer signal (see module doc)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass

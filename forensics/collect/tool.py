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

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.timed_out and not self.missing and not self.interrupted


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
    running = list(_RUNNING)  # no lock: the handler may run while the main thread holds it; list() of a set is atomic under the GIL
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


def run_tool(argv: list[str], timeout: float, env: dict[str, str] | None = None,
             target_pid: int | None = None) -> ToolResult:
    """Run argv; on timeout SIGKILL its whole process group. Never raises for tool failures.

    target_pid names the process a ptrace tool attaches to (see spawn)."""
    exe = find_tool(argv[0])
    start = time.monotonic()
    if exe is None:
        return ToolResult(argv, None, "", f"{argv[0]}: not installed", 0.0, missing=True)
    try:
        proc = spawn([exe, *argv[1:]], target_pid=target_pid, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                     stderr=subprocess.PIPE, env=env, text=True, errors="replace")
    except InterruptedError:
        return ToolResult(argv, None, "", "collection interrupted", 0.0, interrupted=True)
    except OSError as err:
        return ToolResult(argv, None, "", f"{argv[0]}: {err}", time.monotonic() - start, missing=True)
    try:
        out, err = proc.communicate(timeout=timeout)
        timed_out = False
    except subprocess.TimeoutExpired:
        kill_group(proc)
        out, err = proc.communicate()
        timed_out = True
    finally:
        forget(proc)
    return ToolResult(argv, proc.returncode, out, err, time.monotonic() - start, timed_out=timed_out,
                      interrupted=INTERRUPTED.is_set() and proc.returncode != 0)


def kill_group(proc: subprocess.Popen) -> None:
    """SIGKILL the tool and anything it started; never a softer signal (see module doc)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass

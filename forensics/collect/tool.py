"""Runs an external tool (py-spy, gdb, ...) with a hard time limit, safely.

Field-measured hazards shape this: SIGINT to gdb was once forwarded into the target
and SIGTERM once left it stopped, while SIGKILL to the tool left the target running.
So every tool starts in its own session and is ended with SIGKILL to its group only.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass


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

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.timed_out and not self.missing


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


def run_tool(argv: list[str], timeout: float, env: dict[str, str] | None = None) -> ToolResult:
    """Run argv; on timeout SIGKILL its whole process group. Never raises for tool failures."""
    exe = find_tool(argv[0])
    start = time.monotonic()
    if exe is None:
        return ToolResult(argv, None, "", f"{argv[0]}: not installed", 0.0, missing=True)
    try:
        proc = subprocess.Popen(
            [exe, *argv[1:]],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
            env=env,
            text=True,
            errors="replace",
        )
    except OSError as err:
        return ToolResult(argv, None, "", f"{argv[0]}: {err}", time.monotonic() - start, missing=True)
    try:
        out, err = proc.communicate(timeout=timeout)
        timed_out = False
    except subprocess.TimeoutExpired:
        kill_group(proc)
        out, err = proc.communicate()
        timed_out = True
    return ToolResult(argv, proc.returncode, out, err, time.monotonic() - start, timed_out=timed_out)


def kill_group(proc: subprocess.Popen) -> None:
    """SIGKILL the tool and anything it started; never a softer signal (see module doc)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass

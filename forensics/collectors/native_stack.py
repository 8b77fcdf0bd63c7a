"""Native stacks of every thread (gloo/NCCL workers included) with a pause of tens of ms.

Why: py-spy shows only threads that run Python, and gdb or pystack hold the target
stopped for the whole symbol lookup (seconds with eight targets at once, measured in
benchmarks/collect_local.py). The helper `libdw_stacks.py` stops the target only to
walk raw frames, then names them after the target runs again. Its stop phase takes a
host-wide lock, so that eight helpers started at once stop their targets one after
another, each with a core to itself, instead of all eight sharing two cores for as
long as the slowest needs: this keeps each pause short.

The helper runs in its own session under run_tool's SIGKILL-only time limit; SIGKILL
of a ptrace holder detaches its target, and the state guard resumes a target that was
running and is found stopped. Stopped targets are not walked: ptrace would need to
resume them, and their stop is evidence (py-spy --nonblocking still reads them).
"""

from __future__ import annotations

import atexit
import ctypes.util
import json
import os
import sys
import tempfile
import threading
from pathlib import Path

from parsers.model.manifest import CollectorRecord, Status
from forensics.collect.guard import STOPPED, StateGuard
from forensics.collect.tool import run_tool
from forensics.collectors.base import CollectOptions, RankTarget
from forensics.discover import procfs

HELPER = Path(__file__).with_name("libdw_stacks.py")
_LOCK: dict[str, str] = {}
_LOCK_GUARD = threading.Lock()


def libdw_available() -> bool:
    """True when elfutils' libdw can be loaded (the `libdw1` package)."""
    return ctypes.util.find_library("dw") is not None


def native_tool(options: CollectOptions) -> str:
    """Which tool gives native frames: 'libdw' (default when present), 'py-spy', or 'none'."""
    if not options.native:
        return "none"
    wanted = str(options.extra.get("native_tool", "libdw"))
    if wanted == "libdw" and not libdw_available():
        return "py-spy"
    return wanted


def stop_lock() -> str:
    """A private lock file for this collection process (mkstemp: no symlink games in /tmp)."""
    with _LOCK_GUARD:
        if "path" not in _LOCK:
            fd, path = tempfile.mkstemp(prefix="forensics-stop-", suffix=".lock")
            os.close(fd)
            _LOCK["path"] = path
            atexit.register(_remove, path)
        return _LOCK["path"]


def _remove(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


class NativeStackCollector:
    name = "native-stack"
    uses_ptrace = True

    def enabled(self, options: CollectOptions) -> bool:
        return native_tool(options) == "libdw"

    def collect(self, target: RankTarget, options: CollectOptions) -> CollectorRecord:
        try:
            state = procfs.read_state(target.pid)
        except (procfs.ProcessGone, OSError):
            return CollectorRecord(self.name, Status.GONE, error=f"pid {target.pid} no longer exists")
        if state in STOPPED or state == "Z":
            return CollectorRecord(self.name, Status.SKIPPED, error=f"state {state}: not walked (see module doc)",
                                   details={"state_before": state})
        argv = [sys.executable, "-I", str(HELPER), "--lock", stop_lock(), str(target.pid)]
        with StateGuard(target.pid) as guard:
            result = run_tool(argv, timeout=options.timeout, env={"LC_ALL": "C", "PATH": os.defpath})
        details = {"state_before": guard.outcome.before, "state_after": guard.outcome.after, "argv": argv}
        if guard.outcome.action:
            details["guard"] = guard.outcome.action
        if result.timed_out:
            return CollectorRecord(self.name, Status.TIMEOUT, error=f"libdw helper did not answer in {result.seconds:.1f} s",
                                   details=details)
        data = _json(result.stdout)
        if data is None or not data.get("threads"):
            return self._failed(target, result, details)
        details["pause_ms"] = data.get("pause_ms")
        details["threads"] = len(data["threads"])
        path, rel = target.out("native.json")
        path.write_text(json.dumps(data) + "\n")
        status = Status.OK if result.returncode in (0, 1) else Status.FAILED
        return CollectorRecord(self.name, status, error=data.get("error"), files=[rel], details=details)

    def _failed(self, target: RankTarget, result, details: dict) -> CollectorRecord:
        text = (result.stderr or result.stdout).strip()
        error = " / ".join(text.splitlines()[:3]) or f"libdw helper exited with {result.returncode}"
        if "not permitted" in text.lower() or "permission" in text.lower():
            status = Status.DENIED
            error = f"ptrace not permitted: {error} (run as root or grant CAP_SYS_PTRACE)"
        elif not procfs.pid_exists(target.pid) or "No such process" in text:
            status = Status.GONE
        elif result.returncode == 3:
            status = Status.UNAVAILABLE
        else:
            status = Status.FAILED
        return CollectorRecord(self.name, status, error=error, details=details)


def _json(text: str) -> dict | None:
    try:
        data = json.loads(text)
    except ValueError:
        return None
    return data if isinstance(data, dict) else None

"""Native stacks of every thread (gloo/NCCL workers included) with a pause of tens of ms.

Why: py-spy shows only threads that run Python, and gdb or pystack hold the target
stopped for the whole symbol lookup (seconds with eight targets at once, measured in
benchmarks/collect_local.py). The helper `libdw_stacks.py` stops the target only to
walk raw frames, then names them after the target runs again. Its stop phase takes a
host-wide lock, so that eight helpers started at once stop their targets one after
another, each with a core to itself, instead of all eight sharing two cores for as
long as the slowest needs: this keeps each pause short.

One helper serves every rank of a collect (`--serve`, see NativeService): the ranks of
a host map the same files, so it names each address once (its SymbolCache) and loads
the interpreter and libdw once; it walks up to one target per core at a time (the stop
phases still one after another). collect_local ends it (close_service) when done.

The helper runs in its own session; a request that overruns its time limit SIGKILLs
the whole helper (the only kill used), and SIGKILL of a ptrace holder detaches its target, and the state guard resumes
a target that was running and is found stopped. Stopped targets are not walked: ptrace would need to
resume them, and their stop is evidence (py-spy --nonblocking still reads them).
"""

from __future__ import annotations

import atexit
import ctypes.util
import itertools
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from forensics import safefs
from parsers.model.manifest import CollectorRecord, Status
from parsers.gather.registry import collector_file
from forensics.collect.budget import fit_doc
from forensics.collect.guard import StateGuard
from forensics.collect import tool as tools
from forensics.collectors.base import CollectOptions, RankTarget, ptrace_denied
from forensics.discover import procfs
from parsers.model.states import letter_rule

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


MAX_REPLY = 64 * 1024 * 1024  # bytes of one answer line (4096 threads x 256 frames fit)


@dataclass
class Reply:
    """One answer of the helper: its JSON (None if it gave none) and why not."""

    data: dict | None
    seconds: float
    timed_out: bool = False
    error: str | None = None


class NativeService:
    """The serving helper of one collect: requests by pid, answers matched by id.

    Why a class and not run_tool: the helper outlives one rank's call. A reader thread
    hands each answer line to the request waiting on its id; a request that waits past
    its time limit SIGKILLs the helper (which detaches every target it held: the
    kernel's ptrace rule) and the state guards resume any target left stopped. The
    next request starts a fresh helper."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._proc: subprocess.Popen | None = None
        self._waiting: dict[int, tuple[threading.Event, list, subprocess.Popen]] = {}

    def request(self, pid: int, timeout: float) -> Reply:
        start = time.monotonic()
        event, slot = threading.Event(), []
        with self._lock:
            try:
                proc = self._started()
            except InterruptedError:
                return Reply(None, 0.0, error="collection interrupted")
            except OSError as err:
                return Reply(None, 0.0, error=f"cannot start the libdw helper: {err}")
            req_id = next(self._ids)
            self._waiting[req_id] = (event, slot, proc)
            try:
                proc.stdin.write(json.dumps({"id": req_id, "pid": int(pid)}) + "\n")
                proc.stdin.flush()
            except (OSError, ValueError):
                self._waiting.pop(req_id, None)
                return Reply(None, time.monotonic() - start, error="libdw helper is gone")
        if not event.wait(timeout):
            self._kill(proc)
            event.wait(5)
            return Reply(None, time.monotonic() - start, timed_out=True)
        data = slot[0] if slot else None
        return Reply(data, time.monotonic() - start, error=None if data else "libdw helper exited without an answer")

    def _started(self) -> subprocess.Popen:
        if self._proc is not None and self._proc.poll() is None:
            return self._proc
        argv = [sys.executable, "-I", str(HELPER), "--lock", stop_lock(), "--serve"]
        proc = tools.spawn(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                           env={"LC_ALL": "C", "PATH": os.defpath}, text=True, errors="replace")
        self._proc = proc
        threading.Thread(target=self._read, args=(proc,), name="libdw-helper-reader", daemon=True).start()
        return proc

    def _read(self, proc: subprocess.Popen) -> None:
        """Hand answers to their requests; at EOF (helper ended or killed) release every waiter of it."""
        try:
            for line in iter(lambda: proc.stdout.readline(MAX_REPLY), ""):
                data = _json(line)
                if data is None or not isinstance(data.get("id"), int):
                    continue
                with self._lock:
                    waiter = self._waiting.pop(data.pop("id"), None)
                if waiter:
                    waiter[1].append(data)
                    waiter[0].set()
        finally:
            proc.wait()
            tools.forget(proc)
            with self._lock:
                if self._proc is proc:
                    self._proc = None
                orphans = {k: w for k, w in self._waiting.items() if w[2] is proc}
                for k in orphans:
                    del self._waiting[k]
            for event, _, _ in orphans.values():
                event.set()

    def _kill(self, proc: subprocess.Popen) -> None:
        tools.kill_group(proc)

    def close(self) -> None:
        """End the helper: close its stdin (it finishes what it holds, then exits); SIGKILL after 10 s."""
        with self._lock:
            proc, self._proc = self._proc, None
        if proc is None:
            return
        try:
            proc.stdin.close()
        except OSError:
            pass
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            self._kill(proc)
            proc.wait()


_SERVICE = NativeService()


def close_service() -> None:
    """End this process's serving helper (collect_local calls it when a collection is done)."""
    _SERVICE.close()


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
        if letter_rule(state) in ("stopped", "gone"):
            return CollectorRecord(self.name, Status.SKIPPED, error=f"state {state}: not walked (see module doc)",
                                   details={"state_before": state})
        mode = "per-rank" if options.extra.get("native_helper") == "per-rank" else "serve"
        with StateGuard(target.pid) as guard:
            reply = _SERVICE.request(target.pid, options.timeout) if mode == "serve" else _one_shot(target.pid, options)
        details = {"state_before": guard.outcome.before, "state_after": guard.outcome.after, "helper": mode}
        if guard.outcome.action:
            details["guard"] = guard.outcome.action
        if reply.timed_out:
            return CollectorRecord(self.name, Status.TIMEOUT,
                                   error=f"libdw helper did not answer in {reply.seconds:.1f} s",
                                   details=details)
        data = reply.data
        if data is not None and data.get("pid") != target.pid:
            data, reply.error = None, f"libdw helper answered for pid {data.get('pid')!r}, not {target.pid}"
        if data is None or not data.get("threads"):
            return self._failed(target, data, reply, details)
        data.setdefault("error", None)
        details["pause_ms"] = data.get("pause_ms")
        details["threads"] = len(data["threads"])
        if data.get("symbols"):
            details["symbols"] = data["symbols"]
        name = collector_file(self.name, "native-stack")
        text, cut = fit_doc(target.budget, data, "threads", f"pid {target.pid} {name}")  # the first threads that fit
        if cut:
            details["cut"] = cut
        if not data["threads"]:
            target.budget.settle(len(text), 0)
            return CollectorRecord(self.name, Status.SKIPPED, error=cut, details=details)
        path, rel = target.out(name)
        safefs.write_new(path, text)
        return CollectorRecord(self.name, Status.OK, error=data.get("error"), files=[rel], details=details)

    def _failed(self, target: RankTarget, data: dict | None, reply: Reply, details: dict) -> CollectorRecord:
        text = str((data or {}).get("error") or reply.error or "libdw helper gave no stacks")
        error = " / ".join(text.splitlines()[:3])
        if procfs.exited(target.pid) or "No such process" in text:  # before 'denied': ptrace on a zombie is EPERM
            status = Status.GONE
        elif "not permitted" in text.lower() or "permission" in text.lower():
            status = Status.DENIED
            error = ptrace_denied(error)
        elif (data or {}).get("unavailable"):
            status = Status.UNAVAILABLE
        elif reply.error == "collection interrupted":
            status = Status.SKIPPED
        else:
            status = Status.FAILED
        return CollectorRecord(self.name, status, error=error, details=details)


def _one_shot(pid: int, options: CollectOptions) -> Reply:
    """The earlier way, kept as the benchmark's baseline: one helper process per rank, no shared cache."""
    argv = [sys.executable, "-I", str(HELPER), "--lock", stop_lock(), "--no-cache", str(pid)]
    result = tools.run_tool(argv, timeout=options.timeout, env={"LC_ALL": "C", "PATH": os.defpath})
    if result.timed_out:
        return Reply(None, result.seconds, timed_out=True)
    data = _json(result.stdout)
    if data is None and result.returncode == 3:
        data = {"pid": pid, "threads": [], "unavailable": True, "error": result.stderr.strip()}
    return Reply(data, result.seconds, error=None if data else (result.stderr.strip() or f"exit {result.returncode}"))


def _json(text: str) -> dict | None:
    try:
        data = json.loads(text)
    except ValueError:
        return None
    return data if isinstance(data, dict) else None

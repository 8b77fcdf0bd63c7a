"""Native backtraces of every thread through GDB's machine interface (pygdbmi).

GDB sees what py-spy cannot: the gloo/NCCL worker threads and the C++ frames of a
collective. It pauses the target for seconds, so it is opt-in. Every command carries
a token and we read until that token's result (pygdbmi's plain read matches by
timing). GDB runs in its own session and is only ever ended with SIGKILL, which
detaches the target cleanly; the state guard resumes a target left stopped.
"""

from __future__ import annotations

import json
import subprocess
from collections import deque
import time
from typing import Any

from forensics import safefs
from parsers.model.manifest import CollectorRecord, Status
from parsers.registry import collector_file
from forensics.collect.budget import TOOL_THREADS, fit_prefix, tool_read_cap
from forensics.collect.guard import StateGuard
from forensics.collect import tool as tools
from forensics.collect.tool import find_tool, kill_group
from forensics.collectors.base import CollectOptions, RankTarget
from forensics.discover import procfs
from parsers.errors import ToolError

GDB_ARGS = [
    "--interpreter=mi3",
    "-nx",
    "-q",
    "-iex", "set debuginfod enabled off",
    "-iex", "set pagination off",
    "-iex", "set confirm off",
    "-iex", "set print thread-events off",
]


GDB_BASE_S = 30.0  #: gdb start, attach and symbol loading (libtorch: 3-5 s alone, 11-13 s with 4 gdbs on 2 cores, more under load)
GDB_PER_THREAD_S = 0.1  #: one -stack-list-frames per thread (0.1-0.2 s each measured on a 300-thread sleeper)
MAX_FRAMES = 200  #: frames listed per thread (deep recursion must not eat the limit)


class GdbError(ToolError):
    """A GDB command answered ^error, or time ran out."""


class GdbSession:
    """One GDB process driven by tokened MI commands with an overall deadline."""

    def __init__(self, exe: str, deadline: float, target_pid: int) -> None:
        from pygdbmi.IoManager import IoManager

        self.deadline = deadline
        # under the supervisor: gdb dies with collect, and a target it left stopped is resumed
        self.proc = tools.spawn([exe, *GDB_ARGS], target_pid=target_pid, stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.io = IoManager(self.proc.stdin, self.proc.stdout, self.proc.stderr)
        self.token = 100
        self.console: deque[str] = deque(maxlen=50)  #: gdb's last console lines (why it failed)

    def command(self, mi: str) -> dict[str, Any]:
        """Send one MI command; return its result payload, raising GdbError on ^error/timeout."""
        self.token += 1
        token = self.token
        self.io.write(f"{token}{mi}", read_response=False)
        while True:
            if tools.INTERRUPTED.is_set():
                raise GdbError("interrupted")
            left = self.deadline - time.monotonic()
            if left <= 0:
                raise GdbError(f"time limit reached during {mi.split()[0]}")
            if self.proc.poll() is not None:
                raise GdbError(f"gdb exited during {mi.split()[0]}")
            for msg in self.io.get_gdb_response(timeout_sec=min(left, 0.2), raise_error_on_timeout=False):
                if msg.get("type") == "console" and msg.get("payload"):
                    self.console.append(str(msg["payload"]))
                if msg.get("type") == "result" and msg.get("token") == token:
                    if msg.get("message") == "error":
                        raise GdbError(str((msg.get("payload") or {}).get("msg", "error")))
                    return msg.get("payload") or {}

    def kill(self) -> None:
        """SIGKILL only (see module doc)."""
        kill_group(self.proc)
        self.proc.wait()
        tools.forget(self.proc)


class GdbCollector:
    name = "gdb"
    uses_ptrace = True

    def enabled(self, options: CollectOptions) -> bool:
        return options.gdb

    def collect(self, target: RankTarget, options: CollectOptions) -> CollectorRecord:
        exe = find_tool("gdb")
        if exe is None:
            return CollectorRecord(self.name, Status.UNAVAILABLE, error="gdb is not installed (apt-get install gdb)")
        if not procfs.pid_exists(target.pid):
            return CollectorRecord(self.name, Status.GONE, error=f"pid {target.pid} no longer exists")
        threads = _thread_count(target.pid)
        timeout = gdb_limit(float(options.extra.get("gdb_timeout", max(options.timeout, 60.0))), threads)
        room = tool_read_cap(target.budget)
        if room <= 0:  # nothing could be written: the target is not held for it
            error = f"pid {target.pid} gdb: not run ({target.budget.which()} reached)"
            target.budget.note(error)
            return CollectorRecord(self.name, Status.SKIPPED, error=error)
        with StateGuard(target.pid) as guard:
            data, status, error = self._backtraces(exe, target.pid, time.monotonic() + timeout, room)
        details = {"state_before": guard.outcome.before, "state_after": guard.outcome.after,
                   "limit_s": round(timeout, 2), "threads": threads}
        if guard.outcome.action:
            details["guard"] = guard.outcome.action
        files = []
        if data.get("threads"):
            _note_cuts(target, data, details)
            text = _fit(target, data, details)
            granted = target.budget.reserve(len(text))  # the rank's and the collection's byte caps
            if granted < len(text):
                target.budget.settle(granted, 0)
                return CollectorRecord(self.name, Status.SKIPPED, details=details,
                                       error=target.budget.cut(f"pid {target.pid} gdb.json", len(text), 0))
            path, rel = target.out(collector_file(self.name, "gdb-json"))
            safefs.write_new(path, text)
            files.append(rel)
        return CollectorRecord(self.name, status, error=error, files=files, details=details)

    def _backtraces(self, exe: str, pid: int, deadline: float, room: int) -> tuple[dict, str, str | None]:
        """Attach, list the threads and the stacks of the first TOOL_THREADS while their text stays within `room`
        bytes (the rank's budget left: no stack is asked for, and the target held, for bytes that cannot be
        kept); data["unlisted"] counts the threads the cap left unlisted."""
        data: dict[str, Any] = {"pid": pid, "threads": [], "stacks": {}}
        try:
            session = GdbSession(exe, deadline, pid)
        except InterruptedError:
            return data, Status.SKIPPED, "collection interrupted"
        except ImportError:
            return data, Status.UNAVAILABLE, "pygdbmi is not installed (pip install pygdbmi)"
        except OSError as err:
            return data, Status.UNAVAILABLE, f"gdb could not start: {err}"
        try:
            session.command(f"-target-attach {pid}")
            threads = session.command("-thread-info").get("threads", [])
            data["threads"] = threads
            used = len(json.dumps(threads[:TOOL_THREADS], indent=1))
            for n, thread in enumerate(threads[:TOOL_THREADS]):
                if used > room:
                    data["unlisted"] = min(len(threads), TOOL_THREADS) - n
                    break
                tid = thread.get("id")
                frames = session.command(f"-stack-list-frames --thread {tid} 0 {MAX_FRAMES - 1}").get("stack", [])
                data["stacks"][str(tid)] = frames
                used += len(json.dumps(frames, indent=1))
            session.command("-target-detach")
            status, error = Status.OK, None
        except GdbError as err:
            status, error = _classify(str(err), pid), f"gdb: {err}"
        except (OSError, ValueError) as err:
            status, error = Status.FAILED, f"gdb: {err}"
        finally:
            session.kill()
        if status != Status.OK and tools.INTERRUPTED.is_set():
            status, error = Status.SKIPPED, "gdb: interrupted (collection cut short)"
        data["console"] = list(session.console)
        if status == Status.TIMEOUT and data["threads"]:
            error = f"{error} (partial: {len(data['stacks'])} of {len(data['threads'])} threads)"
        return data, status, error


def _note_cuts(target: RankTarget, data: dict, details: dict) -> None:
    """Say what the thread cap (TOOL_THREADS) and the byte cap left out of gdb's answer, in the record and the
    manifest's note."""
    cuts = []
    if len(data["threads"]) > TOOL_THREADS:  # the stacks were asked for the first TOOL_THREADS only
        cuts.append(f"{len(data['threads']) - TOOL_THREADS} of {len(data['threads'])} threads left out")
        data["threads"] = data["threads"][:TOOL_THREADS]
    if data.get("unlisted"):
        cuts.append(f"the stacks of {data['unlisted']} more threads not listed ({target.budget.which()} reached)")
    if cuts:
        details["cut"] = "; ".join(cuts)
        target.budget.note(f"pid {target.pid} gdb.json: {details['cut']}")


def _fit(target: RankTarget, data: dict, details: dict) -> str:
    """gdb.json's text, its last stacks left out where the whole would pass the rank's bytes left (the listing
    stops near the cap; the indented text of the whole may still pass it by a little)."""
    text = json.dumps(data, indent=1) + "\n"
    room = target.budget.left
    if len(text) <= room or not data["stacks"]:
        return text
    stacks = list(data["stacks"].items())
    base = len(text) - sum(len(json.dumps(f, indent=1)) for _, f in stacks)
    keep = fit_prefix([len(json.dumps(f, indent=2)) + 16 for _, f in stacks], max(0, room - base))
    data["stacks"] = dict(stacks[:keep])
    line = f"pid {target.pid} gdb.json: the stacks of {len(stacks) - keep} of {len(stacks)} threads left out ({target.budget.which()} reached)"
    details["budget_cut"] = line
    target.budget.note(line)
    return json.dumps(data, indent=1) + "\n"


def gdb_limit(user_limit: float, threads: int | None) -> float:
    """How long gdb may hold a target: --gdb-timeout, or less for a target with few threads.

    gdb stops the target from attach to detach, and that time grows with the thread
    count (one stack listing per thread) on top of a fixed cost (reading libtorch's
    symbols took 3-5 s here, 11-13 s with 4 gdbs on 2 cores). So the limit is
    GDB_BASE_S + GDB_PER_THREAD_S x threads, never more than --gdb-timeout: a
    4-thread rank is not held for a minute because the user allowed one.
    """
    scaled = GDB_BASE_S + GDB_PER_THREAD_S * (threads if threads and threads > 0 else 64)
    return max(1.0, min(float(user_limit), scaled))


def _thread_count(pid: int) -> int | None:
    try:
        return int(procfs.status_fields(pid).get("Threads", ""))
    except (procfs.ProcessGone, OSError, ValueError):
        return None


def _classify(message: str, pid: int) -> str:
    if message == "interrupted":
        return Status.SKIPPED
    if "time limit" in message:
        return Status.TIMEOUT
    if procfs.exited(pid) or "No such process" in message:  # before 'denied': ptrace on a zombie is EPERM
        return Status.GONE
    if "not permitted" in message.lower():
        return Status.DENIED
    return Status.FAILED

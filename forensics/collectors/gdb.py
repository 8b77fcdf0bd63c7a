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
import time
from typing import Any

from parsers.model.manifest import CollectorRecord, Status
from parsers.gather.registry import collector_file
from forensics.collect.budget import TOOL_THREADS, fit_prefix, tool_room, write_whole
from forensics.collect.guard import StateGuard
from forensics.collect import tool as tools
from forensics.collect.tool import find_tool, kill_group
from forensics.collectors.base import CollectOptions, RankTarget
from forensics.collectors.gdb_mi import FRAME_ITEM, TAIL_CHARS, THREAD_ITEM, Cap, MiReader, Record
from forensics.discover import procfs
from parsers.input.errors import ToolError

GDB_ARGS = [
    "--interpreter=mi3",
    "-nx",
    "-q",
    "-iex", "set debuginfod enabled off",
    "-iex", "set pagination off",
    "-iex", "set confirm off",
    "-iex", "set print thread-events off",
]


#: gdb start, attach and symbol loading (libtorch: 3-5 s alone, 11-13 s with 4 gdbs on 2 cores, more under load)
GDB_BASE_S = 30.0
GDB_PER_THREAD_S = 0.1  #: one -stack-list-frames per thread (0.1-0.2 s each measured on a 300-thread sleeper)
MAX_FRAMES = 200  #: frames listed per thread (deep recursion must not eat the limit)
LINE_BYTES = 1 << 20  #: of an MI line that no cap of the rank's bytes sizes (attach, detach, gdb's notices)


class GdbError(ToolError):
    """A GDB command answered ^error, or time ran out."""


class GdbSession:
    """One GDB process driven by tokened MI commands with an overall deadline, its output read within caps
    (forensics.collectors.gdb_mi: no answer is held whole before a cap looks at it)."""

    def __init__(self, exe: str, deadline: float, target_pid: int) -> None:
        import pygdbmi.gdbmiparser  # noqa: F401 - ImportError here: pygdbmi missing, said before gdb starts

        self.deadline = deadline
        # under the supervisor: gdb dies with collect, and a target it left stopped is resumed
        self.proc = tools.spawn([exe, *GDB_ARGS], target_pid=target_pid, stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.reader = MiReader(self.proc.stdout, self.proc.stderr, Cap(FRAME_ITEM, MAX_FRAMES, LINE_BYTES))  # type: ignore[arg-type]
        self.token = 100

    @property
    def console(self) -> list[str]:
        """gdb's last console and stderr lines (why it failed), each cut short."""
        return list(self.reader.tail)

    def command(self, mi: str, cap: Cap | None = None) -> Record:
        """Send one MI command; return its result record (its line kept within `cap`), raising GdbError on
        ^error/timeout."""
        self.token += 1
        token = self.token
        self.reader.cap = cap or Cap(FRAME_ITEM, MAX_FRAMES, LINE_BYTES)
        try:
            self.proc.stdin.write(f"{token}{mi}\n".encode())  # type: ignore[union-attr]
            self.proc.stdin.flush()  # type: ignore[union-attr]
        except (OSError, ValueError) as err:
            raise GdbError(f"gdb exited before {mi.split()[0]}") from err
        while True:
            if tools.INTERRUPTED.is_set():
                raise GdbError("interrupted")
            left = self.deadline - time.monotonic()
            if left <= 0:
                raise GdbError(f"time limit reached during {mi.split()[0]}")
            if self.proc.poll() is not None:
                raise GdbError(f"gdb exited during {mi.split()[0]}")
            for answer in self.reader.read(min(left, 0.2)):
                msg = answer.record
                if msg.get("type") == "result" and msg.get("token") == token:
                    if msg.get("message") == "error":
                        why = f"error (its message of {answer.size} bytes not kept)" if answer.cut else "error"
                        raise GdbError(str((msg.get("payload") or {}).get("msg", why))[:TAIL_CHARS])
                    if not isinstance(msg.get("payload"), dict):
                        msg["payload"] = {}
                    return answer

    def kill(self) -> None:
        """SIGKILL only (see module doc)."""
        kill_group(self.proc)
        self.proc.wait()
        self.reader.close()
        for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            try:
                stream.close()  # type: ignore[union-attr]
            except OSError:
                pass
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
        room, not_run = tool_room(target.budget, f"pid {target.pid} gdb")
        if not_run:  # nothing could be written: the target is not held for it
            return CollectorRecord(self.name, Status.SKIPPED, error=not_run)
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
            path, rel = target.out(collector_file(self.name, "gdb-json"))
            cut = write_whole(target.budget, path, text, f"pid {target.pid} gdb.json")  # rank's and collection's caps
            if cut:
                return CollectorRecord(self.name, Status.SKIPPED, details=details, error=cut)
            files.append(rel)
        return CollectorRecord(self.name, status, error=error, files=files, details=details)

    def _backtraces(self, exe: str, pid: int, deadline: float, room: int) -> tuple[dict, str, str | None]:
        """Attach, list the threads and the stacks of the first TOOL_THREADS while their text stays within `room`
        bytes (the rank's budget left: no stack is asked for, and the target held, for bytes that cannot be
        kept): `_list`."""
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
            _list(session, data, room)
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


def _list(session: GdbSession, data: dict, room: int) -> None:
    """The threads (`-thread-info`, its answer kept to TOOL_THREADS threads and `room` bytes as it comes) and the
    stack of each kept thread while their text stays within `room`. data["seen"] counts the threads gdb listed,
    data["unlisted"] those kept whose stacks the bytes left no room for, data["frames_cut"] a stack cut short."""
    answer = session.command("-thread-info", Cap(THREAD_ITEM, TOOL_THREADS, room))
    threads = answer.record["payload"].get("threads", [])
    data["threads"] = threads = threads if isinstance(threads, list) else []
    data["seen"] = max(answer.items, len(threads))
    if answer.cut and answer.items > TOOL_THREADS and len(threads) == TOOL_THREADS:
        data["threads_cut"] = f"at most {TOOL_THREADS} threads"
    elif answer.cut:
        data["threads_cut"] = f"{len(threads)} threads in {room} bytes"
    used = len(json.dumps(threads, indent=1))
    for n, thread in enumerate(threads):
        if used > room:
            data["unlisted"] = len(threads) - n
            break
        tid = thread.get("id") if isinstance(thread, dict) else None
        if not isinstance(tid, str) or not tid.isdigit():
            continue
        stack = session.command(f"-stack-list-frames --thread {tid} 0 {MAX_FRAMES - 1}",
                                Cap(FRAME_ITEM, MAX_FRAMES, max(0, room - used)))
        frames = stack.record["payload"].get("stack", [])
        data["stacks"][tid] = frames = frames if isinstance(frames, list) else []
        if stack.cut:
            data.setdefault("frames_cut", {})[tid] = f"{len(frames)} of {stack.items} frames"
        used += len(json.dumps(frames, indent=1))


def _note_cuts(target: RankTarget, data: dict, details: dict) -> None:
    """Say what the thread cap (TOOL_THREADS) and the byte cap left out of gdb's answer, in the record and the
    manifest's note."""
    cuts = []
    if data.get("threads_cut"):  # the thread listing was read up to the cap, the rest only counted
        cuts.append(f"{data['seen'] - len(data['threads'])} of {data['seen']} threads left out "
                    f"(-thread-info kept to {data['threads_cut']})")
    if data.get("unlisted"):
        cuts.append(f"the stacks of {data['unlisted']} more threads not listed ({target.budget.which()} reached)")
    if data.get("frames_cut"):
        cuts.append(f"{len(data['frames_cut'])} stacks cut short ({target.budget.which()} reached)")
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
    line = (f"pid {target.pid} gdb.json: the stacks of {len(stacks) - keep} of {len(stacks)} threads left out "
            f"({target.budget.which()} reached)")
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

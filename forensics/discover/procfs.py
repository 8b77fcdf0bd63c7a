"""Reads what Linux says about a process under /proc, without touching the process.

The state letter matters as evidence in itself: 'T' (stopped) explains a hang and
also tells the stack tools not to try suspending it; 'D' points at the kernel; 'Z'
means the process has exited and awaits its parent.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from parsers.input.errors import ToolError
from parsers.model.states import letter_rule, stopped

PROC = Path("/proc")

STATE_NAMES = {
    "R": "running",
    "S": "sleeping",
    "D": "uninterruptible (disk/kernel wait)",
    "T": "stopped (by signal)",
    "t": "stopped (by a tracer)",
    "Z": "zombie (exited, not reaped)",
    "X": "dead",
    "I": "idle",
}


class ProcessGone(ToolError):
    """The process no longer exists (or never did)."""


@dataclass
class ThreadState:
    tid: int
    name: str
    state: str
    wchan: str | None = None


@dataclass
class ProcState:
    """A snapshot of one process as /proc describes it."""

    pid: int
    state: str
    comm: str
    ppid: int
    start_ticks: int
    uid: int | None = None
    tracer_pid: int | None = None
    cap_eff: str | None = None
    vm_rss_kb: int | None = None
    wchan: str | None = None
    threads: list[ThreadState] = field(default_factory=list)
    kernel_stack: str | None = None
    boot_time: float | None = None
    clock_ticks: int = 100
    exit_status: int | None = None  #: wait status of a zombie (how it ended), see exit_status()

    @property
    def stopped(self) -> bool:
        return stopped(self)

    @property
    def start_time(self) -> float | None:
        """Start time as a Unix timestamp, when the boot time is known."""
        if self.boot_time is None:
            return None
        return self.boot_time + self.start_ticks / self.clock_ticks

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["state_name"] = STATE_NAMES.get(self.state, self.state)
        data["start_time"] = self.start_time
        return data


def _read(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except (FileNotFoundError, ProcessLookupError) as err:
        raise ProcessGone(str(path)) from err


def _read_optional(path: Path) -> str | None:
    try:
        return path.read_text(errors="replace")
    except (OSError, ValueError):
        return None


def parse_stat(text: str) -> tuple[str, str, int, int]:
    """(comm, state, ppid, starttime ticks) from /proc/PID/stat; comm may hold spaces and ')'."""
    left, right = text.find("("), text.rfind(")")
    comm = text[left + 1 : right]
    rest = text[right + 2 :].split()
    return comm, rest[0], int(rest[1]), int(rest[19])


def exit_status(pid: int) -> int | None:
    """The wait status of an exited, unreaped process (/proc/PID/stat field 52, Linux 3.5+), else None."""
    text = _read_optional(PROC / str(pid) / "stat")
    if not text:
        return None
    rest = text[text.rfind(")") + 2 :].split()
    if not rest or letter_rule(rest[0]) != "gone" or len(rest) < 50 or not rest[49].isdigit():
        return None
    return int(rest[49])


def read_state(pid: int) -> str:
    """Only the state letter: the cheapest check, done before and after every ptrace tool."""
    return parse_stat(_read(PROC / str(pid) / "stat"))[1]


def state_or_none(pid: int) -> str | None:
    """The state letter, or None when the process is gone or unreadable."""
    try:
        return read_state(pid)
    except (ProcessGone, OSError, IndexError):
        return None


def tracer_pid(pid: int) -> int | None:
    """Pid of the process tracing `pid` (0: none), from /proc/PID/status."""
    value = status_fields(pid).get("TracerPid")
    return int(value) if value and value.isdigit() else None


def read_ppid(pid: int) -> int | None:
    """Parent pid, or None when the process is gone."""
    try:
        return parse_stat(_read(PROC / str(pid) / "stat"))[2]
    except (ProcessGone, OSError, IndexError):
        return None


def status_fields(pid: int) -> dict[str, str]:
    fields: dict[str, str] = {}
    for line in _read(PROC / str(pid) / "status").splitlines():
        key, _, value = line.partition(":")
        fields[key] = value.strip()
    return fields


def _boot_time() -> float | None:
    text = _read_optional(PROC / "stat") or ""
    for line in text.splitlines():
        if line.startswith("btime "):
            return float(line.split()[1])
    return None


def start_unix(pid: int) -> float | None:
    """When the process started (Unix seconds, to a clock tick), or None when it is gone or unreadable."""
    stat, boot = _read_optional(PROC / str(pid) / "stat"), _boot_time()
    if not stat or boot is None:
        return None
    try:
        return boot + parse_stat(stat)[3] / os.sysconf("SC_CLK_TCK")
    except (ValueError, IndexError):
        return None


def read_threads(pid: int) -> list[ThreadState]:
    """Every thread's name, state and wait channel; threads that vanish meanwhile are skipped."""
    threads = []
    task = PROC / str(pid) / "task"
    try:
        tids = sorted(int(t) for t in os.listdir(task))
    except FileNotFoundError as err:
        raise ProcessGone(str(task)) from err
    for tid in tids:
        stat = _read_optional(task / str(tid) / "stat")
        if not stat:
            continue
        comm, state, _, _ = parse_stat(stat)
        wchan = _read_optional(task / str(tid) / "wchan")
        threads.append(ThreadState(tid=tid, name=comm, state=state, wchan=(wchan or None) if wchan != "0" else None))
    return threads


def read_proc_state(pid: int) -> ProcState:
    """Full snapshot of a process. Raises ProcessGone if it does not exist."""
    comm, state, ppid, start = parse_stat(_read(PROC / str(pid) / "stat"))
    status = status_fields(pid)
    wchan = _read_optional(PROC / str(pid) / "wchan")
    rss = status.get("VmRSS", "").split()
    return ProcState(
        pid=pid,
        state=state,
        comm=comm,
        ppid=ppid,
        start_ticks=start,
        uid=int(status["Uid"].split()[1]) if "Uid" in status else None,
        tracer_pid=int(status["TracerPid"]) if "TracerPid" in status else None,
        cap_eff=status.get("CapEff"),
        vm_rss_kb=int(rss[0]) if rss else None,
        wchan=wchan if wchan and wchan != "0" else None,
        threads=read_threads(pid),
        kernel_stack=_read_optional(PROC / str(pid) / "stack"),
        boot_time=_boot_time(),
        clock_ticks=os.sysconf("SC_CLK_TCK"),
        exit_status=exit_status(pid) if letter_rule(state) == "gone" else None,
    )


def read_environ(pid: int) -> dict[str, str]:
    """The environment the process started with. Raises ProcessGone or PermissionError."""
    try:
        raw = (PROC / str(pid) / "environ").read_bytes()
    except (FileNotFoundError, ProcessLookupError) as err:
        raise ProcessGone(str(pid)) from err
    env = {}
    for item in raw.split(b"\0"):
        key, sep, value = item.partition(b"=")
        if sep:
            env[key.decode(errors="replace")] = value.decode(errors="replace")
    return env


def read_cmdline(pid: int) -> list[str]:
    raw = _read_optional(PROC / str(pid) / "cmdline") or ""
    return [a for a in raw.split("\0") if a]


def fd_target(pid: int, fd: int) -> str | None:
    """Where a file descriptor points ('/path/file', 'pipe:[123]', ...), or None."""
    try:
        return os.readlink(PROC / str(pid) / "fd" / str(fd))
    except OSError:
        return None


def pid_exists(pid: int) -> bool:
    return (PROC / str(pid)).is_dir()


def exited(pid: int) -> bool:
    """The process is gone, or a zombie (Z) or dead (X) waiting to be reaped: it has ended.

    Why a zombie counts: ptrace on one fails with EPERM ('Operation not permitted', gdb adds 'is a
    zombie'), the same words as a refused attach; a tool's failure on a process that ended during
    collection is 'gone', not 'denied' (seen: a target exiting while gdb attached)."""
    state = state_or_none(pid)
    return state is None or letter_rule(state) == "gone"


def all_pids() -> list[int]:
    return sorted(int(p) for p in os.listdir(PROC) if p.isdigit())


def children_of(pid: int, limit: int = 64) -> list[int]:
    """Direct children of `pid`: from /proc/PID/task/*/children where the kernel has it
    (CONFIG_PROC_CHILDREN), else by scanning every process's parent pid. At most `limit`."""
    kids: set[int] = set()
    task = PROC / str(pid) / "task"
    have_file = False
    try:
        for tid in os.listdir(task)[:4096]:
            text = _read_optional(task / tid / "children")
            if text is not None:
                have_file = True
                kids.update(int(c) for c in text.split() if c.isdigit())
    except OSError:
        return []
    if not have_file:
        for other in all_pids():
            if other != pid and read_ppid(other) == pid:
                kids.add(other)
    return sorted(kids)[:limit]

"""Copies the kernel log: where Xid, ECC, PCIe, OOM, hung-task and MCE messages land.

Tried in order, first that works wins: `dmesg -T` (ring buffer, wall-clock times, printed in UTC: TZ=UTC LC_ALL=C),
`journalctl -k` (persistent journal: survives ring-buffer wrap), a non-blocking
read of /dev/kmsg. Reading the kernel log needs CAP_SYSLOG where
kernel.dmesg_restrict=1 (the default on many distributions): when every source
refuses, the record says 'denied' and how to get access.

The record says which clock the stamps are in (`stamp_clock`), when the machine booted (`boot_epoch`, for
/dev/kmsg's microseconds since boot) and how long it was suspended since (`suspended_s`: printk's clock stops
then, so dmesg -T's times lag): a judge compares a line's time with the job's start (parsers.model.kernel_time).
"""

from __future__ import annotations

import errno
from collections import deque
import os
import time

from parsers.model.manifest import CollectorRecord, Status
from parsers.gather.registry import collector_file
from forensics.collect.tool import ToolResult, run_tool
from forensics.collectors.base import AlwaysEnabled, CollectOptions, HostTarget
from forensics.collectors.host_common import left_out, read_small, save_text, tail

DENIED_HINTS = ("Operation not permitted", "Permission denied", "not seeing messages from other users")
KMSG = "/dev/kmsg"
#: /dev/kmsg records are at most ~8 KiB; read in chunks of that.
KMSG_RECORD = 8192
#: what each source's stamps are: dmesg -T run in UTC, journalctl's short-iso with its offset, kmsg since boot
STAMP_CLOCK = {"dmesg -T": "UTC", "journalctl -k": "stamped offset", KMSG: "since boot"}


def _run_tail(argv: list[str], options: CollectOptions, env: dict[str, str] | None = None) -> ToolResult:
    """A kernel-log tool's last log_tail_bytes (and a record more, so the tail starts at a whole line): a log of
    GBs is read as it comes and only its newest lines held (the oldest 64 MiB were kept before)."""
    return run_tool(argv, timeout=min(options.timeout, 15), max_stdout=options.log_tail_bytes + KMSG_RECORD,
                    keep_tail=True, env=env)


def _clock(label: str) -> dict[str, object]:
    """Which clock `label`'s stamps are in, when the machine booted (wall time less the monotonic clock, which
    printk's stamps follow) and how long it slept since (boot-time clock less monotonic)."""
    now, mono = time.time(), time.monotonic()
    boottime = time.clock_gettime(time.CLOCK_BOOTTIME) if hasattr(time, "CLOCK_BOOTTIME") else mono
    return {"stamp_clock": STAMP_CLOCK.get(label, "unknown"), "boot_epoch": round(now - mono, 3),
            "suspended_s": round(max(0.0, boottime - mono), 3)}


def _whole_or_tail(res: ToolResult) -> bool:
    """The tool ended well, printing its whole log or more than its tail holds (then `cut`, still its newest)."""
    return res.returncode == 0 and not (res.timed_out or res.missing or res.interrupted)


class KernelLogCollector(AlwaysEnabled):
    """The host's kernel messages, copied raw into kernel.log."""

    name = "kernel_log"

    def collect(self, target: HostTarget, options: CollectOptions) -> CollectorRecord:
        attempts: list[str] = []
        denied = False
        for label, fetch in (("dmesg -T", self._dmesg), ("journalctl -k", self._journal), (KMSG, self._kmsg)):
            text, problem, was_denied = fetch(options)
            if text:
                return self._save(target, options, label, text, attempts)
            attempts.append(f"{label}: {problem}")
            denied = denied or was_denied
        status = Status.DENIED if denied else Status.UNAVAILABLE
        hint = " (kernel.dmesg_restrict=1 needs root or CAP_SYSLOG)" if denied else ""
        return CollectorRecord(self.name, status, error="kernel log not readable" + hint + ": " + "; ".join(attempts),
                               details={"attempts": attempts})

    def _save(self, target: HostTarget, options: CollectOptions, label: str, text: str,
              attempts: list[str]) -> CollectorRecord:
        kept, cut = tail(text, options.log_tail_bytes)
        name = collector_file(self.name, "kernel-log")
        rel = save_text(target, name, kept, keep="last")  # the newest lines, where a hang's messages are
        if rel is None:
            return left_out(target, self.name, name)
        uptime = read_small("/proc/uptime")
        details = {
            "source": label,
            **_clock(label),
            "truncated": cut,
            "lines": kept.count("\n"),
            "collected_at_epoch": round(time.time(), 3),
            "uptime_s": float(uptime.split()[0]) if uptime else None,
            "attempts": attempts,
        }
        return CollectorRecord(self.name, Status.OK, files=[rel], details=details)

    @staticmethod
    def _dmesg(options: CollectOptions) -> tuple[str, str, bool]:
        # dmesg -T prints in the local zone and the locale's format: UTC and C make its stamps one parseable clock
        res = _run_tail(["dmesg", "-T"], options, env={**os.environ, "TZ": "UTC", "LC_ALL": "C"})
        if _whole_or_tail(res) and res.stdout.strip():
            return res.stdout, "", False
        problem = ("not installed" if res.missing else "timed out" if res.timed_out
                   else res.stderr.strip() or f"exit {res.returncode}, no output")
        return "", problem, any(h in res.stderr for h in DENIED_HINTS)

    @staticmethod
    def _journal(options: CollectOptions) -> tuple[str, str, bool]:
        res = _run_tail(["journalctl", "-k", "-b", "-o", "short-iso", "--no-pager", "-q", "-n", "50000"], options)
        lines = [ln for ln in res.stdout.splitlines() if ln.strip() and not ln.startswith("-- ")]
        if _whole_or_tail(res) and lines:
            return res.stdout, "", False
        problem = ("not installed" if res.missing else "timed out" if res.timed_out
                   else res.stderr.strip() or "no entries")
        return "", problem, any(h in res.stderr for h in DENIED_HINTS)

    @staticmethod
    def _kmsg(options: CollectOptions) -> tuple[str, str, bool]:
        """Read every record now in /dev/kmsg without blocking (EAGAIN ends the buffer)."""
        try:
            fd = os.open(KMSG, os.O_RDONLY | os.O_NONBLOCK)
        except OSError as err:
            return "", err.strerror or str(err), err.errno in (errno.EPERM, errno.EACCES)
        records: deque[str] = deque()  # the newest records, at most log_tail_bytes of them: a flood of lines
        held = 0  # written while we read cannot grow this without bound
        deadline = time.monotonic() + min(options.timeout, 10)
        try:
            while time.monotonic() < deadline:
                try:
                    chunk = os.read(fd, KMSG_RECORD)
                except BlockingIOError:
                    break
                except OSError as err:
                    if err.errno == errno.EPIPE:  # a record was overwritten while we read: go on
                        continue
                    if err.errno in (errno.EPERM, errno.EACCES):
                        return "", err.strerror or str(err), True
                    break
                if not chunk:
                    break
                records.append(chunk.decode("utf-8", "replace").rstrip("\n"))
                held += len(records[-1]) + 1
                while held > options.log_tail_bytes and len(records) > 1:
                    held -= len(records.popleft()) + 1
        finally:
            os.close(fd)
        if not records:
            return "", "empty", False
        return "\n".join(records) + "\n", "", False

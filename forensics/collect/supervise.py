"""A tiny supervisor between `forensics collect` and a ptrace tool (py-spy, gdb).

    python -I -S supervise.py LIFELINE_FD TARGET_PID -- TOOL ARGV...

Why it exists: when collect itself is killed (SIGKILL, the OOM killer, a closed ssh
session), nothing in collect can run any more, yet a tracer attached to a training
process must not outlive it, and a target left in group-stop (the SIGSTOP of a
ptrace attach that the dying tracer never consumed) must be resumed. So:

- the tool runs as this process's child, in this process's process group (collect's
  SIGKILL to the group ends both at once) and with PR_SET_PDEATHSIG=SIGKILL (if this
  supervisor dies, the tool dies with it);
- this process holds the read end of a pipe whose only writer is collect: EOF means
  collect is gone. Then the tool gets SIGKILL (the kernel detaches a dead tracer's
  tracees), and if the target was running when the tool started but is stopped now,
  it gets SIGCONT. A target that was stopped before stays stopped: that is evidence,
  and someone may have stopped it on purpose. Nothing else is ever signalled.
- the tool's stdin/stdout/stderr are this process's: collect talks to the tool
  through them as if there were no supervisor.

Standard library only, run with -I -S: it starts in about 20 ms and does not depend
on the environment of the process that runs it.
"""

from __future__ import annotations

import ctypes
import os
import select
import signal
import sys
import time

PR_SET_PDEATHSIG = 1
STOPPED = ("T", "t")
POLL_S = 0.05  #: how often the tool's exit is checked while waiting on the lifeline
SETTLE_S = 0.5  #: how long a just-detached target may take to leave its traced stop


def proc_state(pid: int) -> str | None:
    """The state letter of /proc/PID/stat, or None when the process is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            text = fh.read(4096).decode("ascii", "replace")
    except OSError:
        return None
    tail = text[text.rfind(")") + 2:]
    return tail[:1] or None


def _die_with_parent() -> None:
    """preexec of the tool: SIGKILL it when this supervisor dies; bail out if that already happened."""
    parent = os.getppid()
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        pass
    if os.getppid() != parent:
        os._exit(137)


def restore(target: int, before: str | None) -> str | None:
    """Resume `target` only if it ran before and is stopped now; returns its final state.

    Why it watches for the whole of SETTLE_S: a dead tracer's tracee leaves its traced stop ('t') by itself, but
    the SIGSTOP of the attach that the tracer never consumed can still land a moment later, after the target was
    seen running (seen here: running, then 'T' 0.3 s on). A group stop ('T') that shows in the window is that
    SIGSTOP: it is resumed whenever it shows; a traced stop still there when the window ends is resumed too."""
    after = proc_state(target)
    if before is None or before in STOPPED or after is None:
        return after
    deadline = time.monotonic() + SETTLE_S
    while True:
        late = time.monotonic() >= deadline
        if after == "T" or (late and after in STOPPED):
            try:
                os.kill(target, signal.SIGCONT)
            except OSError:
                pass
        if late or after is None:
            return proc_state(target)
        time.sleep(0.02)
        after = proc_state(target)


def main(argv: list[str]) -> int:
    if len(argv) < 4 or argv[2] != "--":
        print("usage: supervise.py LIFELINE_FD TARGET_PID -- TOOL ARGV...", file=sys.stderr)
        return 2
    lifeline, target = int(argv[0]), int(argv[1])
    tool = argv[3:]
    before = proc_state(target)
    pid = os.fork()
    if pid == 0:  # the tool
        try:
            os.close(lifeline)
            _die_with_parent()
            os.execvp(tool[0], tool)
        except BaseException:  # noqa: BLE001 - report and never return into the supervisor's code
            print(f"{tool[0]}: cannot run", file=sys.stderr)
        os._exit(127)
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            code = os.waitstatus_to_exitcode(status)
            return code if code >= 0 else 128 - code
        try:
            ready, _, _ = select.select([lifeline], [], [], POLL_S)
        except InterruptedError:
            continue
        if ready and not os.read(lifeline, 1):  # EOF: collect is gone
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            os.waitpid(pid, 0)
            restore(target, before)
            return 137


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

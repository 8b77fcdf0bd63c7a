"""Keeps a target's run state as it was around a ptrace tool.

A ptrace tool that dies or misbehaves can leave its target stopped (seen with gdb
under SIGTERM), and a stopped target ends a training job as surely as a crash.
The guard reads the state letter before, and afterwards resumes a target that was
running but is now stopped; a target that was stopped before stays stopped (that
state is evidence, and the user may have stopped it on purpose).
"""

from __future__ import annotations

import os
import signal
import time
from dataclasses import dataclass

from forensics.discover import procfs
from parsers.model.states import letter_rule, signal_stopped



@dataclass
class GuardOutcome:
    before: str | None
    after: str | None
    action: str | None = None  #: 'resumed' or 're-stopped' when the guard had to act


class StateGuard:
    """Context manager: `with StateGuard(pid) as g: run_tool(...)`; then read g.outcome."""

    def __init__(self, pid: int, settle: float = 0.05) -> None:
        self.pid = pid
        self.settle = settle
        self.outcome = GuardOutcome(before=None, after=None)

    def __enter__(self) -> "StateGuard":
        self.outcome.before = _state(self.pid)
        return self

    def __exit__(self, *exc: object) -> None:
        self.outcome.after = self.restore()

    def restore(self) -> str | None:
        """Put the target back in its earlier run state; returns the final state letter."""
        before = self.outcome.before
        after = _state(self.pid)
        if before is None or after is None:
            return after
        if not _stopped(before) and _stopped(after):
            # A traced stop ('t') ends when the tracer is gone; give it a moment first.
            time.sleep(self.settle)
            after = _state(self.pid)
            if _stopped(after):
                _signal(self.pid, signal.SIGCONT)
                self.outcome.action = "resumed"
                after = _wait_state(self.pid, lambda s: not _stopped(s))
        elif signal_stopped(before) and after is not None and not _stopped(after):
            _signal(self.pid, signal.SIGSTOP)
            self.outcome.action = "re-stopped"
            after = _wait_state(self.pid, _stopped)
        return after


_state = procfs.state_or_none


def _stopped(state: str | None) -> bool:
    """Stopped by a signal or a tracer (`parsers.model.states`: the one rule over the letters)."""
    return letter_rule(state) == "stopped"


def _signal(pid: int, sig: int) -> None:
    """Send sig; a target we may trace but not signal (another uid) is reported by the
    state read afterwards, never by an exception that would lose the tool's output."""
    try:
        os.kill(pid, sig)
    except OSError:
        pass


def _wait_state(pid: int, ok, tries: int = 20) -> str | None:
    state = _state(pid)
    for _ in range(tries):
        if state is None or ok(state):
            break
        time.sleep(0.01)
        state = _state(pid)
    return state

"""A process state that decides by itself: stopped, gone or in the kernel, stated once over a view.

Why one place: the stacks judge names a rank stopped (T, t), exited (Z, X) or stuck in the kernel (D) from its
state letter; the scale path flags the same ranks 'frozen' on their hosts so that analysis reads their raw files
(`parsers.scale.digest.rank_flags`); the merge keeps frozen ranks from being demoted as mere waiters; a second
look tells a stopped process from one that did not move. Each of these read its own copy of the letters, so a
letter added in one (a new kernel's state) was not added in the others, and a rank the judge names at 8 ranks
was not read at 100,000. Every such decision now calls the functions here, over a `StateView`: anything with a
`state` letter (a rank's evidence, its /proc state, its summary in a host's digest, a look), so one rank and a
class of ranks that share a state decide the same way.
"""

from __future__ import annotations

from typing import Literal, Protocol

#: states in which a process is stopped: by a signal (T) or by a tracer (t)
STOPPED_STATES = ("T", "t")
#: states of a process that has exited: a zombie not yet reaped (Z), dead (X)
GONE_STATES = ("Z", "X")
#: the state of a process in uninterruptible sleep: in the kernel, not in its own code
KERNEL_STATES = ("D",)
#: states in which a process cannot run: each of the above
FROZEN_STATES = STOPPED_STATES + GONE_STATES + KERNEL_STATES

OwnState = Literal["stopped", "gone", "kernel"]


class StateView(Protocol):
    """What the state rules read: a process state letter, or None where none was seen. Satisfied by
    `parsers.gather.evidence.RankEvidence`, `parsers.model.events.ProcessState`,
    `parsers.model.summaries.RankSummary` and `parsers.model.looks.Look`."""

    @property
    def state(self) -> str | None: ...


def state_rule(v: StateView) -> OwnState | None:
    """What the state alone says: 'stopped', 'gone' or 'kernel' (each keeps the process out of every collective,
    whatever its peers do); None for a state that says nothing by itself (running, sleeping, unknown)."""
    return letter_rule(v.state)


def letter_rule(s: str | None) -> OwnState | None:
    """`state_rule` over the letter itself, for code that holds a letter read from /proc (the collectors, the
    guard that restores a process's state after a tool attached)."""
    if s in STOPPED_STATES:
        return "stopped"
    if s in GONE_STATES:
        return "gone"
    if s in KERNEL_STATES:
        return "kernel"
    return None


def stopped(v: StateView) -> bool:
    """Stopped by a signal or a tracer: it cannot move until someone continues it."""
    return state_rule(v) == "stopped"


def gone(v: StateView) -> bool:
    """Exited (reaped or not)."""
    return state_rule(v) == "gone"


def signal_stopped(s: str | None) -> bool:
    """Stopped by a signal (T), not by a tracer (t): a stop that outlives a tool's detach, so a guard that finds a
    process it stopped running again stops it again."""
    return s == STOPPED_STATES[0]


def frozen(v: StateView) -> bool:
    """Cannot run: stopped, gone or in the kernel."""
    return state_rule(v) is not None

"""Two looks at one rank a few seconds apart (`collect --second-look`), as the judges read them.

A rank `changed` when something that only moves with progress moved between (or within) the looks:
its Python main-thread stack, NCCL op lines added to its debug log, its recorder's operation
counters, its read/write system calls (gloo moves data through them; a hung gloo rank made none in
3 s, a training one ~1,500: measured here). CPU time is kept as a figure, never as progress: NCCL
waits spin at 100% CPU. Limit: a hung rank that keeps writing (a heartbeat log line) reads as moving.
A rank is `comparable` only when both looks saw something that could have changed (a stack in
each look, or counters in each): a rank py-spy could not read twice is not judged.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from parsers.model import states

#: a main-thread stack as (function, file, line) frames, innermost first
StackKey = tuple[tuple[str, str, int], ...]


@dataclass(frozen=True)
class Look:
    """What one look saw of one rank."""

    t: float  #: unix seconds
    state: str | None  #: /proc state letter; None: the process was gone
    wchan: str | None = None
    cpu_s: float | None = None  #: user + system CPU seconds of the whole process
    io_calls: int | None = None  #: read + write system calls of the process so far (/proc/P/io syscr + syscw)
    stacks: tuple[StackKey, ...] = ()  #: main-thread stacks of this look's dumps (one per dump that answered)
    stack_errors: tuple[str, ...] = ()
    log_size: int | None = None  #: NCCL debug file size
    new_op_lines: int = 0  #: NCCL op lines added since the look before (look 2 only)
    recorder: tuple[tuple[str, tuple[int, ...]], ...] = ()  #: (comm, counters that only grow with progress)


@dataclass(frozen=True)
class SecondLook:
    """Both looks at one rank and what changed between them."""

    pid: int | None
    rank: int | None
    requested_s: float
    first: Look
    second: Look | None  #: None: the collection was cut short before the second look
    problems: tuple[str, ...] = field(default=())

    @property
    def waited_s(self) -> float | None:
        return None if self.second is None else round(self.second.t - self.first.t, 3)

    @property
    def gone(self) -> bool:
        """The process was there at look 1 and not at look 2 (it exited, or was killed, meanwhile)."""
        second = self.second
        return second is not None and self.first.state is not None and (second.state is None or states.gone(second))

    @property
    def changes(self) -> list[str]:
        """What moved, in words; empty: nothing that moves with progress moved."""
        a, b = self.first, self.second
        if b is None:
            return []
        out = []
        if len(set(a.stacks) | set(b.stacks)) > 1:
            out.append("its main-thread stack changed")
        if a.io_calls is not None and b.io_calls is not None and b.io_calls > a.io_calls:
            out.append(f"its read/write system calls grew by {b.io_calls - a.io_calls}")
        if b.new_op_lines:
            out.append(f"{b.new_op_lines} NCCL op line(s) were added to its log")
        before = dict(a.recorder)
        for comm, counts in b.recorder:
            if comm in before and counts != before[comm] and any(y > x for x, y in zip(before[comm], counts)):
                out.append(f"its recorder counters of communicator {comm} advanced")
        return out

    @property
    def comparable(self) -> bool:
        """Both looks saw something that moves with progress (a stack each, or recorder counters each)."""
        a, b = self.first, self.second
        if b is None or b.state is None or self.gone:  # an exit between the looks is no progress and no wait
            return False
        stopped = states.stopped(a) and states.stopped(b)  # a stopped process cannot move
        io = a.io_calls is not None and b.io_calls is not None
        return stopped or io or bool(a.stacks and b.stacks) or bool(a.recorder and b.recorder) or bool(b.new_op_lines)

    @property
    def cpu_delta_s(self) -> float | None:
        if self.second is None or self.first.cpu_s is None or self.second.cpu_s is None:
            return None
        return round(self.second.cpu_s - self.first.cpu_s, 3)

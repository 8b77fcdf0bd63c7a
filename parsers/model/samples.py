"""Stack samples of one process over a few seconds: what its main thread does, as shares.

Why samples and not one dump: a rank that runs (slow, not hung) is somewhere different
at every instant; one dump catches it in one place by chance. N dumps spread over a few
seconds give the share of time it spends in each place, which is what a straggler
verdict must say ("70% in slow_data_step, 30% in all_reduce").
"""

from __future__ import annotations

from dataclasses import dataclass, field

#: states of the main thread in one sample (parsers.stacks.classify plus py-spy's `active` flag)
IN_COLLECTIVE = "collective"  #: inside a torch.distributed collective (waiting for the others)
GPU_WAIT = "gpu-sync"  #: waiting on the GPU (torch.cuda.synchronize: NCCL waits show here)
IDLE = "idle"  #: outside any collective and off the CPU: sleep, I/O, a lock, a queue
ON_CPU = "on-cpu"  #: outside any collective and running Python
NO_STACK = "no-stack"  #: the dump had no main thread frames
STATES = (IN_COLLECTIVE, GPU_WAIT, IDLE, ON_CPU, NO_STACK)


@dataclass(frozen=True)
class Share:
    """One place (or state) and how many of the samples were there."""

    label: str
    count: int
    share: float
    idle: int = 0  #: of `count`, samples off the CPU (py-spy's active flag false): sleep, I/O, a lock


@dataclass
class StackSamples:
    """What N stack samples of one process say about its main thread."""

    pid: int | None
    requested: int  #: samples asked for
    taken: int  #: samples with a readable main thread
    failed: int  #: dumps that failed (process busy exiting, permission, time limit)
    span_s: float  #: seconds from the first sample to the last
    interval_s: float  #: the mean interval asked for
    tool: str = "py-spy"
    where: list[Share] = field(default_factory=list)  #: innermost user frame 'fn (file:line)', most frequent first
    states: list[Share] = field(default_factory=list)  #: STATES, most frequent first
    ops: list[Share] = field(default_factory=list)  #: collective (or GPU wait) names among the waiting samples
    errors: list[str] = field(default_factory=list)  #: the first few dump errors, as the tool said them

    def state_share(self, state: str) -> float:
        return next((s.share for s in self.states if s.label == state), 0.0)

    def to_dict(self) -> dict:
        def rows(items: list[Share]) -> list[dict]:
            return [{"label": s.label, "count": s.count, "share": round(s.share, 3), "idle": s.idle} for s in items]

        return {"pid": self.pid, "tool": self.tool, "requested": self.requested, "taken": self.taken,
                "failed": self.failed,
                "span_s": round(self.span_s, 3), "interval_s": self.interval_s, "where": rows(self.where),
                "states": rows(self.states), "ops": rows(self.ops), "errors": self.errors[:5]}

"""The usual cure for garbage-collector step spikes: no automatic collection, a collection every N steps.

Python's cyclic GC runs whenever allocations cross a threshold, at a different moment on
each rank; the one rank collecting holds every other rank at the next collective, and
step time creeps up between collections. Disabling automatic collection and calling
gc.collect() at the same step number on every rank turns that into one short,
synchronised pause.
"""

from __future__ import annotations

import gc
from parsers.input.errors import UsageError


class GcSchedule:
    """gc.disable() now; `on_step(step)` collects every `every` steps; `restore()` undoes it."""

    def __init__(self, every: int) -> None:
        if every < 1:
            raise UsageError("gc=N needs N >= 1 (steps between collections)")
        self.every = every
        self.was_enabled = gc.isenabled()
        self.collections = 0
        gc.disable()

    def on_step(self, step: int) -> None:
        if step > 0 and step % self.every == 0:
            gc.collect()
            self.collections += 1

    def restore(self) -> None:
        if self.was_enabled:
            gc.enable()

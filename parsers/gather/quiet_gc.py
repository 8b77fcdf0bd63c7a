"""Pause the cyclic garbage collector while building millions of small acyclic objects.

Measured: correlating 16k ranks took 5-6 s with the GC on and 1.3-2 s with it
paused, on a 2-core machine. Nothing built while it is paused forms cycles that need it.

`freeze`: when a pause leaves more than FREEZE_OVER new objects, they are moved to the collector's
permanent generation as it ends (gc.freeze). Why: the first collection after a pause scans every
object the pause let survive; after the analysis of 32,768 ranks that was 2.1 s of a 24 s analysis
(measured), spent on objects that stay alive until the verdict is dropped. Frozen objects are still
freed by reference counting when dropped; a cycle among them is not (a dropped verdict's networkx wait
graph is one: about 11 objects a rank). So the next freezing pause first gives the frozen objects back
and collects (`gc.collect`, once), and what a process leaves frozen is one large analysis at most. Small
pauses (a fixture, the test suite's thousands of analyses) never freeze: their scan is short.
"""

from __future__ import annotations

import gc
from contextlib import contextmanager
from typing import Iterator

#: new objects left by a pause past which `freeze` freezes them (a 4,096-rank analysis leaves ~770,000;
#: a fixture bundle's ~9,000; scanning 500,000 takes ~0.15 s here)
FREEZE_OVER = 500_000
_frozen = [False]  #: whether a pause of this module froze objects not given back yet


@contextmanager
def pause_gc(freeze: bool = False) -> Iterator[None]:
    was = gc.isenabled()
    if freeze and was and _frozen[0]:  # the last large pause's survivors back to the collector, cycles freed
        _frozen[0] = False
        gc.unfreeze()
        gc.collect()
    gc.disable()
    try:
        yield
    finally:
        if was:
            if freeze and gc.get_count()[0] > FREEZE_OVER:
                gc.freeze()
                _frozen[0] = True
            gc.enable()

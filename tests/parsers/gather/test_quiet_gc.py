"""parsers.gather.quiet_gc: the GC paused while a verdict's evidence is built; after a large pause (freeze) what
survived is kept out of the next collection's scan (2.1 s after 32k ranks, measured: benchmarks/README.md),
and the next freezing pause gives it back, so frozen cycles are bounded by one analysis."""

from __future__ import annotations

import gc
import weakref

from parsers.gather import quiet_gc
from parsers.gather.quiet_gc import pause_gc


class _Node:
    """An object in a reference cycle: only the cyclic collector frees it."""

    def __init__(self) -> None:
        self.me = self


def test_pause_turns_the_collector_back_on_and_freezes_nothing_unasked():
    assert gc.isenabled()
    before = gc.get_freeze_count()
    with pause_gc():
        assert not gc.isenabled()
        kept = [[i] for i in range(quiet_gc.FREEZE_OVER + 1000)]
    assert gc.isenabled() and gc.get_freeze_count() == before
    assert len(kept) > quiet_gc.FREEZE_OVER


def test_a_small_pause_freezes_nothing():
    before = gc.get_freeze_count()
    with pause_gc(freeze=True):
        kept = [[i] for i in range(1000)]
    assert gc.isenabled() and gc.get_freeze_count() <= before
    assert len(kept) == 1000


def test_a_large_pause_freezes_its_survivors_and_the_next_gives_them_back():
    with pause_gc(freeze=True):
        kept = [[i] for i in range(quiet_gc.FREEZE_OVER + 1000)]
        cycle = _Node()
        ref = weakref.ref(cycle)
    assert gc.isenabled()
    assert gc.get_freeze_count() >= len(kept)  # the survivors are in the permanent generation
    tracked = {id(o) for o in gc.get_objects()}
    assert not any(id(x) in tracked for x in kept[:1000])  # no collection scans them
    del cycle
    gc.collect()
    assert ref() is not None  # a dropped cycle that was frozen waits...
    with pause_gc(freeze=True):
        assert ref() is None  # ...until the next freezing pause gives the frozen back and collects
    gc.unfreeze()


def test_a_collector_already_off_stays_off():
    gc.disable()
    try:
        before = gc.get_freeze_count()
        with pause_gc(freeze=True):
            kept = [[i] for i in range(quiet_gc.FREEZE_OVER + 1000)]
        assert not gc.isenabled() and gc.get_freeze_count() == before and kept
    finally:
        gc.enable()

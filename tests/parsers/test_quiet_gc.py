"""parsers.quiet_gc: the GC paused while a verdict's evidence is built, and (freeze) what survived the pause
kept out of the next collection's scan (2.1 s after 32k ranks, measured: benchmarks/README.md)."""

from __future__ import annotations

import gc

from parsers.quiet_gc import pause_gc


def test_pause_turns_the_collector_back_on_and_freezes_nothing_unasked():
    assert gc.isenabled()
    before = gc.get_freeze_count()
    with pause_gc():
        assert not gc.isenabled()
        kept = [[i] for i in range(1000)]
    assert gc.isenabled() and gc.get_freeze_count() == before
    assert len(kept) == 1000


def test_freeze_moves_what_survived_out_of_the_collections():
    before = gc.get_freeze_count()
    with pause_gc(freeze=True):
        kept = [[i] for i in range(1000)]
    assert gc.isenabled()
    assert gc.get_freeze_count() >= before + 1000  # the survivors are in the permanent generation now
    tracked = {id(o) for o in gc.get_objects()}
    assert not any(id(x) in tracked for x in kept)  # no collection scans them


def test_a_collector_already_off_stays_off():
    gc.disable()
    try:
        before = gc.get_freeze_count()
        with pause_gc(freeze=True):
            pass
        assert not gc.isenabled() and gc.get_freeze_count() == before
    finally:
        gc.enable()

"""Where the recorder's waits end: the ranks others wait on that wait on none, stated once over rank sets.

Why one place: the recorder judge names a rank that entered the stuck operation, waits on no peer and is
waited on (`parsers.judges.recorder`, 'stalled'); the scale path reads the raw files of the ranks where the
waits of a communicator end (`parsers.scale.focus`) and judges, over classes, the ranks with recorder state
that wait on none (`parsers.scale.classes`). Each said 'waited on and waiting on none' in its own code, so a
change to one (a kind of wait that no longer counts) left the others naming other ranks. The rule reads two
rank sets, which one communicator's ranks (the judge: a rank is a set of one) and a merged digest's classes
(the scale path: rank sets of any size) both give, so it decides alike at 8 ranks and at 100,000.
"""

from __future__ import annotations

from parsers.model.ranksets import Intervals, difference


def wait_ends(waited: Intervals, waiting: Intervals) -> Intervals:
    """The ranks of `waited` (some rank waits on each) that are not in `waiting` (each waits on some rank): where
    a chain of waits ends, the rank the others wait for. A cycle has none (every member waits)."""
    return difference(waited, waiting)


def silent_members(waited: Intervals, waiting: Intervals, stated: Intervals) -> Intervals:
    """The ends of the waits (`wait_ends`) that left no recorder state (`stated`: the ranks that did): a peer others
    wait on that says nothing of itself. The recorder judge names each ('no recorder state while its peers wait on
    it'); over classes, which job rank such a comm rank is only its own state would say, so the scale path reads
    every rank without state while one is silent (`parsers.scale.classes`)."""
    return difference(wait_ends(waited, waiting), stated)

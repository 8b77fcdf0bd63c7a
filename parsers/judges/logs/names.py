"""Plain words for where a position is counted: a group by its ranks, a position by its counter.

Why: 'pg:0' and 'position 11' are keys of our tables, not words an on-call engineer knows (issue 27 item
3). A process group is said by its ranks ('the default group (all 8 ranks)', 'group ranks 0-3'), a c10d
position as 'collective #11 of <group>', an NCCL opCount as NCCL prints it (hex) with its decimal value
and its communicator, ProcessGroupWrapper's counter as its SequenceNumber.
"""

from __future__ import annotations

from parsers.judges.logs.identity import Identities
from parsers.judges.logs.tables import WRAPPER, members_of
from parsers.model.ranges import fold, unfold

#: a group of more ranks than this is said by its count, not by its folded list
MAX_LISTED = 64


def group(comm: str, ids: Identities | None = None) -> str:
    """'pg:0' -> 'the default group (all 8 ranks)'; 'pg:ranks=0,1' -> 'group ranks 0-1'; 'pg:3' -> 'group 3
    (ranks 4-7)'; '0x5bf3...' -> 'communicator 0x5bf3... (ranks 0-7)' (global ranks, where known)."""
    base = comm.removeprefix(WRAPPER)
    if base == "pg:0":
        if ids is not None and ids.world_size:
            return f"the default group (all {ids.world_size} ranks)"
        seen = len(members_of(base, ids)) if ids is not None else 0
        return f"the default group ({seen} ranks seen; the job's size is not stated)" if seen else "the default group"
    if base.startswith("pg:ranks="):
        listed = unfold(base.removeprefix("pg:ranks=")) or []
        return f"group ranks {fold(listed)}" if listed else f"group {base.removeprefix('pg:')}"
    members = members_of(base, ids) if ids is not None else set()
    ranks = ((f" (ranks {fold(members)})" if len(members) <= MAX_LISTED else f" ({len(members)} ranks)") if members
             else "")
    size = ids.comm_size.get(base, 0) if ids is not None and ids.partial else 0
    if size > len(members):  # most members judged elsewhere: its stated size, not the few read here
        ranks = f" ({size} ranks)"
    if base.startswith("pg:"):
        return f"group {base.removeprefix('pg:')}{ranks}"
    if base.startswith("0x"):
        return f"communicator {base}{ranks}"
    return f"{base}{ranks}"


def position(comm: str, seq: int, ids: Identities | None = None, where: str | None = None) -> str:
    """'collective #11 of the default group (all 8 ranks)', 'NCCL opCount 28c (652 in decimal) of communicator
    0x..', 'SequenceNumber 485 of ...': how the counter that gave `seq` names it (`where`: group(), if known)."""
    where = where or group(comm, ids)
    if comm.startswith(WRAPPER):
        return f"SequenceNumber {seq} of {where}"
    if comm.startswith("0x"):
        return f"NCCL opCount {seq:x} ({seq} in decimal) of {where}"
    return f"collective #{seq} of {where}"


def reached(comm: str, seq: int) -> str:
    """A rank's last position in the counter of `comm`, said short after position() named the group."""
    if seq < 0:
        return "no operation of it (it joined, and logged none)"
    if comm.startswith(WRAPPER):
        return f"SequenceNumber {seq}"
    return f"opCount {seq:x}" if comm.startswith("0x") else f"#{seq}"


#: artifact kinds as a user knows them ('left no fr-dump' read as jargon)
_KIND_WORDS = {"fr-dump": "Flight Recorder dump", "nccl-log": "NCCL log", "rank-log": "output of its own",
               "pyspy-text": "py-spy dump", "pyspy-json": "py-spy dump"}


def kind(artifact_kind: str) -> str:
    """An artifact kind in words: 'Flight Recorder dump' for fr-dump; others as they are."""
    return _KIND_WORDS.get(artifact_kind, artifact_kind)

"""Merging suspect lists from independent sources (stacks, recorder, logs, hosts) into one ranking."""

from __future__ import annotations

from typing import Iterable

from parsers.model import Suspect


#: Reasons that are facts about the process or host itself; they head a merged suspect
#: because they say *why*, where the others only say that the rank is late.
FACTS = ("host-fault", "stopped", "missing", "exited", "kernel-wait", "known-error")


def _headline(a: Suspect, b: Suspect) -> tuple[Suspect, Suspect]:
    """(kept, other): a fact beats an inference; otherwise the higher confidence wins."""
    a_fact, b_fact = a.reason_class in FACTS, b.reason_class in FACTS
    if a_fact != b_fact:
        return (a, b) if a_fact else (b, a)
    return (a, b) if a.confidence > b.confidence else (b, a)


def merge_suspects(existing: Iterable[Suspect], extra: Iterable[Suspect]) -> list[Suspect]:
    """One suspect list, most likely first; a rank keeps one entry with the evidence of both
    and the higher confidence of the two."""
    best: dict[tuple, Suspect] = {}
    for s in list(existing) + list(extra):
        key = (s.host, s.rank, s.pid) if s.rank is None else (s.rank,)
        if key not in best:
            best[key] = s
            continue
        keep, other = _headline(s, best[key])
        keep.confidence = max(keep.confidence, other.confidence)
        keep.evidence = keep.evidence + [f"also: {other.reason_class}: {other.reason}"]
        if keep.host is None:
            keep.host = other.host
        if keep.pid is None:
            keep.pid = other.pid
        best[key] = keep
    return sorted(best.values(), key=Suspect.sort_key)

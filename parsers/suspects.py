"""Merging suspect lists from independent sources (stacks, recorder, logs, hosts) into one ranking."""

from __future__ import annotations

from typing import Iterable

from parsers.model import Suspect


def merge_suspects(existing: Iterable[Suspect], extra: Iterable[Suspect]) -> list[Suspect]:
    """One suspect list, most likely first; a rank keeps its strongest entry, evidence of both."""
    best: dict[tuple, Suspect] = {}
    for s in list(existing) + list(extra):
        key = (s.host, s.rank, s.pid) if s.rank is None else (s.rank,)
        if key not in best:
            best[key] = s
            continue
        keep, other = (s, best[key]) if s.confidence > best[key].confidence else (best[key], s)
        keep.evidence = keep.evidence + [f"also: {other.reason_class}: {other.reason}"]
        if keep.host is None:
            keep.host = other.host
        if keep.pid is None:
            keep.pid = other.pid
        best[key] = keep
    return sorted(best.values(), key=lambda s: (-s.confidence, s.rank if s.rank is not None else 1 << 30))

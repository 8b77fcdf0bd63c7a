"""Assert facts, not sentences: what a verdict says is checked by its typed parts (kind, ranks, host)
and by the few facts a line must carry (a rank list, a host, a number), so rewording a sentence
breaks only the tests about wording (issue 29)."""

from __future__ import annotations

from typing import Any, Iterable

from forensics.report.words.facts import observed as _worded  # typed observations are worded by presentation


def says(lines: Iterable[Any], *facts: str) -> bool:
    """True when one line holds every fact (short pieces: 'ranks 0-1,5', 'pid 238', 'h100-28')."""
    return any(all(f in str(line) for f in facts) for line in lines)


def observed(verdict: Any, kind: str) -> list[str]:
    """The words of a verdict's observations of one kind ('coverage', 'first-error', 'ras', ...)."""
    return [_worded(o) for o in verdict.observations if o.kind == kind]

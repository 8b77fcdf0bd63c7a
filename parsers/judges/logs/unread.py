"""Lines no reader understood: how many, and the first few, for the verdict to say.

Why: a summary of what the lines show is only honest about the lines that were read. An excerpt
whose lines are all in a format no reader knows (Horovod's stall reports before they were read,
NCCL records with a host the regular format lacks) must not come out as 'these lines report no
error', which reads as a healthy job: it must say that lines went unread, and which.
"""

from __future__ import annotations

from typing import Any

from parsers.gather.evidence import Evidence
from parsers.model.findings import UnreadFact

#: lines kept in the verdict's section (presentation quotes the first few: forensics/report/words/facts.py)
KEPT = 5


def section(ev: Evidence) -> dict[str, Any]:
    """{'count': lines not understood, 'recognisable': of them, lines that look like a known format,
    'first': [{'file', 'line', 'text'}, ...]} over every text artifact."""
    count = recognisable = 0
    first: list[tuple[str, int, str]] = []
    for art in ev.artifacts:
        p = art.parsed
        if p is None or not p.unknown_lines:
            continue
        count += p.unknown_lines
        recognisable += len(p.unread)
        lines = sorted(dict.fromkeys([tuple(x) for x in p.facts.get("unknown_sample") or []]
                                     + [(n, t) for n, t in p.unread[:KEPT]]), key=lambda x: x[0])
        first += [(art.cite, n, t) for n, t in lines]
    first.sort(key=lambda f: (f[0], f[1]))
    return {"count": count, "recognisable": recognisable,
            "first": [{"file": c, "line": n, "text": t} for c, n, t in first[:KEPT]]}


def fact(sec: dict[str, Any]) -> UnreadFact | None:
    """How many lines were not understood and the first few, or None when every line was read."""
    if not sec.get("count"):
        return None
    return UnreadFact(sec["count"], tuple((f["line"], f["text"]) for f in sec["first"]))

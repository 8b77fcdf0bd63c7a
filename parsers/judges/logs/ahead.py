"""The odd one out of a comparison of positions: the minority is what needs explaining (issue 26 item 2.5).

Why: where one rank's position in a group is past the others' and all of them stopped at one position
before it, comparing positions makes that rank wait on each of them, and each of them a root of the
wait-for graph ('never logged the operation the others wait in'): seven suspects for one odd rank. The
seven agree with each other; the one that went ahead is what differs: it called a collective they did not
reach, or they skipped one it calls. It is the suspect (a claim from positions alone, typed with them),
and the majority's roots from that comparison are not. The rule holds only where the comparison is
whole and the majority is a sink: every member has a position, the majority's only waiters are the
ranks ahead, and none of the majority waits on anyone (a wait elsewhere is explained there).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import AbstractSet

import networkx as nx

from parsers.judges.logs import names
from parsers.judges.logs.identity import Identities
from parsers.judges.logs.tables import Tables, members_of
from parsers.model.findings import ReasonClass, cite, of_rank
from parsers.model.majority import ahead_confidence, bars, minority_ahead
from parsers.model.ranges import fold
from parsers.model.ranksets import of_ranks

#: a comparison of more ranks than this is not checked edge by edge (the graph keeps 16 peers per waiter)
MAX_CHECKED = 16


@dataclass(frozen=True)
class Ahead:
    """In `comm`, `ranks` reached position `at` (calling `op`) while `behind`, all at `level`, did not."""

    comm: str
    ranks: tuple[int, ...]
    at: int
    behind: tuple[int, ...]
    level: int
    op: str | None
    source: str | None


def went_ahead(t: Tables, g: nx.DiGraph, ids: Identities,
               waiting_elsewhere: AbstractSet[int] = frozenset()) -> list[Ahead]:
    """Every comparison whose minority went ahead of a majority stopped at one position (`waiting_elsewhere`:
    ranks another judge sees waiting, e.g. in a send/recv: a majority that waits there is explained there)."""
    out = []
    for comm, per_rank in t.progress.items():
        known = {r: p.enqueued for r, p in per_rank.items() if p.enqueued is not None and p.enqueued >= 0}
        if not known or not members_of(comm, ids) <= set(known):
            continue  # a member with no position at all: absence, not an odd position, is the question
        top = max(known.values())
        ahead = sorted(r for r, v in known.items() if v == top)
        behind = sorted(r for r, v in known.items() if v != top)
        if not minority_ahead({top: of_ranks(ahead)}, bars((known[r], r) for r in behind)):
            continue
        checked = behind[:MAX_CHECKED]
        if not all(g.has_edge(a, b) for a in ahead[:MAX_CHECKED] for b in checked):
            continue  # the counters said the lower ranks completed what the ahead ones wait in: no wait to explain
        if set(behind) & waiting_elsewhere or any(g.out_degree(b) or not set(g.predecessors(b)) <= set(ahead)
                                                  for b in checked):
            continue
        calls = t.signatures.get((comm, top), {}).get(ahead[0]) or []
        out.append(Ahead(comm, tuple(ahead), top, tuple(behind), known[behind[0]], calls[0][0] if calls else None,
                         t.comm_source.get(comm)))
    return out


def offer(found: list[Ahead], ids: Identities, get) -> set[int]:
    """Offer each rank that went ahead as a suspect; return the majority's ranks (their roots are no claim)."""
    majority: set[int] = set()
    for a in found:
        where = names.position(a.comm, a.at, ids)
        called = f"called {a.op} at {where}" if a.op else f"reached {where}"
        for r in a.ranks:
            get(r).offer(ReasonClass.WENT_AHEAD,
                         of_rank(r, f"went ahead: it {called}, which ranks {fold(a.behind)} did not reach (they all "
                                 f"stopped at {names.reached(a.comm, a.level)}): it calls what they skip, or skips "
                                 "what they do"),
                         ahead_confidence(of_ranks(a.ranks), of_ranks(a.behind)),
                         [cite(f"{where}: rank {r} is there, ranks {fold(a.behind)} all stopped at "
                               f"{names.reached(a.comm, a.level)} and wait on no one", tool=a.source or "logs")])
        majority |= set(a.behind)
    return majority

"""Where each rank's logs stop: its last operation, in the one communicator the wait is judged in.

Why here: the correlation already holds each rank's furthest position per communicator (tables)
and the wait-for graph; the pictures of a logs-only post-mortem (the last-operation chart, the
ranks table) need exactly that per rank, and presentation must not re-read events to get it.
Positions count per communicator, so every rank is given in the same one (`chart_comm`): the
communicator with the most members (a rank absent from one, e.g. a mismatch's odd rank that left no
dump, is then still compared), among equals the one most wait edges are in.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass
from typing import Any

import networkx as nx

from parsers.judges.logs.identity import Identities
from parsers.judges.logs.tables import Tables
from parsers.model.ranges import fold

#: JSON groups kept (ranks that stopped alike share one group, so this is rarely reached)
MAX_GROUPS = 200


@dataclass(frozen=True)
class RankOp:
    """The furthest operation one rank's evidence shows in one communicator."""

    rank: int
    host: str | None
    pid: int | None
    comm: str  #: communicator id (NCCL commId) or process group ('pg:0')
    numbering: str  #: 'opCount' (NCCL, counts from 0) or 'SeqNum' (PyTorch's, counts from 1)
    seq: int  #: the furthest position it enqueued (logged)
    completed: int | None  #: the furthest it completed, where a counter or dump says
    op: str | None  #: what it called at `seq`, where its lines say
    sources: tuple[str, ...]  #: which lines said it (nccl-log, c10d, fr...)

    @property
    def text(self) -> str:
        """'allreduce #10 (NCCL opCount of comm 0xde6c…)': decimal, labelled with its numbering and communicator."""
        what = f"{self.op or 'operation'} #{self.seq}"
        done = f", completed #{self.completed}" if self.completed is not None and self.completed != self.seq else ""
        return f"{what}{done} ({comm_words(self.comm, self.numbering)})"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self) | {"text": self.text}


def comm_words(comm: str, numbering: str) -> str:
    """'NCCL opCount of communicator 0xde6c834580d4135f' or 'SeqNum of process group 0 (default)'."""
    if comm.startswith("pg:"):
        name = comm[3:]
        return f"PyTorch SeqNum of process group {name}" + (" (the default group)" if name == "0" else "")
    return f"NCCL {numbering} of communicator {comm}" if numbering == "opCount" else f"{numbering} of {comm}"


def chart_comm(t: Tables, g: nx.DiGraph) -> str | None:
    """The communicator every rank is shown in: the one with the most members; among equals the one most
    wait edges name, then one a mismatch was found in, then a named group over an unknown one ('pg:?'),
    then the default group, then one whose lines say what was called."""
    if not t.progress:
        return None
    named = Counter(d.get("comm") for _, _, d in g.edges(data=True))
    mismatched = {m.get("comm") for m in t.mismatches}

    def key(c: str) -> tuple:
        per = t.progress[c]
        said = sum(1 for r, rp in per.items()
                   if rp.enqueued is not None and r in t.signatures.get((c, rp.enqueued), {}))
        return (len(per), named.get(c, 0), c in mismatched, "?" not in c, c == "pg:0", said, c.startswith("pg:"), c)

    return max(t.progress, key=key)


def last_ops(t: Tables, ids: Identities, g: nx.DiGraph) -> list[RankOp]:
    """One RankOp per rank that left a position: in `chart_comm`, else in the comm it logged last."""
    main = chart_comm(t, g)
    out = []
    ranks = set(ids.ranks) | {r for per in t.progress.values() for r in per}
    for rank in sorted(ranks):
        comm = main if main is not None and rank in t.progress.get(main, {}) else t.last_comm.get(rank)
        rp = t.progress.get(comm, {}).get(rank) if comm else None
        if comm is None or rp is None or rp.enqueued is None:
            continue
        calls = t.signatures.get((comm, rp.enqueued), {}).get(rank)
        info = ids.ranks.get(rank)
        out.append(RankOp(rank=rank, host=info.host if info else None, pid=info.pid if info else None, comm=comm,
                          numbering="SeqNum" if comm.startswith("pg:") else "opCount", seq=rp.enqueued,
                          completed=rp.completed, op=calls[0][0] if calls else None, sources=tuple(sorted(rp.sources))))
    return out


def section(ops: list[RankOp]) -> dict[str, Any]:
    """The JSON form, folded: ranks that stopped at the same operation share one group."""
    groups: dict[tuple, list[int]] = {}
    for o in ops:
        groups.setdefault((o.comm, o.numbering, o.op, o.seq, o.completed), []).append(o.rank)
    rows = [{"ranks": fold(r), "count": len(r), "comm": c, "numbering": n, "op": op, "seq": s, "completed": done}
            for (c, n, op, s, done), r in sorted(groups.items(), key=lambda kv: kv[1][0])]
    return {"ranks": len(ops), "groups": rows[:MAX_GROUPS]}

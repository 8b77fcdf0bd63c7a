"""Turn tables and the wait-for graph into ranked suspects, each with evidence and confidence.

Why separate: the graph says *where* waiting ends, the tables say *what differs*;
the verdict weighs them. A mismatched collective is the most specific finding; a
root of the wait-for graph that everybody ends up waiting on comes next; absence
(a rank with no log, dump or process) is evidence too, and RAS findings confirm.
Confidence is a plain 0..1 score from these rules, not a probability.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import AbstractSet, Sequence, cast

import networkx as nx

from parsers.model.ranges import missing
from parsers.readers import stamps
from parsers.judges.logs import ahead, desync, fr_report, names
from parsers.judges.logs.identity import Identities
from parsers.judges.logs.tables import WRAPPER, Tables, compress
from parsers.judges.logs.waitgraph import waiters_of
from parsers.model.events import WARNING_KINDS, CollectiveSide, ErrorEvent, ErrorKind, Fingerprint, RasFinding
from parsers.model import Suspect
from parsers.model.findings import ReasonClass, cite, of_rank
from parsers.model.ranges import fold

#: a rank number above this in a pasted line is not believed (bounded sets, hostile input)
MAX_RANKS = 1 << 20
#: artifact kinds that say "this rank was alive and reporting"
EVIDENCE_KINDS = ("fr-dump", "nccl-log", "rank-log", "pyspy-text", "pyspy-json")


@dataclass
class _Acc:
    rank: int | None
    reason_class: ReasonClass | None = None
    reason: str = ""
    confidence: float = 0.0
    evidence: list[str] = field(default_factory=list)

    def offer(self, reason_class: ReasonClass, reason: str, confidence: float, evidence: list[str]) -> None:
        if confidence > self.confidence:
            self.reason_class, self.reason, self.confidence = reason_class, reason, confidence
        self.evidence.extend(e for e in evidence if e not in self.evidence)


def _peer_kinds(ids: Identities) -> set[str]:
    return {k for info in ids.ranks.values() for k in info.kinds if k in EVIDENCE_KINDS}


def build_suspects(t: Tables, g: nx.DiGraph, roots: list, cycles: list[list], ids: Identities,
                   ras_findings: list[RasFinding], errors: list[tuple[int | None, ErrorEvent]],
                   neighbours=None, complete: bool = False, waiting_elsewhere: AbstractSet[int] = frozenset(),
                   elsewhere: frozenset[int] = frozenset()) -> list[Suspect]:
    """Suspects from the tables and the graph. `complete`: the evidence should hold every rank
    (parsers.gather.evidence.Coverage), so a rank with no artifact at all is a suspect in its own right, unless it is
    one of the ranks judged `elsewhere` (parsers.gather.source.Source.elsewhere: collected, not in these files).
    `neighbours`: ring neighbours per rank, or a callable that computes them (only the errors-only
    rule needs them: at 100k ranks they cost a pass over every topology line)."""
    acc: dict[int, _Acc] = {}

    def get(rank: int) -> _Acc:
        return acc.setdefault(rank, _Acc(rank))

    # the odd one out went ahead: not the many
    majority = ahead.offer(ahead.went_ahead(t, g, ids, waiting_elsewhere), ids, get)
    _roots(t, g, [r for r in roots if r not in majority], ids, get, get)
    _mismatch(t, get, roots, ids)
    fr_report.offer_suspects(errors, get)  # the Flight Recorder analyzer's report, pasted or saved
    desync.offer_suspects(errors, ids.world_size, get)  # PyTorch's TORCH_NCCL_DESYNC_DEBUG report
    if not acc:  # a cycle names nobody in particular: only a lead, and only when nothing better explains the wait
        for cycle in cycles:
            for r in cycle:
                if isinstance(r, int):
                    ranks = fold(x for x in cycle if isinstance(x, int))
                    get(r).offer(ReasonClass.WAIT_CYCLE, of_rank(r, f"is in a wait cycle with ranks {ranks}"), 0.45,
                                 [cite(f"wait cycle through ranks {ranks}", tool="logs")])
    _wrapper_reports(errors, ids.world_size, get)
    if complete:
        _absent(ids, get, any(k is not None for k in acc), elsewhere)
    _ras(ras_findings, ids, acc, get)
    if not acc:
        _errors_only(errors, ids, get, (neighbours() if callable(neighbours) else neighbours) or {})
    out = []
    for a in sorted(acc.values(), key=lambda a: (-a.confidence, a.rank if a.rank is not None else -1)):
        if a.reason_class is None:  # asked for, never offered anything
            continue
        info = ids.ranks.get(a.rank) if a.rank is not None else None
        out.append(Suspect(rank=a.rank, host=info.host if info else None, pid=info.pid if info else None,
                           reason_class=a.reason_class, reason=a.reason, confidence=min(a.confidence, 0.99),
                           evidence=a.evidence[:20]))
    return out


def _mismatch(t: Tables, get, roots: Sequence[int | str] = (), ids: Identities | None = None) -> None:
    """The odd sides of a collective's position (`find_mismatches`: the sides, the reference and how sure, by the rule
    the recorder judge shares). Runs after the graph rules on purpose.

    Why: a rank that called something else also looks behind, or silent, to the
    others' counters (seen, NCCL 2.28.9: the all_gather rank finished and exited 0,
    leaving no Flight Recorder dump, so it was also a 'no-dump' root). The mismatch
    is the cause, the rest its consequence: for a root of the wait graph it takes
    over the reason, keeping the root's confidence when that is higher. A side of a tie is a lead only: it
    never takes over a root's reason.
    """
    root_set = {r for r in roots if isinstance(r, int)}
    for m in t.mismatches:
        where = names.position(m["comm"], m["seq"], ids)
        for r in m["ranks"]:
            conf = m["confidence"]
            acc = get(r)
            if r in root_set and not m["tie"]:
                conf = max(conf, acc.confidence)
                acc.confidence = 0.0  # the mismatch explains the root: its reason replaces the graph's
            acc.offer(ReasonClass.MISMATCH, of_rank(r, f"called {m['called']} at {where} where "
                                                       f"{_n(m['n_majority'], 'rank')} called {m['majority_called']}"
                                                       f"{_open_count(m)}"), conf,
                      [cite(f"{where}: rank {r} called {m['called']}, {_n(m['n_majority'], 'rank')} "
                            f"{m['majority_called']}",
                            tool=t.comm_source.get(m["comm"].removeprefix(WRAPPER)) or "logs")])


def _open_count(m: dict) -> str:
    """Why a side is only a lead, where it is one and no tie: the ranks not seen could tip the count, or the
    ranks that called something else are together as many as the reference's."""
    if m["settled"] or m["tie"]:
        return ""
    if m["unseen"] == 0 or m["n_seen"] - m["n_majority"] >= m["n_majority"]:
        return (f"; the {_n(m['n_seen'] - m['n_majority'], 'rank')} that called something else are together as many "
                "or more")
    unseen = m["unseen"]
    return (f"; {'an unknown number of ranks' if unseen is None else _n(unseen, 'rank')} not seen at that "
            "position could still tip the count")


def _n(k: int, noun: str) -> str:
    """'1 rank', '7 ranks': a count with its noun, never 'rank(s)'."""
    return f"{k} {noun}" + ("" if k == 1 else "s")


def _wait(k: int) -> str:
    """'1 rank waits', '7 ranks wait'."""
    return f"{_n(k, 'rank')} wait" + ("s" if k == 1 else "")


def _wrapper_reports(errors: list[tuple[int | None, ErrorEvent]], world: int | None, get) -> None:
    """ProcessGroupWrapper's 'Detected mismatch between collectives on ranks. Rank a is running ...,
    but Rank b is running ...' (TORCH_DISTRIBUTED_DEBUG=DETAIL), raised on rank a.

    Why b is the one that differs: the check all-gathers every rank's fingerprint and raises at the
    first rank, in rank order, whose fingerprint is not a's own (ProcessGroupWrapper.cpp), so ranks
    0..b-1 and a all run what a runs. With b = 0 nothing is implied (a may be the odd one). Ranks
    above b were not compared by that report, and differing is not causing, so b is a lead (0.45);
    it is a suspect (0.6) only when the agreeing ranks are every rank of the stated world but b.
    A report whose [rankN] prefix is not its 'Rank a' came from a subgroup (group ranks): skipped."""
    agree: dict[int, set[int]] = {}
    texts: dict[int, list] = {}
    for rank, ev in errors:
        sides = cast(Fingerprint, ev.data).sides if ev.kind == ErrorKind.COLLECTIVE_MISMATCH else None
        if not sides or len(sides) != 2:
            continue
        a, b = sides[0].rank, sides[1].rank
        if a is None or b is None or b == 0 or a == b or (rank is not None and rank != a) or b > MAX_RANKS:
            continue
        agree.setdefault(b, set()).update({*range(b), a})
        texts.setdefault(b, []).append(cite(f"ProcessGroupWrapper: rank {a} runs {_side(sides[0])}, rank {b} "
                                            f"{_side(sides[1])}", tool="ProcessGroupWrapper", file=ev.origin.file,
                                            line=ev.origin.line))
    for b, ranks in sorted(agree.items()):
        if b in {a for other, rs in agree.items() if other != b for a in rs}:
            continue  # b is itself on an agreeing side elsewhere: the reports contradict each other
        conf = 0.6 if world and len(ranks | {b}) >= world else 0.45
        get(b).offer(ReasonClass.MISMATCH, of_rank(b, f"runs a different collective than ranks {compress(ranks)}, "
                                                   "which agree (PyTorch's collective check, "
                                                   "TORCH_DISTRIBUTED_DEBUG=DETAIL)"), conf,
                     texts[b][:5] + [cite(f"the check stops at the first rank that differs, so rank(s) "
                                          f"{compress(range(b))} matched the reporter", tool="ProcessGroupWrapper")])


def _side(side: CollectiveSide) -> str:
    seq = f" SequenceNumber {side.seq}" if side.seq is not None else ""
    return f"{side.op or 'unknown op'}{seq}"


def _unknown_root(g: nx.DiGraph, root: str, get) -> None:
    waiters = sorted(u for u in g.predecessors(root) if isinstance(u, int))
    comm = root.split(":", 1)[1]
    get(None).offer(ReasonClass.NO_DUMP, f"{_wait(len(waiters))} in {names.group(comm)} on a rank that left no "
                    "evidence at all (its number is unknown: no artifact states the group size)", 0.35,
                    [cite(f"ranks {fold(waiters[:16])} wait in {names.group(comm)}; all ranks with evidence reached "
                          "that operation", tool="logs")])


def _roots(t: Tables, g: nx.DiGraph, roots: list, ids: Identities, get, get_unknown=None) -> None:
    total = max(1, g.number_of_nodes() - 1)
    peer_kinds = _peer_kinds(ids)
    for root in roots:
        if isinstance(root, str) and root.startswith("unknown:"):
            if not any(m["comm"] == root.split(":", 1)[1] for m in t.mismatches):  # a mismatch explains the wait
                _unknown_root(g, root, get_unknown or get)
            continue
        if not isinstance(root, int):
            continue
        direct, all_waiters = waiters_of(g, root)
        info = ids.ranks.get(root)
        own = {k for k in (info.kinds if info else ()) if k in EVIDENCE_KINDS}
        edges = [g[u][root] for u in g.predecessors(root)]
        comms = sorted({e["comm"] for e in edges})
        sample = edges[0]["reason"] if edges else ""
        said = ", ".join(names.group(c, ids) for c in comms[:4])
        evidence = [cite(f"{_wait(all_waiters)} on it ({direct} directly) in {said}", tool="wait-for graph"),
                    cite(sample, tool=edges[0]["source"] or "logs") if edges else ""]
        conf = 0.55 + 0.4 * (all_waiters / total)
        silent_only = bool(edges) and all(e.get("kind") == "silent" for e in edges)
        if edges and all(e.get("weak") for e in edges):
            conf = min(conf, 0.7)  # absence alone, while its own lines show it kept up: a lead, not proof
        if not own or silent_only:
            missing = ", ".join(names.kind(k) for k in sorted({e["source"] for e in edges if e.get("kind") == "silent"})
                                or peer_kinds) or "evidence"
            cls, why = ReasonClass.NO_DUMP, of_rank(root, f"left no {missing} while {_wait(all_waiters)} on it")
        elif all_waiters > direct or len(comms) > 1 or not any(e.get("kind") == "behind" for e in edges):
            chain = nx.ancestors(g, root) | {root}
            via = sorted({d["comm"] for u, v, d in g.subgraph(chain).edges(data=True)})
            groups = "; ".join(names.group(c, ids) for c in via[:4])
            cls, why = ReasonClass.WAIT_ROOT, of_rank(root, f"is the root of a wait chain: {_wait(all_waiters)} on it "
                                                            f"through {_n(len(via), 'group')} ({groups})")
        else:
            cls, why = ReasonClass.MISSING_LINE, of_rank(root, "never logged the operation the others wait in "
                                                               f"({sample})")
            missing_absent = [k for k in peer_kinds if k not in own]
            if missing_absent:
                evidence.append(cite(f"no {', '.join(sorted(missing_absent))} from it while other ranks left them",
                                     tool="logs"))
        get(root).offer(cls, why, conf, [e for e in evidence if e])


def _absent(ids: Identities, get, have_suspects: bool, elsewhere: frozenset[int] = frozenset()) -> None:
    """Ranks of the job with no artifact at all: suspects in their own right (not those judged elsewhere)."""
    if not ids.world_size:
        return
    present = [*ids.ranks, *elsewhere]
    absent = missing(ids.world_size, present, max(16, 4 * len(ids.ranks)))  # None: too many to list (a declared size)
    for r in absent or ():
        get(r).offer(ReasonClass.ABSENT, of_rank(r, "left no log, dump or stack at all"), 0.4 if have_suspects else 0.6,
                     [cite(f"no artifact names global rank {r} (world size {ids.world_size})", tool="coverage")])


def _ras(findings: list[RasFinding], ids: Identities, acc: dict, get) -> None:
    """RAS confirms a suspect once, however many answers repeat it.

    Why once: a collection holds the same RAS view up to three times (STATUS, VERBOSE
    STATUS, JSON) and the text names a missing process twice (job and communicator
    block); counting each would turn one observation into certainty.
    """
    by_rank: dict[int, list[RasFinding]] = {}
    for f in findings:
        if f.kind not in ("behind", "missing", "dead") or f.pid is None:
            continue
        rank = ids.by_pid.get(f.pid)
        if rank is not None:
            by_rank.setdefault(rank, []).append(f)
    for rank, found in sorted(by_rank.items()):
        texts = list(dict.fromkeys(cite(f"NCCL RAS: {f.text}", tool="ras") for f in found))
        if rank in acc:
            a = acc[rank]
            a.offer(a.reason_class, a.reason, min(0.99, a.confidence + 0.05), texts)
            continue
        kind = next((k for k in ("dead", "missing", "behind") if any(f.kind == k for f in found)))
        cls = {"behind": ReasonClass.RAS_BEHIND, "missing": ReasonClass.RAS_MISSING, "dead": ReasonClass.RAS_DEAD}[kind]
        get(rank).offer(cls, f"NCCL RAS reports rank {rank} {kind}", 0.5, texts)


def _lost_peer(errors: list[tuple[int | None, ErrorEvent]], neighbours: dict[int, set[int]], get) -> bool:
    """Ranks whose sockets were closed by a peer (ports alone never say which): if their ring
    neighbours have exactly one rank in common, outside themselves, that rank went away.

    Seen (NCCL 2.28.9, rank 7 of 8 SIGKILLed): only ranks 0 and 6 logged
    'socketProgress: Connection closed by remote peer'; their ring neighbours are {7, 1} and
    {5, 7}. Needs two or more reporters: one alone has two neighbours and cannot choose.
    """
    lost = sorted({r for r, e in errors if r is not None and e.kind == ErrorKind.CONNECTION_CLOSED})
    if len(lost) < 2 or not all(neighbours.get(r) for r in lost):
        return False
    common = set.intersection(*(neighbours[r] for r in lost)) - set(lost)
    if len(common) != 1:
        return False
    peer = common.pop()
    first: dict[int | None, ErrorEvent] = {}
    for r, e in errors:
        if e.kind == ErrorKind.CONNECTION_CLOSED:
            first.setdefault(r, e)
    get(peer).offer(ReasonClass.LOST_PEER, of_rank(peer, f"is the one ring neighbour shared by the ranks that lost a "
                    f"connection ({', '.join(map(str, lost))})"), 0.5,
                    [cite(f"rank {r}: connection closed by a peer; ring neighbours {sorted(neighbours[r])}",
                          tool="nccl-log", file=first[r].origin.file, line=first[r].origin.line) for r in lost])
    return True


#: lines that are no first error of the rank that printed them: a warning (torch's teardown notes, printed by ranks
#: that finished), and a report about other ranks (a monitored barrier's absent ranks, a rank's lost wait for that
#: report, a connection a peer closed or reset, a size mismatch with a peer: parsers.judges.named reads them for
#: whom they name)
NOT_FIRST_ERRORS = WARNING_KINDS | frozenset({ErrorKind.BARRIER_ABSENT, ErrorKind.BARRIER_WAIT,
                                              ErrorKind.CONNECTION_CLOSED, ErrorKind.CONNECTION_RESET,
                                              ErrorKind.SIZE_MISMATCH})


def _errors_only(errors: list[tuple[int | None, ErrorEvent]], ids: Identities, get,
                 neighbours: dict[int, set[int]] | None = None) -> None:
    """No structure to go on: the one ring neighbour every rank that lost a connection shares,
    else a rank that stayed silent while others failed, else the first error."""
    if _lost_peer(errors, neighbours or {}, get):
        return
    erred = {r for r, _ in errors if r is not None}
    logged = {r for r, info in ids.ranks.items() if "rank-log" in info.kinds or "nccl-log" in info.kinds}
    silent = sorted(logged - erred)
    if erred and silent and len(silent) < len(erred):
        for r in silent:
            get(r).offer(ReasonClass.SILENT,
                         of_rank(r, f"reported no error while {len(erred)} rank(s) failed talking to peers"), 0.45,
                         [cite(f"{len(erred)} ranks logged errors; rank {r} none", tool="logs")])
        return
    timed = sorted(((when, r, e.timestamp, e) for r, e in errors if r is not None and e.kind not in NOT_FIRST_ERRORS
                    and (when := stamps.key(e.timestamp)) is not None), key=lambda x: x[:3])
    # ranks whose first errors carry the same time (torchelastic's report has seconds) came in no known order
    if timed and not any(r != timed[0][1] for when, r, _, _ in timed if when == timed[0][0]):
        _, r, printed, e = timed[0]
        ts = stamps.shown(printed or "")  # a stamp: it has a key
        get(r).offer(ReasonClass.ERROR_FIRST, of_rank(r, f"logged the first error ({ts})"), 0.3,
                     [cite(f"first error at {ts}", tool=e.source or "logs", file=e.origin.file, line=e.origin.line)])

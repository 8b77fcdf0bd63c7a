"""The wait-for graph: rank -> the ranks it waits on, across communicators.

Why: in a hang most ranks are victims waiting on someone; following "waits on"
edges through every communicator leads to the root (or to a cycle). Edges come
from progress (a rank with an outstanding op at position s waits on members that
never reached s, or that left no evidence at all), from the NCCL proxy dump (a
proxy receiving from / sending to peer P), and from any extra WaitEdge a caller
passes (e.g. the NCCL recorder plugin). Roots and sink cycles are the suspects.
"""

from __future__ import annotations

from bisect import bisect_left
from typing import AbstractSet

import networkx as nx

from parsers.model.ranges import listable
from parsers.gather.evidence import Evidence
from parsers.judges.logs import names
from parsers.judges.logs.identity import Identities
from parsers.judges.logs.tables import WRAPPER, RankProgress, Tables, members_of
from parsers.model import WaitEdge
from parsers.readers.proxy_dump import ProxyOp

#: at most this many "waits on" edges per waiter and comm: enough to find roots, bounded for 100k ranks
MAX_PEERS_PER_WAITER = 16


def add_edge(g: nx.DiGraph, waiter, peer, comm: str, reason: str, source: str, seq: int | None = None,
             kind: str = "behind", weak: bool = False) -> None:
    """kind: 'behind' (peer's own evidence shows it lagging), 'silent' (peer left none), 'direct' (a tool saw it).

    weak: the edge rests on absence alone while the peer's other evidence says it kept up.
    """
    if waiter == peer:
        return
    if g.has_edge(waiter, peer):
        g[waiter][peer].setdefault("also", []).append(comm)
        if not weak:
            g[waiter][peer]["weak"] = False
        return
    edge = WaitEdge(comm_id=comm, waiter=waiter, peer=peer if isinstance(peer, int) else None, source=source,
                    scope="group" if comm.startswith(("pg:", WRAPPER)) else "communicator", seq=seq, global_ranks=True)
    g.add_edge(waiter, peer, comm=comm, reason=reason, source=source, seq=seq, kind=kind, weak=weak, edge=edge)


def progress_edges(g: nx.DiGraph, t: Tables, ids: Identities, providers: dict[str, set[int]],
                   failed: AbstractSet[int] = frozenset()) -> None:
    """Edges from per-comm progress: waiters -> members behind them or silent.

    `failed`: ranks whose logs show a collective timing out or losing a peer. Gloo
    counts a failed collective as completed, so for them the last enqueued op is
    the one they were waiting in even when the counters say it completed.
    """
    for comm, per_rank in t.progress.items():
        members = members_of(comm, ids)
        size = ids.comm_size.get(comm)
        known = {r: p for r, p in per_rank.items() if p.enqueued is not None}
        if not known:
            continue
        source = t.comm_source.get(comm, "")
        where = names.group(comm, ids)  # once per comm: plain words for the edges' reasons
        joined = set((ids.comm_ranks.get(comm) or {}).values())
        if comm == "pg:0":
            # Every process is in the default group: a rank log with no line about it, where the
            # other ranks' logs have one, is the missing line itself (seen: a SIGKILLed NCCL rank's
            # stderr ends before the watchdog lines all seven others print).
            joined |= set(ids.ranks) | set(listable(ids.world_size, len(ids.ranks)))
        for m in members - set(known):
            # a rank whose lines sit in a merged log (an excerpt) may just not have been copied: own files only
            if m in joined and m in providers.get(source, set()) and m in ids.own:
                known[m] = RankProgress(enqueued=-1)  # joined the comm, logged no op in it
        provided = providers.get(source, set())
        silent = sorted(m for m in members if m not in known and m not in provided)
        # members with a position but none of the evidence kind the others left: the same for every waiter
        # but the waiter itself, so listed once per comm (per waiter it was quadratic in ranks)
        lacking_all = [m for m in members if m in known and m not in provided]
        lacking_set = set(lacking_all)
        at_of = {r: p.enqueued for r, p in known.items() if p.enqueued is not None}  # positions
        order = sorted(at_of, key=at_of.__getitem__)
        levels = [at_of[r] for r in order]
        with_completion = t.has_completion.get(comm, False)
        for r, p in known.items():
            enqueued = at_of[r]
            if with_completion and p.completed is not None:
                if enqueued <= p.completed:
                    # A rank that failed in its last op waited in it, even behind others (seen, gloo,
                    # 3 ranks, one SIGKILLed: the other two failed at 645 and 646, both on the dead one).
                    if r not in failed or t.last_comm.get(r, comm) != comm:
                        continue
                    at = enqueued
                else:
                    at = p.completed + 1
            elif with_completion:
                continue
            else:
                # No completion counters (NCCL op lines): a rank that launched op `at` waits on every
                # member that never launched it; the furthest behind come first, so the lowest is the root.
                if enqueued == levels[0]:
                    continue
                at = enqueued
            behind = order[: min(bisect_left(levels, at), MAX_PEERS_PER_WAITER)]
            if not behind and not silent and source:
                # Nobody is behind: every member reached `at` by some account (a watchdog line).
                # A member that left none of the evidence kind every other member left (the
                # Flight Recorder dump all responsive ranks write when the watchdog fires) did
                # not answer: seen for a SIGSTOPped rank (NCCL 2.28.9, torch 2.11).
                n_lacking = len(lacking_all) - (r in lacking_set)
                if n_lacking and n_lacking < len(members) / 2:
                    lacking = [m for m in lacking_all[:MAX_PEERS_PER_WAITER + 1] if m != r]
                    for peer in lacking[:MAX_PEERS_PER_WAITER]:
                        add_edge(g, r, peer, comm, f"waits at {names.position(comm, at, ids, where)}; rank "
                                 f"{peer} left no {names.kind(source)} while the other members did", source, at,
                                 kind="silent", weak=True)
                    continue
            for peer in behind:
                add_edge(g, r, peer, comm, f"waits at {names.position(comm, at, ids, where)}; rank {peer} only "
                         f"reached {names.reached(comm, at_of[peer])}", source, at)
            for peer in silent[:MAX_PEERS_PER_WAITER]:
                add_edge(g, r, peer, comm, f"waits at {names.position(comm, at, ids, where)}; rank {peer} left "
                         f"no {names.kind(source)}", source, at, kind="silent")
            if not behind and not silent and not size:
                # Everyone we know reached `at`, and nothing says how big the group is: the rank it
                # waits on may be one that left no evidence at all. A weak, explicit unknown.
                add_edge(g, r, f"unknown:{comm}", comm, f"waits at {names.position(comm, at, ids, where)}; every rank "
                         "with evidence reached it, the group size is not known", source, at, kind="unknown")


def proxy_edges(g: nx.DiGraph, arts: Evidence, ids: Identities, unmapped: list[str]) -> None:
    """Edges from NCCL proxy dumps, through the process's world communicator."""
    world_of = {a.rank: a.parsed.facts["world_comm"] for a in arts.artifacts
                if a.parsed and a.rank is not None and a.parsed.facts.get("world_comm")}
    for art in arts.artifacts:
        if not art.parsed or not art.parsed.facts.get("proxy_ops"):
            continue
        waiter = art.rank
        comm = art.parsed.facts.get("world_comm") or world_of.get(waiter)
        if waiter is None:
            unmapped.append(f"{art.path}: proxy dump from an unknown rank")
            continue
        for op in art.parsed.facts["proxy_ops"]:
            if not isinstance(op, ProxyOp):
                continue
            for peer in op.waits_on():
                gpeer = ids.global_of(comm, peer) if comm else None
                if gpeer is None:
                    unmapped.append(f"{art.path}: proxy op {op.op_count} peer {peer} (no comm map)")
                    continue
                add_edge(g, waiter, gpeer, comm or "?",
                         f"proxy op {op.op_count} ({op.kind}) exchanging with rank {gpeer}", "proxy-dump", op.op_count,
                         kind="direct")


def extra_edges(g: nx.DiGraph, edges, ids: Identities, unmapped: list[str]) -> None:
    """Caller-supplied WaitEdges (recorder plugin, RAS...), mapped from comm ranks to global ranks."""
    for e in edges or ():
        if not isinstance(e, WaitEdge):
            continue
        waiter = ids.global_of(e.comm_id, e.waiter)
        if waiter is None and e.waiter_pid is not None:
            waiter = ids.by_host_pid.get((e.waiter_host, e.waiter_pid)) if e.waiter_host else None
            waiter = waiter if waiter is not None else ids.by_pid.get(e.waiter_pid)
        peer = ids.global_of(e.comm_id, e.peer)
        if peer is None and e.comm_id not in ids.comm_ranks:
            # an unknown comm: assume comm ranks are global ranks only if the comm is the whole world
            peer = (e.peer if ids.world_size and e.peer is not None and e.peer < ids.world_size and waiter is not None
                    else None)
        if waiter is None or peer is None:
            unmapped.append(f"{e.source}: {e.comm_id} rank {e.waiter} -> {e.peer}")
            continue
        add_edge(g, waiter, peer, e.comm_id, f"{e.source}: {e.op or 'op'} {e.state or ''} {e.detail}".strip(),
                 e.source, kind="direct")


def roots_and_cycles(g: nx.DiGraph) -> tuple[list[int | str], list[list[int | str]]]:
    """Nodes nobody-waits-further-from (sinks with waiters) and sink cycles (a node: a rank, or 'unknown:<comm>')."""
    roots: list[int | str] = []
    cycles: list[list[int | str]] = []
    if g.number_of_nodes() == 0:
        return roots, cycles
    cond = nx.condensation(g)
    for comp in cond.nodes:
        if cond.out_degree(comp) != 0:
            continue
        members = list(cond.nodes[comp]["members"])
        if len(members) == 1:
            node = members[0]
            if g.in_degree(node) > 0:
                roots.append(node)
        else:
            cycles.append(sorted(members, key=str))
    return roots, cycles


def waiters_of(g: nx.DiGraph, node) -> tuple[int, int]:
    """(direct waiters, all ranks that wait on it through any chain)."""
    return g.in_degree(node), len(nx.ancestors(g, node))

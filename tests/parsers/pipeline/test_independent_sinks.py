"""Issue 26 item 2.4: independent sinks of one wait-for graph are several culprits (parsers/pipeline/sinks.py),
and a sink that shares a waiter with the culprit, or waits on it, is not."""

from __future__ import annotations

import networkx as nx

from parsers.model.findings import ReasonClass, Suspect, Verdict
from parsers.pipeline.sinks import independent_culprits


def _s(rank: int, cls: ReasonClass = ReasonClass.OUTSIDE, conf: float = 0.8) -> Suspect:
    return Suspect(rank=rank, host=f"node{rank}", pid=100 + rank, reason_class=cls, reason=f"rank {rank} x",
                   confidence=conf)


def _graph(*edges: tuple[int, int]) -> nx.DiGraph:
    g = nx.DiGraph()
    g.add_edges_from(edges)
    return g


def test_two_chains_each_ending_on_its_own_rank_are_two_culprits():
    v = Verdict(suspects=[_s(1), _s(3), _s(2, ReasonClass.MISSING_LINE, 0.6)])
    independent_culprits(v, _graph((0, 1), (2, 3), (4, 3)))
    assert [c.rank for c in v.culprits] == [1, 3]
    assert [c.rank for c in v.culprits[1].consequences] == [2]  # 2 waits on 3: a consequence of rank 3, no rival
    assert [s.rank for s in v.suspects] == [1, 3]
    assert v.to_dict()["culprits"][1]["rank"] == 3


def test_a_shared_waiter_or_a_path_between_them_leaves_one_culprit():
    shared = Verdict(suspects=[_s(1), _s(3)])
    independent_culprits(shared, _graph((0, 1), (0, 3), (2, 3)))  # rank 0 waits on both: one wait, two ends
    assert [c.rank for c in shared.culprits] == [1]
    chained = Verdict(suspects=[_s(1), _s(3)])
    independent_culprits(chained, _graph((0, 1), (3, 1), (2, 3)))  # 3 waits on 1: 1 explains 3
    assert [c.rank for c in chained.culprits] == [1]


def test_a_lead_below_the_bar_or_a_rank_no_one_waits_on_is_no_culprit():
    v = Verdict(suspects=[_s(1), _s(3, conf=0.4), _s(5)])
    independent_culprits(v, _graph((0, 1), (2, 3), (5, 6)))  # 5 waits on 6 and nobody waits on 5
    assert [c.rank for c in v.culprits] == [1]


def test_only_waiters_in_the_hung_scope_count():
    v = Verdict(suspects=[_s(1), _s(3)], hung_ranks=[0, 1])
    independent_culprits(v, _graph((0, 1), (2, 3)))  # 2 did not stall or time out: its wait is no hang
    assert [c.rank for c in v.culprits] == [1]

"""Issue 26 item 2.5: where positions are compared, the minority is what needs explaining
(parsers/judges/logs/ahead.py). Real captures: tests/parsers/pipeline/test_issue26_cases.py ('ahead',
'order', 'pipeline'); here the rule's edges on the progress table it reads, built by the graph code itself."""

from __future__ import annotations

import networkx as nx

from parsers.judges.logs import ahead, waitgraph
from parsers.judges.logs.identity import Identities
from parsers.judges.logs.tables import RankProgress, Tables
from facts import says


def _case(positions: dict[int, tuple[int, int]]) -> tuple[Tables, nx.DiGraph, Identities]:
    """A default group of len(positions) ranks, each (enqueued, completed) as a Flight Recorder dump says."""
    ids = Identities(world_size=len(positions))
    t = Tables()
    for r, (enq, done) in positions.items():
        t.progress["pg:0"][r] = RankProgress(enqueued=enq, completed=done, counted=True)
        t.signatures[("pg:0", enq)][r] = [("allreduce", 1024, "float32")]
    t.has_completion["pg:0"], t.comm_source["pg:0"] = True, "fr-dump"
    g = nx.DiGraph()
    waitgraph.progress_edges(g, t, ids, {"fr-dump": set(positions)})
    return t, g, ids


def test_one_rank_inside_an_op_the_seven_did_not_reach_is_the_odd_one():
    t, g, ids = _case({0: (12, 11), **{r: (11, 11) for r in range(1, 8)}})
    found = ahead.went_ahead(t, g, ids)
    assert [(a.ranks, a.behind, a.at, a.level, a.op) for a in found] == [((0,), tuple(range(1, 8)), 12, 11,
                                                                          "allreduce")]
    got = {}
    majority = ahead.offer(found, ids, lambda r: got.setdefault(r, _Acc()))
    assert majority == set(range(1, 8)) and list(got) == [0]
    assert says([got[0].reason], "#12", "default group", "all 8 ranks", "ranks 1-7"), got[0].reason


def test_seven_inside_and_one_behind_is_the_usual_missing_line_not_this_rule():
    t, g, ids = _case({**{r: (12, 11) for r in range(7)}, 7: (11, 11)})
    assert ahead.went_ahead(t, g, ids) == [] and waitgraph.roots_and_cycles(g)[0] == [7]


def test_a_majority_that_waits_elsewhere_or_at_different_positions_is_no_comparison():
    t, g, ids = _case({0: (12, 11), 1: (11, 11), 2: (11, 11), 3: (11, 11)})
    assert ahead.went_ahead(t, g, ids, waiting_elsewhere={2}) == []  # rank 2 waits in a send/recv
    t, g, ids = _case({0: (12, 11), 1: (11, 11), 2: (10, 10), 3: (11, 11)})
    assert ahead.went_ahead(t, g, ids) == []  # the rest do not agree with each other


class _Acc:
    def offer(self, reason_class, reason, confidence, evidence):
        self.reason_class, self.reason, self.confidence, self.evidence = reason_class, reason, confidence, evidence


def _rp(rank: int, entered: bool, **kw):
    from parsers.judges.recorder import RankInStall as RecRank

    return RecRank(rank=rank, pid=100 + rank, global_rank=rank, has_state=True, entered=entered,
                   latest="AllReduce seq 11" if entered else "AllReduce seq 10", **kw)


def test_the_recorder_names_the_one_that_entered_an_op_the_others_never_did():
    from parsers.judges.recorder import _suspects

    ranks = {0: _rp(0, True, waits_on=[1, 2, 3]), **{r: _rp(r, False, waited_on_by=[0]) for r in (1, 2, 3)}}
    found = _suspects("0xabc", "AllReduce seq 11", ranks, 0)
    assert [(s.rank, str(s.reason_class)) for s in found] == [(0, "went-ahead")]
    assert says([found[0].reason], "ranks 1-3", "not reach") and found[0].evidence[0].tool == "recorder"


def test_the_recorder_keeps_the_usual_rule_where_the_many_are_inside():
    from parsers.judges.recorder import _suspects

    ranks = {**{r: _rp(r, True, waits_on=[3]) for r in (0, 1, 2)}, 3: _rp(3, False, waited_on_by=[0, 1, 2])}
    found = _suspects("0xabc", "AllReduce seq 11", ranks, 0)
    assert [(s.rank, str(s.reason_class)) for s in found] == [(3, "outside-collective")]

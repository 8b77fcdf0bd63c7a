"""The summary is written last, from whichever suspect leads after every source has spoken."""

from __future__ import annotations

import networkx as nx

from parsers.model import Suspect, Verdict
from parsers.stacks.classify import Activity
from parsers.merge import summarize
from parsers.merge import demote_waiters


def test_summary_follows_the_culprit_after_demotion():
    """Found in review: a root claim demoted below a host fault left the old summary behind."""
    claim = Suspect(rank=2, host="h", pid=1, reason_class="outside-collective", reason="is in no collective", confidence=0.8)
    host = Suspect(rank=5, host="g", pid=9, reason_class="host-fault", reason="is on a host with an uncorrectable ECC error",
                   confidence=0.55, evidence=["recommended action: exclude (drain) the host and restart"])
    graph = nx.DiGraph()
    graph.add_edge(2, 3, where="AllReduce seq 4 of comm 0xab")
    verdict = Verdict(suspects=demote_waiters([claim, host], {2: Activity("elsewhere", None, "x")}, graph))
    verdict.sections["waiting"] = {"ranks": [0, 1, 3, 4], "activity": "wait in all_reduce"}
    text = summarize(verdict)
    assert verdict.culprit.rank == 5
    assert text.startswith("rank 5 (g pid 9) is on a host with an uncorrectable ECC error. Recommended action: exclude")
    assert text.endswith("; ranks 0-1,3-4 wait in all_reduce")


def test_summary_does_not_repeat_the_rank():
    verdict = Verdict(suspects=[Suspect(rank=7, host="n", pid=3, reason_class="no-dump", reason="rank 7 left no dump", confidence=0.9)])
    assert summarize(verdict) == "rank 7 (n pid 3) left no dump"

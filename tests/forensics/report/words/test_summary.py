"""The summary is written last, from whichever suspect leads after every source has spoken."""

from __future__ import annotations

import networkx as nx

from forensics.report.words import summary
from parsers.pipeline.merge import demote_waiters, merge_suspects
from parsers.model import Suspect, Verdict
from parsers.model.findings import Citation, Findings, ReasonClass, of_rank
from parsers.stacks.classify import Activity
from facts import says


def test_summary_follows_the_culprit_after_demotion():
    """Found in review: a root claim demoted below a host fault left the old summary behind."""
    claim = Suspect(rank=2, host="h", pid=1, reason_class=ReasonClass.OUTSIDE, reason="is in no collective",
                    confidence=0.8)
    host = Suspect(rank=5, host="g", pid=9, reason_class=ReasonClass.HOST_FAULT,
                   reason="is on a host with an uncorrectable ECC error",
                   confidence=0.55, evidence=["recommended action: exclude (drain) the host and restart"],
                   action="exclude (drain) the host and restart")
    graph = nx.DiGraph()
    graph.add_edge(2, 3, where="AllReduce seq 4 of comm 0xab")
    verdict = Verdict(suspects=demote_waiters([claim, host], {2: Activity("elsewhere", None, "x")}, graph))
    verdict.sections["waiting"] = {"ranks": [0, 1, 3, 4], "activity": "wait in all_reduce"}
    summary.write(verdict)
    assert verdict.culprit.rank == 5
    assert claim.demotion is not None and claim.demotion.waits_on == 3  # typed: who it waits on, where
    # the summary is the culprit's: its label, its own reason and the action for it, nothing of the demoted claim
    assert (verdict.summary.startswith(host.label + " ") and host.reason in verdict.summary
            and host.action in verdict.summary)
    assert claim.reason not in verdict.summary
    assert verdict.consequences == ["ranks 0-1,3-4 wait in all_reduce"]  # its own line, not inside the summary


def test_summary_does_not_repeat_the_rank():
    verdict = Verdict(suspects=[Suspect(rank=7, host="n", pid=3, reason_class=ReasonClass.NO_DUMP,
                                        reason=of_rank(7, "left no dump"), confidence=0.9)],
                      hang="hang")
    summary.write(verdict)
    assert verdict.summary.startswith("rank 7 (n pid 3) ") and verdict.summary.count("rank 7") == 1, verdict.summary


def test_a_snapshot_claim_without_time_evidence_says_the_hang_is_not_established():
    """Issue 26 step 1: 'the others wait on N' read from one snapshot is a hang culprit only if the job hangs."""
    verdict = Verdict(suspects=[Suspect(rank=1, host="n", pid=3, reason_class=ReasonClass.OUTSIDE,
                                        reason="is in no collective",
                                        confidence=0.8)])  # hang defaults to 'not established'
    summary.write(verdict)
    # wording is the behaviour: the 'not established' rule, said in these words wherever no time decides the hang
    assert verdict.summary.endswith("Hang not established: one snapshot, no time-stamped progress (read it as: "
                                    "if the job hangs)")
    assert verdict.summary.count(". ") <= 1  # at most two sentences


def test_a_reason_is_a_reason_class_and_a_plain_name_is_refused():
    """Issue 26 item 1: the reason is a ReasonClass at every creation site; a name (known or not) is refused."""
    s = Suspect(rank=1, host=None, pid=None, reason_class=ReasonClass.STOPPED, reason="is stopped", confidence=0.95)
    assert s.reason_class is ReasonClass.STOPPED
    for name in ("stopped", "made-up"):
        try:
            Suspect(rank=1, host=None, pid=None, reason_class=name, reason="x", confidence=0.5)
        except TypeError:
            pass
        else:
            raise AssertionError(f"a plain reason name {name!r} was accepted")


def _found(judge: str, rank: int, reason_class: ReasonClass, reason: str, confidence: float) -> list[Suspect]:
    """One judge's one suspect (rank on host 'h', pid 1), as the judge's Findings carry it (its source set)."""
    return Findings(judge, [Suspect(rank=rank, host="h", pid=1, reason_class=reason_class, reason=reason,
                                    confidence=confidence)]).suspects


def test_a_mismatch_explains_a_never_started_op_of_the_same_rank():
    """Issue 26: the mismatch comes first causally; the gpu-queued op is its consequence, not a rival."""
    merged = merge_suspects(_found("recorder", 2, ReasonClass.GPU_QUEUED,
                                   "enqueued AllReduce seq 10 but it never started", 0.91),
                            _found("logs", 2, ReasonClass.MISMATCH, "called broadcast where 7 ranks called all_reduce",
                                   0.9))
    assert len(merged) == 1 and merged[0].reason_class == ReasonClass.MISMATCH
    assert [c.reason_class for c in merged[0].consequences] == [ReasonClass.GPU_QUEUED]
    assert merged[0].sources == ["logs", "recorder"] and merged[0].confidence == 0.9  # the cause's own


def test_a_tie_s_lead_never_hides_a_named_finding_of_the_same_rank():
    """Issue 43 item 2: a side of a tied call mismatch is a lead (0.45, no majority says which call was wrong). It
    explains a stall in principle, but as the cause it would keep its own 0.45 and hide the rank's own evidence:
    the named finding heads, the lead agrees with it; a mismatch worth a name still heads what it explains."""
    stalled = _found("recorder", 1, ReasonClass.STALLED, "stopped beating in AllReduce seq 5", 0.9)
    tie = _found("logs", 1, ReasonClass.MISMATCH, "called broadcast where 1 rank called allreduce", 0.45)
    (merged,) = merge_suspects(tie, stalled)
    assert (merged.reason_class, merged.confidence) == (ReasonClass.STALLED, 0.9)
    assert [a.reason_class for a in merged.agreeing] == [ReasonClass.MISMATCH] and not merged.consequences
    (named,) = merge_suspects(_found("logs", 1, ReasonClass.MISMATCH, "called broadcast where 7 ranks called "
                                     "allreduce", 0.9), _found("recorder", 1, ReasonClass.STALLED, "stalled", 0.95))
    assert named.reason_class == ReasonClass.MISMATCH and named.confidence == 0.9


def test_agreeing_sources_outrank_a_single_source():
    """Issue 26 item 4: two ranks at one confidence; the one two sources support leads, and says which."""
    from parsers.pipeline.merge import agree

    one = Findings("logs", [Suspect(rank=1, host=None, pid=None, reason_class=ReasonClass.WAIT_ROOT, reason="a",
                                    confidence=0.75)]).suspects
    two = merge_suspects(Findings("logs", [Suspect(rank=4, host=None, pid=None, reason_class=ReasonClass.WAIT_ROOT,
                                                   reason="b", confidence=0.75)]).suspects,
                         Findings("ras", [Suspect(rank=4, host=None, pid=None, reason_class=ReasonClass.RAS_BEHIND,
                                                  reason="c", confidence=0.5)]).suspects)
    ranked = agree(merge_suspects(one, two))
    assert [s.rank for s in ranked] == [4, 1] and ranked[0].sources == ["logs", "ras"]
    assert ranked[0].confidence > ranked[1].confidence
    lead = Findings("logs", [Suspect(rank=9, host=None, pid=None, reason_class=ReasonClass.ERROR_FIRST, reason="d",
                                     confidence=0.3)]).suspects
    lead[0].agreeing.append(Findings("ras", [Suspect(rank=9, host=None, pid=None, reason_class=ReasonClass.RAS_DEAD,
                                                     reason="e", confidence=0.3)]).suspects[0])
    assert agree(lead)[0].confidence == 0.3  # agreement never lifts a lead over the naming bar


def test_a_citation_is_typed_and_reads_as_its_text():
    c = Citation("last exception: OOM [rank3.log:12]", file="rank3.log", line=12, tool="exception")
    assert c.startswith("last exception") and (c.file, c.line, c.tool) == ("rank3.log", 12, "exception")
    assert c.to_dict() == {"shows": "last exception: OOM [rank3.log:12]", "file": "rank3.log", "line": 12,
                           "tool": "exception"}


def test_a_ranks_own_exception_explains_its_absence():
    """Issue 26 step 6: 'left no dump while 7 ranks wait on it' is the consequence of its own exception."""
    merged = merge_suspects(_found("logs", 7, ReasonClass.NO_DUMP, "left no fr-dump while 7 rank(s) wait on it", 0.95),
                            _found("exceptions", 7, ReasonClass.RAISED, "raised torch.OutOfMemoryError", 0.85))
    assert merged[0].reason_class == ReasonClass.RAISED
    assert merged[0].consequences[0].reason_class == ReasonClass.NO_DUMP
    verdict = Verdict(suspects=merged, hang="hang")
    summary.write(verdict)
    assert verdict.summary.startswith(merged[0].label + " ") and "torch.OutOfMemoryError" in verdict.summary
    # one consequence line: the absence, of the same rank, with its class
    assert len(verdict.consequences) == 1 and says(verdict.consequences, "rank 7", "no fr-dump",
                                                   "[no-dump]"), verdict.consequences

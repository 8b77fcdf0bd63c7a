"""The one analysis pipeline: source -> read -> judge -> merge, for bundles, loose folders and archives.

Stages (docs/architecture.md):
- read: `parsers.source.open_source` lists the files (a manifest adds hints),
  `parsers.evidence.load` reads each through the registry into the evidence model;
- judge: pure functions from the evidence to suspects: stacks and process state
  (judges.stacks), the NCCL recorder's wait edges (judges.recorder), logs, Flight
  Recorder dumps and RAS correlated into a wait-for graph (judges.logs), host faults
  and known errors (judges.hosts);
- merge: one ranking (parsers.merge), the summary written last from whichever
  suspect leads, and what the evidence covers.
Presentation (text, JSON, HTML, notebook) reads the returned `Analysis` only.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from parsers import knowledge
from parsers.digest_first import load_digest_first
from parsers.evidence import Evidence, load
from parsers.judges.exceptions import judge_exceptions
from parsers.judges.hosts import HostReport, judge_hosts
from parsers.judges.logs import LogAnalysis, correlate
from parsers.judges.logs import horovod as horovod_stalls, names, unread
from parsers.judges.recorder import analyse, comm_rank_table, wait_edges
from parsers.judges.activity import activity_facts
from parsers.judges.p2p import judge_p2p
from parsers.judges.progress import (judge_progress, judge_ras_progress, judge_sampled_progress, judge_second_look,
                                     judge_step_progress)
from parsers.judges.stacks import stack_verdict
from parsers.judges.slowness import judge_slowness
from parsers.merge import merge_verdict
from parsers.quiet_gc import pause_gc
from parsers.model.findings import Findings, Verdict, WaitEdge
from parsers.source import Source, open_source


@dataclass
class Analysis:
    """The result of the pipeline: the verdict, the evidence it rests on, and the host reports."""

    verdict: Verdict
    evidence: Evidence
    hosts: list[HostReport] = field(default_factory=list)
    logs: LogAnalysis | None = None

    @property
    def culprit(self):
        return self.verdict.culprit


def analyze(path: Path | str | Source, kb: knowledge.KnowledgeBase | None = None,
            log_mode: str | None = None, digests: bool = True) -> Analysis:
    """Analyse a bundle, a loose folder or an archive of either (InputError on anything else).

    `log_mode`: None reads logs over parsers.evidence.HEAD_TAIL_BYTES head and tail only (said in
    the verdict); 'full' scans every line of every big log. `digests`: a bundle whose hosts wrote
    digests is read digest first (parsers.digest_first: raw files only for the odd ones out and the
    ranks the verdict names); False reads every raw file."""
    kb = kb if kb is not None else knowledge.load()
    with pause_gc():  # millions of small acyclic objects at scale: the cyclic GC only costs time here
        if isinstance(path, Source):
            return _analyze_source(path, kb, log_mode, digests)
        with open_source(path) as src:
            return _analyze_source(src, kb, log_mode, digests)


def _analyze_source(src: Source, kb: knowledge.KnowledgeBase, log_mode: str | None, digests: bool) -> Analysis:
    read = load_digest_first(src, kb, log_mode) if digests else None
    if read is None:
        return analyze_evidence(load(src, kb.line_filter, log_mode=log_mode), kb)
    result = analyze_evidence(read.evidence, kb)
    for _ in range(3):  # every rank the verdict names must rest on its raw files: read those, judge again
        if not read.reread_named(s.rank for s in result.verdict.suspects):
            break
        result = analyze_evidence(read.evidence, kb)
    result.verdict.sections["digests"] = read.summary()
    return result


def analyze_evidence(ev: Evidence, kb: knowledge.KnowledgeBase | None = None) -> Analysis:
    """Every judge over the evidence, then one merge."""
    kb = kb if kb is not None else knowledge.load()
    stacks = stack_verdict(ev)
    edges, comm_ranks, recorder_suspects, recorder_section = _judge_recorder(ev)
    p2p = judge_p2p(ev)  # send/recv by peer and p2p sequence, never compared with collective positions
    # ranks that wait in a send/recv are not 'stopped before' a collective the others reached (the odd-one-out rule)
    logs = correlate(ev, extra_edges=edges, comm_ranks=comm_ranks, waiting_elsewhere={e.waiter for e in p2p.edges}) \
        if _has_log_evidence(ev) else None
    reports, host_suspects = judge_hosts(ev, kb)
    # the one judge protocol: each judge's findings carry the kind of evidence it read (agreement is counted by it)
    Findings("stacks", stacks.suspects)
    Findings("recorder", recorder_suspects)
    if logs is not None:
        Findings("logs", logs.suspects)
    host_suspects = Findings("hosts", host_suspects).suspects + Findings("exceptions", judge_exceptions(ev)).suspects
    progress = judge_progress(ev.recorder)
    if not progress.decided:
        progress = judge_ras_progress(ev.artifacts)
    if not progress.decided:
        progress = judge_sampled_progress(ev.ranks)
    if not progress.decided:
        progress = judge_step_progress(ev.step_series, ev.collected_unix)
    if not progress.decided:  # collect's second look: the same cheap reads twice, seconds apart
        progress = judge_second_look(ev.ranks)
    slow = judge_slowness(ev) if progress.running or not progress.decided else None
    global_edges = [(comm_ranks.get(e.comm_id, {}).get(e.waiter), comm_ranks.get(e.comm_id, {}).get(e.peer),
                     f"{e.op or 'an op'} of {names.group(e.comm_id)}") for e in edges]
    global_edges += [(e.waiter, e.peer, f"{e.op} (p2p seq {e.p2p_seq}) of {names.group(e.comm_id)}") for e in p2p.edges]
    # Horovod's stall inspector names the rank a collective waits for, as the recorder does (read from logs)
    horovod = Findings("logs", horovod_stalls.judge(ev)).suspects
    verdict = merge_verdict(ev, stacks, recorder_suspects + p2p.suspects + horovod, logs, host_suspects, reports,
                            global_edges, progress, slow)
    if recorder_section:
        verdict.sections["recorder"] = recorder_section
    verdict.sections["ranks"] = ranks_table(ev)
    verdict.sections["unread_lines"] = unread.section(ev)
    return Analysis(verdict=verdict, evidence=ev, hosts=reports, logs=logs)


def _judge_recorder(ev: Evidence) -> tuple[list[WaitEdge], dict[str, dict[int, int]], list, dict[str, Any]]:
    """Wait edges and stall suspects from the NCCL recorder's state files, where there are any."""
    states = ev.recorder
    if not states:
        return [], {}, [], {}
    edges = wait_edges(states)
    stalls = analyse(states)
    section = {
        "state_files": len(states),
        "stalls": [{"comm_id": st.comm_id, "op": st.op, "nranks": st.nranks, "edges": len(st.edges)} for st in stalls],
        "wait_edges": [e.__dict__ for e in edges],
    }
    return edges, comm_rank_table(states), [s for st in stalls for s in st.suspects], section


def _has_log_evidence(ev: Evidence) -> bool:
    return any(a.kind in ("nccl-log", "rank-log", "fr-report", "fr-dump", "ras-text", "ras-json", "pyspy-text", "pyspy-json")
               for a in ev.artifacts)


def ranks_table(ev: Evidence) -> list[dict[str, Any]]:
    """One row per process: identity, state and what its main thread does (for tables and reports)."""
    rows = []
    for r in ev.ranks:
        act = r.activity
        row = {"rank": r.rank, "host": r.record.host, "pid": r.record.pid, "state": r.state,
               "activity": act.kind, "op": act.op, "where": act.where, "problems": r.problems}
        if r.samples is not None:  # collect --samples: where the main thread spent its time, as shares
            row["samples"] = activity_facts(r.samples, r.samples_file)
        rows.append(row)
    for m in ev.missing:
        rows.append({"rank": m.rank, "host": m.host, "pid": None, "state": None, "activity": "missing", "op": None,
                     "where": None, "problems": [m.reason]})
    return sorted(rows, key=lambda row: (row["rank"] is None, row["rank"] or 0))

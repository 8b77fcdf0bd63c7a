"""The one analysis pipeline: source -> read -> judge -> merge, for bundles, loose folders and archives.

Stages (docs/architecture.md):
- read: `parsers.gather.source.open_source` lists the files (a manifest adds hints),
  `parsers.gather.evidence.load` reads each through the registry into the evidence model;
- judge: pure functions of the evidence, each through the one judge protocol (`Judge`:
  (Evidence, JudgeContext) -> Findings, parsers/model/findings.py), run in the order of `JUDGES`;
- merge: the arbiter (parsers.pipeline.merge) takes the one list of Findings, in its fixed order.
The returned verdict is typed, its words empty: presentation words it (forensics.report.words, whose
`analyze` is this function worded) and reads the returned `Analysis` only.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from parsers import knowledge
from parsers.scale import focus as digest_focus
from parsers.scale.focus import FOCUS_MIN_RANKS
from parsers.scale.digest_first import load_digest_first
from parsers.gather.evidence import Evidence, load
from parsers.judges import (exceptions, fr_started, hosts, mixed, named, observations, p2p, progress, recorder,
                            slowness, stacks)
from parsers.judges import logs as logs_judge
from parsers.judges.hosts import HostReport
from parsers.judges.logs import LogAnalysis, horovod, unread
from parsers.judges.activity import activity_facts
from parsers.pipeline.merge import merge_verdict
from parsers.gather.quiet_gc import pause_gc
from parsers.model.findings import Findings, Judge, JudgeContext, Verdict
from parsers.gather.source import Source, open_source

#: every judge, in the order they run (a later one may read an earlier one's findings through the context:
#: the logs judge maps the recorder's edges and skips the p2p judge's waiters; slowness runs where progress
#: says the job runs or cannot say). The arbiter weighs their suspects in this order.
JUDGES: tuple[Judge, ...] = (stacks.judge, recorder.judge, p2p.judge, fr_started.judge, horovod.judge, logs_judge.judge,
                             hosts.judge, exceptions.judge, named.judge, progress.judge, slowness.judge,
                             observations.judge)


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
            log_mode: str | None = None, digests: bool = True, elsewhere: Iterable[int] = (),
            focus_from: int | None = FOCUS_MIN_RANKS) -> Analysis:
    """Analyse a bundle, a loose folder or an archive of either (InputError on anything else).

    `log_mode`: None reads logs over parsers.gather.evidence.HEAD_TAIL_BYTES head and tail only (said in
    the verdict); 'full' scans every line of every big log. `digests`: a bundle whose hosts wrote
    digests is read digest first (parsers.scale.digest_first: raw files only for the odd ones out and the
    ranks the verdict names), and one of `focus_from` ranks or more over its digests' classes
    (parsers.scale.focus: evidence only for the hosts that can change the verdict; None: never); False reads every raw
    file. `elsewhere`: ranks of the job collected and judged elsewhere, not in this source (the reduced
    tree's root: the ranks its gateways keep, forensics.fleet.tree_verdict)."""
    kb = kb if kb is not None else knowledge.load()
    with pause_gc(freeze=True):  # millions of small acyclic objects at scale: the cyclic GC only costs time here
        if isinstance(path, Source):
            return _analyze_source(path, kb, log_mode, digests, frozenset(elsewhere), focus_from)
        # the file list of a bundle is made only when the focus is not (parsers.scale.focus lists its hosts')
        with open_source(path, list_files=not digests or log_mode is not None) as src:
            return _analyze_source(src, kb, log_mode, digests, frozenset(elsewhere), focus_from)


def _analyze_source(src: Source, kb: knowledge.KnowledgeBase, log_mode: str | None, digests: bool,
                    elsewhere: frozenset[int], focus_from: int | None) -> Analysis:
    if elsewhere:
        src.elsewhere = src.elsewhere | elsewhere
    if not digests or log_mode is not None:
        src.list_files()
        return analyze_evidence(load(src, kb.line_filter, log_mode=log_mode), kb)
    focused, why_not = digest_focus.focus(src, kb, focus_from)
    result, why_not = _over_classes(focused, kb) if focused else (None, why_not)
    if result is None:
        src.list_files()
        result = _digest_first(src, kb)
    if "digests" in result.verdict.sections:
        result.verdict.sections["digests"]["focus"] = focused.summary() if not why_not else {"why_not": why_not}
    return result


def _over_classes(focused: digest_focus.Focus, kb: knowledge.KnowledgeBase) -> tuple[Analysis | None, str]:
    """The analysis of the focused hosts (parsers.scale.focus), or (None, why) when its verdict needs every
    rank: it keeps naming ranks judged from their classes, or the job may run and its ranks are timed."""
    result = _digest_first(focused.source, kb)
    for rounds in range(4):  # a rank the verdict names rests on its own files: its host joins the focus (3 rounds)
        named = {s.rank for s in result.verdict.suspects if s.rank in focused.source.elsewhere}
        if not named:
            break
        if rounds == 3 or not focused.widen(named):
            return None, f"the verdict named ranks {sorted(named)[:8]} judged from their classes"
        result = _digest_first(focused.source, kb)
    if result.verdict.slow is not None and result.verdict.slow.timed:  # who arrives last is no class's question
        return None, "the job may run and its ranks are timed: every rank's timings count"
    if "classes" in result.verdict.sections:  # the job's classes, not only the ranks read
        result.verdict.sections["classes"] = focused.classes()
    return result, ""


def _digest_first(src: Source, kb: knowledge.KnowledgeBase) -> Analysis:
    """Digest first (or every raw file, for a source without usable digests), then the ranks the verdict
    names read raw and judged again."""
    read = load_digest_first(src, kb)
    if read is None:
        return analyze_evidence(load(src, kb.line_filter), kb)
    result = analyze_evidence(read.evidence, kb)
    for _ in range(3):  # every rank the verdict names must rest on its raw files: read those, judge again
        if not read.reread_named(s.rank for s in result.verdict.suspects):
            break
        result = analyze_evidence(read.evidence, kb)
    result.verdict.sections["digests"] = read.summary()
    return result


def analyze_evidence(ev: Evidence, kb: knowledge.KnowledgeBase | None = None) -> Analysis:
    """Every judge over the evidence, then one merge."""
    found = run_judges(ev, JudgeContext(kb=kb if kb is not None else knowledge.load()))
    verdict = merge_verdict(ev, found)
    verdict.sections["ranks"] = ranks_table(ev)
    verdict.sections["unread_lines"] = unread.section(ev)
    verdict.sections["mixed_inputs"] = [f.to_dict() for f in mixed.foreign_inputs(ev)]  # another job's files: said
    by = {f.judge: f for f in found}
    return Analysis(verdict=verdict, evidence=ev, hosts=by["hosts"].reports, logs=by["logs"].log_analysis)


def run_judges(ev: Evidence, ctx: JudgeContext, judges: tuple[Judge, ...] = JUDGES) -> list[Findings]:
    """Each judge in turn, through the one protocol; each sees the findings of those before it."""
    for judge in judges:
        ctx.found.append(judge(ev, ctx))
    return ctx.found


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

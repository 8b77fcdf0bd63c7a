"""Slow, not hung: every slowness judge over one job's evidence, and the one answer they give.

Why one place: a running job can be slow in three told-apart ways, each seen by its own
judge, and the verdict must say which: a straggler rank or a slow host arrives last at the
collectives (judges.stragglers: recorder waits, Flight Recorder or NCCL COLL enter times,
else arm()'s step series through parsers.judges.step_ranks); a slow link carries its data slower
than the other links while every rank arrives on time (judges.links: the recorder's send
waits); neither, while the job is slow alike everywhere: a job-wide slowdown, whose pattern
the step series classify (parsers.steps.classify). The merge (parsers.pipeline.merge) reads only this.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from parsers.gather.evidence import Evidence
from parsers.judges.links import SlowLinks, judge_links, link_suspects, without
from parsers.judges.stragglers import (ECHO_SHARE, MIN_OPS, Stragglers, fr_ops, judge_ops, judge_stragglers,
                                       nccl_log_ops, straggler_suspects)
from parsers.model.findings import Findings, JudgeContext, Suspect
from parsers.judges.step_ranks import RankSteps, compare_ranks


@dataclass
class Slowness:
    """What the slowness judges found in one job."""

    stragglers: Stragglers
    links: SlowLinks
    steps: RankSteps | None = None  #: arm()'s per-rank step series, where the evidence has them

    @property
    def late(self) -> list[int]:
        """Ranks named late: by the collectives' stamps, else by the step series."""
        if self.stragglers.ops >= MIN_OPS:
            return list(self.stragglers.late)
        return self.steps.late if self.steps is not None else []

    @property
    def timed(self) -> bool:
        """Whether any source timed the ranks (collective stamps, link waits, step series): each rank's own
        timings then count, which no class of ranks stands for (parsers.scale.focus reads every rank then)."""
        return (self.stragglers.ops >= MIN_OPS or bool(self.links.timed)
                or bool(self.steps is not None and self.steps.source))

    @property
    def named(self) -> bool:
        """Whether any judge names a slow part (a rank, a host or a link)."""
        return bool(self.late or self.links.slow)

    def describe(self) -> str:
        """One sentence: the slow part, or what the evidence shows when there is none."""
        parts = []
        if self.stragglers.ops >= MIN_OPS or self.steps is None or not self.steps.source:
            parts.append(self.stragglers.describe())
        else:
            parts.append(self.steps.describe())
        if self.links.slow:
            parts = (parts if self.late else []) + [self.links.describe()]  # 'no straggler' says nothing here
        elif self.links.timed and self.links.ops >= MIN_OPS and not self.late:
            parts.append(self.links.describe())
        if not self.named and self.stragglers.ops >= MIN_OPS and self.links.ops >= MIN_OPS:
            parts.append("no rank, host or link stands out: the job runs at one pace everywhere (if it is slow, "
                         "the cause is job-wide)")
        return "; ".join(parts)

    def suspects(self, pids: dict[int, int] | None = None) -> list[Suspect]:
        """The named ranks and links as suspects (stragglers from the step series only without op stamps)."""
        if self.stragglers.ops >= MIN_OPS or self.steps is None:
            found = straggler_suspects(self.stragglers, pids)
        else:
            found = straggler_suspects(self.steps.found, pids)
        return found + link_suspects(self.links, pids)

    def sections(self) -> dict[str, Any]:
        """The verdict's sections: 'stragglers' always, 'links' and 'steps' where their source exists."""
        out: dict[str, Any] = {"stragglers": self.stragglers.to_dict()}
        if self.links.timed:
            out["links"] = self.links.to_dict()
        if self.steps is not None:
            out["steps"] = self.steps.to_dict()
        return out


def judge_slowness(ev: Evidence) -> Slowness:
    """Every slowness judge over the evidence (`ev`: parsers.gather.evidence.Evidence)."""
    stragglers = _stragglers(ev)
    return Slowness(stragglers=stragglers, links=_without_echoes(judge_links(ev.recorder), stragglers),
                    steps=_steps(ev))


def _without_echoes(links: SlowLinks, stragglers: Stragglers) -> SlowLinks:
    """A slow link out of a straggler by ECHO_SHARE of its lateness or less is its echo, not a slow link.

    Why: on the H200 a rank 300 ms late showed 1.6 ms more send wait on its link (over a 4.2 ms
    median: above the link floor); a link slow in its own right is not tied to its sender's lateness."""
    echoes = {link for link in links.slow if link[0] in stragglers.late
              and links.excess_ms[link] <= ECHO_SHARE * stragglers.lateness_ms[link[0]]}
    return without(links, echoes) if echoes else links


def _stragglers(ev: Evidence) -> Stragglers:
    """From the source that stamps the most common operations, the recorder first (it alone gives waits)."""
    rec = judge_stragglers(ev.recorder)
    if rec.ops >= MIN_OPS:
        return rec
    hosts = _hosts(ev)
    best = rec
    for timed in (fr_ops(ev.artifacts), nccl_log_ops(ev.artifacts)):
        found = judge_ops(timed, hosts)
        if found.ops > best.ops:
            best = found
    return best


def _steps(ev: Evidence) -> RankSteps | None:
    """arm()'s step series of two or more ranks, compared (parsers.judges.step_ranks), else None."""
    series = getattr(ev, "step_series", None) or {}
    if len(series) < 2:
        return None
    return compare_ranks(series, _hosts(ev))


def _hosts(ev: Evidence) -> dict[int, str]:
    """rank -> host, from the artifacts that know both (a rank's host is named only where known)."""
    return {a.rank: host for a in ev.artifacts if a.rank is not None for host in (a.hints.host or a.host,) if host}


def judge(ev: Evidence, ctx: JudgeContext) -> Findings:
    """Who is slow (the one protocol), where the progress judge says the job runs or cannot say; its suspects
    are the arbiter's to weigh (only a running job's stragglers are judged)."""
    progress = ctx.of("progress").progress
    run = progress is None or progress.running or not progress.decided
    return Findings("timing", judge="slowness", slow=judge_slowness(ev) if run else None)

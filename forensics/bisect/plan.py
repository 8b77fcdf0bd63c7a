"""`forensics bisect --plan`: every round the design fixes in advance, as folded host sets, and what each outcome
of it would decide, without running anything.

Why: a person who is about to drain half a cluster for test jobs wants to see the jobs first (how many, which
hosts together) and what a pass or a failure of each would mean. The rounds the design plans before any result
(the grid's rows and columns, a forced first round) are planned here exactly as the bisection will plan them,
through the same engine; each outcome is decoded with the same noise model (forensics.bisect.decode), so 'a
failure of this job alone would leave these hosts suspect' is the engine's own answer. Rounds after those
depend on the results, and the plan says so rather than guessing them.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

from forensics.bisect import decode
from forensics.bisect.engine import Bisection
from forensics.hostset import fold

#: designs whose first rounds do not depend on results: how many (grid and hand: rows, then columns)
FIXED_ROUNDS = {"grid": 2, "grid3": 2, "hand": 2, "adaptive": 1}


@dataclass(frozen=True)
class PlannedRound:
    """One round fixed in advance: its kind, its jobs' host sets (folded), and the decoded outcomes."""

    index: int
    kind: str
    groups: tuple[str, ...]
    outcomes: tuple[str, ...]


def _hosts(bis: Bisection, units: list[int]) -> str:
    return fold([h for u in units for h in bis.units[u].hosts]) if units else "none"


def _decided(bis: Bisection, obs: list[decode.JobResult]) -> str:
    """'convicted A; cleared B; undecided C' for hypothetical results `obs` (the engine's decoding)."""
    q = decode.posteriors(len(bis.units), obs, bis.noise, bis._unary)
    dec = decode.decide(q, bis.settings.confidence)
    seen = {u for o in obs for u in o.units}
    good = [u for u in dec.good if u in seen]  # a host no job touched is not cleared by its prior alone
    open_ = sorted(dec.undecided + [u for u in dec.good if u not in seen])
    parts = [f"convicted {_hosts(bis, dec.bad)}" if dec.bad else "",
             f"cleared {_hosts(bis, good)}" if good else "", f"undecided {_hosts(bis, open_)}" if open_ else ""]
    return "; ".join(p for p in parts if p) or "nothing decided"


def _outcomes(bis: Bisection, before: list[decode.JobResult], groups: list[dict[str, Any]], given: str) -> list[str]:
    """What every job passing, and one job failing (each in turn, the first three said), would decide, after
    the earlier rounds' results `before` (said in `given`)."""
    passed = [decode.JobResult(g["units"], False) for g in groups]
    out = [given] if given else []
    out.append(f"if every job passes: {_decided(bis, before + passed)}")
    for i, g in enumerate(groups[:3]):
        obs = before + [decode.JobResult(x["units"], x is g) for x in groups]
        out.append(f"if only {g['id']} ({_hosts(bis, g['units'])}) fails: {_decided(bis, obs)}")
    if len(groups) > 3:
        out.append(f"(and likewise for each of the other {len(groups) - 3} jobs)")
    return out


def plan(options: dict[str, Any]) -> tuple[list[PlannedRound], str]:
    """The rounds fixed in advance and their outcomes, and what follows them (in words)."""
    bis = Bisection({"config": copy.deepcopy(options), "rounds": []})
    fixed = FIXED_ROUNDS.get(bis.settings.design, 1) + (1 if options.get("first_round") else 0)
    rounds: list[PlannedRound] = []
    before: list[decode.JobResult] = []
    given = ""
    for _ in range(min(fixed, bis.settings.max_rounds)):
        rnd = bis.plan_next()
        if rnd is None:
            break
        groups = rnd["groups"]
        rounds.append(PlannedRound(rnd["index"] + 1, rnd["kind"],
                                   tuple(f"{g['id']}: {fold(g['hosts'])} ({len(g['hosts'])} hosts)" for g in groups),
                                   tuple(_outcomes(bis, before, groups, given))))
        for g in groups:  # the next fixed round is planned whatever these give: mark them done to plan it
            g["status"] = "passed"
        # the next round's outcomes are said after one bad host's trace in this one: its first job failed
        before += [decode.JobResult(g["units"], g is groups[0]) for g in groups]
        given = f"(given {groups[0]['id']} failed and the rest of round {rnd['index'] + 1} passed)"
        bis._cache = None
    then = (f"then, up to round {bis.settings.max_rounds} (--max-rounds), rounds that depend on the results: hosts "
            "still undecided are tested in smaller groups or alone (padded with cleared hosts) until each is "
            f"convicted or cleared at --confidence {bis.settings.confidence}")
    return rounds, then


def plan_lines(options: dict[str, Any]) -> list[str]:
    """The plan as text: one block per round, its jobs, then its outcomes."""
    rounds, then = plan(options)
    hosts = [h for u in options["units"] for h in u["hosts"]]
    lines = [f"bisect plan: {len(hosts)} hosts ({fold(hosts)}), design {options['settings']['design']}; "
             "nothing is run"]
    for r in rounds:
        lines.append(f"round {r.index} ({r.kind}): {len(r.groups)} job{'s' if len(r.groups) != 1 else ''}")
        lines += [f"  {g}" for g in r.groups]
        lines += [f"  {o}" for o in r.outcomes]
    lines.append(then)
    return lines

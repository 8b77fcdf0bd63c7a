"""The bisection itself, independent of how jobs run: plan, record outcomes, decode.

The real runner and the simulator both drive this class, so the simulator plays the
very designs and decoding that a real run would. All of it lives in the state dict,
which is what makes a run resumable.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from forensics.bisect import decode, designs
from forensics.bisect.designs import Group, PlanContext, RoundPlan, SizeRule, Unit

FAILED = ("fail", "hang")
FINISHED = ("pass", "fail", "hang")

# Likelihood ratios of single-host checks (host evidence collectors): a health check
# that passes is good but not conclusive evidence; 'exclude' convicts outright.
CHECK_LLR = {"healthy": np.log(0.05), "suspect": np.log(20.0)}


@dataclass
class BisectSettings:
    """The knobs a bisection runs with, stored in the state's config."""

    design: str = "grid"
    rows: int | None = None
    cols: int | None = None
    parallel: int = 1
    confidence: float = 0.99
    max_rounds: int = 12
    flake: float = 0.02
    miss: float = 0.01
    prior: float | None = None
    min_size: int = 1
    multiple: int = 1
    max_size: int | None = None
    max_parallel: int | None = None


class Bisection:
    """Wraps a state dict: units, rounds with their jobs, and the decoding of them."""

    def __init__(self, state: dict[str, Any]):
        self.state = state
        cfg = state["config"]
        self.units = [Unit(u["name"], tuple(u["hosts"])) for u in cfg["units"]]
        self.settings = BisectSettings(**cfg.get("settings", {}))
        self.noise = decode.NoiseModel(self.settings.flake, self.settings.miss, self.settings.prior)
        self.design = designs.ForcedFirst(designs.make_design(
            self.settings.design, self.settings.rows, self.settings.cols, self.settings.parallel))
        self.excluded: dict[str, str] = cfg.get("excluded", {})
        self._unary = np.zeros(len(self.units))
        for name, llr in cfg.get("unary_llr", {}).items():
            idx = self.unit_index(name)
            if idx is not None:
                self._unary[idx] += llr
        self._cache: tuple[int, np.ndarray] | None = None

    # ------------------------------------------------------------ construction

    @staticmethod
    def new_config(units: list[Unit], settings: BisectSettings, **extra: Any) -> dict[str, Any]:
        """The config part of a fresh state."""
        cfg = {"units": [{"name": u.name, "hosts": list(u.hosts)} for u in units],
               "settings": settings.__dict__.copy()}
        cfg.update(extra)
        return cfg

    def unit_index(self, name: str) -> int | None:
        """Index of the unit named `name` (or holding host `name`)."""
        for i, u in enumerate(self.units):
            if u.name == name or name in u.hosts:
                return i
        return None

    # ------------------------------------------------------------ evidence

    @property
    def rounds(self) -> list[dict[str, Any]]:
        return self.state["rounds"]

    def observations(self) -> list[list[decode.JobResult]]:
        """Finished jobs per round, as the decoder sees them."""
        return [[decode.JobResult(g["units"], g["status"] in FAILED)
                 for g in r["groups"] if g["status"] in FINISHED] for r in self.rounds]

    def posterior(self) -> np.ndarray:
        """P(bad) for every unit from every finished job (cached per job count)."""
        obs = [o for rnd in self.observations() for o in rnd]
        key = len(obs)
        if self._cache is None or self._cache[0] != key:
            q = decode.posteriors(len(self.units), obs, self.noise, self._unary)
            for i, u in enumerate(self.units):
                if any(h in self.excluded for h in u.hosts):
                    q[i] = 1.0
            self._cache = (key, q)
        return self._cache[1]

    def decision(self) -> decode.Decision:
        """Bad / good / undecided at the configured confidence (hand design: intersection)."""
        if self.settings.design == "hand":
            flagged = set(decode.intersection_verdict(len(self.units), self.observations()))
            n = len(self.units)
            return decode.Decision(sorted(flagged), [i for i in range(n) if i not in flagged], [])
        dec = decode.decide(self.posterior(), self.settings.confidence)
        # A unit no job or check has touched is not "cleared" by a small prior alone.
        seen = self._touched()
        fresh = [u for u in dec.good if u not in seen]
        if fresh:
            dec.good = [u for u in dec.good if u in seen]
            dec.undecided = sorted(dec.undecided + fresh)
        return dec

    def _touched(self) -> set[int]:
        """Units that some finished job, host check or bundle verdict has spoken about."""
        seen = {u for rnd in self.observations() for o in rnd for u in o.units}
        seen.update(int(i) for i in np.nonzero(self._unary)[0])
        return seen

    # ------------------------------------------------------------ planning

    def open_round(self) -> dict[str, Any] | None:
        """The last round if some of its jobs have not finished (resume point)."""
        if self.rounds and any(g["status"] not in FINISHED for g in self.rounds[-1]["groups"]):
            return self.rounds[-1]
        return None

    def finished(self) -> bool:
        """True when no unit is undecided, the design is done, or the round budget is spent."""
        if self.open_round() is not None:
            return False
        if len(self.rounds) >= self.settings.max_rounds:
            return True
        if self.settings.design == "hand":
            return len(self.rounds) >= 2
        return not self.decision().undecided

    def context(self) -> PlanContext:
        """What the design sees."""
        dec = self.decision()
        history = [[designs.Tested(list(o.units), o.failed) for o in rnd] for rnd in self.observations()]
        cfg = self.state["config"]
        first = cfg.get("first_round")
        first_plan = RoundPlan("suspects first", [Group(list(g)) for g in first]) if first else None
        s = self.settings
        excluded_units = {i for i, u in enumerate(self.units) if any(h in self.excluded for h in u.hosts)}
        return PlanContext(
            units=self.units, rounds_done=len(self.rounds), history=history,
            posterior=[float(x) for x in self.posterior()],
            undecided=[u for u in dec.undecided if u not in excluded_units],
            good=[u for u in dec.good if u not in excluded_units], bad=list(dec.bad),
            size_rule=SizeRule(s.min_size, s.multiple, s.max_size),
            spare_good_hosts=list(cfg.get("good_hosts", [])),
            max_parallel=s.max_parallel, first_round=first_plan)

    def plan_next(self) -> dict[str, Any] | None:
        """Plan and append the next round (pending jobs), or None when done."""
        if self.finished():
            return None
        plan = self.design.next_round(self.context())
        if plan is None or not plan.groups:
            return None
        excluded_units = {i for i, u in enumerate(self.units) if any(h in self.excluded for h in u.hosts)}
        index = len(self.rounds)
        groups = []
        for gi, g in enumerate(plan.groups):
            units = [u for u in g.units if u not in excluded_units]
            if not units:
                continue
            hosts = [h for u in units for h in self.units[u].hosts] + list(g.padding)
            groups.append({"id": f"r{index + 1}g{gi + 1}", "units": units, "hosts": hosts,
                           "padding": list(g.padding), "status": "pending", "rc": None,
                           "seconds": None, "log": None})
        rnd = {"index": index, "kind": plan.kind, "groups": groups}
        self.rounds.append(rnd)
        return rnd

    def record(self, group: dict[str, Any], status: str, rc: int | None, seconds: float,
               log: str | None = None) -> None:
        """Store one job's outcome in the state."""
        group.update(status=status, rc=rc, seconds=round(seconds, 3), log=log)
        self._cache = None

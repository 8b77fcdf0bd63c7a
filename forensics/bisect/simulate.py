"""Play a design against a model cluster before spending machine time on it.

The model: N hosts, k of them bad (a job holding one fails, or hangs, always unless
`miss`), and good jobs that still fail with probability `flake` or hang with
probability `hang`. The same Bisection class the real runner uses plans and decodes;
only the job outcomes come from the model instead of real processes.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field

from forensics.bisect.designs import Unit
from forensics.bisect.engine import Bisection, BisectSettings
from forensics.bisect.state import new_state


@dataclass
class ClusterModel:
    """What the simulated cluster does."""

    n: int
    k: int
    flake: float = 0.0  #: P(a job of good hosts fails)
    hang: float = 0.0  #: P(a job of good hosts hangs until its time limit)
    miss: float = 0.0  #: P(a job holding a bad host passes anyway)
    bad_hang: float = 0.5  #: share of bad-host failures that are hangs
    job_time: float = 1.0  #: duration of a job that ends (pass or fail), in any unit
    hang_time: float = 3.0  #: duration of a hung job: the time limit


@dataclass
class SimResult:
    """How one simulated bisection went."""

    truth: list[str]
    found: list[str]
    undecided: list[str]
    rounds: int
    jobs: int
    machine_time: float

    @property
    def exact(self) -> bool:
        """The convicted set is exactly the bad set, with nothing left undecided."""
        return set(self.found) == set(self.truth) and not self.undecided

    @property
    def false_exclusions(self) -> int:
        """Good hosts wrongly convicted (they would be drained for nothing)."""
        return len(set(self.found) - set(self.truth))

    @property
    def missed(self) -> int:
        """Bad hosts not convicted."""
        return len(set(self.truth) - set(self.found))


def hosts_for(n: int) -> list[str]:
    """Host names node0001.. for a simulated cluster."""
    width = max(4, len(str(n)))
    return [f"node{i + 1:0{width}d}" for i in range(n)]


def run_once(model: ClusterModel, settings: BisectSettings, rng: random.Random,
             good_hosts: list[str] | None = None) -> SimResult:
    """One bisection against one random draw of bad hosts."""
    hosts = hosts_for(model.n)
    bad = set(rng.sample(hosts, model.k))
    units = [Unit(h, (h,)) for h in hosts]
    state = new_state(Bisection.new_config(units, settings, good_hosts=good_hosts or []))
    bis = Bisection(state)
    jobs = 0
    machine = 0.0
    while bis.plan_next() is not None:
        for group in bis.rounds[-1]["groups"]:
            status = _outcome(model, bad, group["hosts"], rng)
            seconds = model.hang_time if status == "hang" else model.job_time
            bis.record(group, status, 0 if status == "pass" else 1, seconds)
            jobs += 1
            machine += seconds * len(group["hosts"])
    dec = bis.decision()
    name = [u.name for u in bis.units]
    return SimResult(sorted(bad), [name[i] for i in dec.bad], [name[i] for i in dec.undecided],
                     len(bis.rounds), jobs, machine)


def _outcome(model: ClusterModel, bad: set[str], members: list[str], rng: random.Random) -> str:
    if bad.intersection(members) and rng.random() >= model.miss:
        return "hang" if rng.random() < model.bad_hang else "fail"
    x = rng.random()
    if x < model.flake:
        return "fail"
    if x < model.flake + model.hang:
        return "hang"
    return "pass"


@dataclass
class Summary:
    """Averages over many simulated bisections of one design on one model."""

    design: str
    trials: int
    rounds: float
    max_rounds: int
    jobs: float
    machine_time: float
    exact_rate: float
    false_exclusions: float
    missed: float
    undecided: float
    results: list[SimResult] = field(default_factory=list, repr=False)


def summarize(design: str, results: list[SimResult]) -> Summary:
    """Mean rounds, jobs, machine-time, exact rate and errors of a batch."""
    t = len(results)
    mean = lambda xs: sum(xs) / t  # noqa: E731
    return Summary(design, t, mean([r.rounds for r in results]), max(r.rounds for r in results),
                   mean([r.jobs for r in results]), mean([r.machine_time for r in results]),
                   mean([r.exact for r in results]), mean([r.false_exclusions for r in results]),
                   mean([r.missed for r in results]), mean([len(r.undecided) for r in results]), results)


def simulate(design: str, model: ClusterModel, trials: int = 50, seed: int = 0,
             confidence: float = 0.99, max_rounds: int | None = None, flake_assumed: float | None = None,
             min_size: int = 1, multiple: int = 1, max_parallel: int | None = None,
             parallel: int = 1) -> Summary:
    """Run `trials` bisections with `design` against `model` and summarise them.

    The decoder assumes the model's failure rate (flake + hang) unless told otherwise,
    floored at 0.1% because no real test is perfectly reliable.
    """
    if max_rounds is None:
        max_rounds = default_max_rounds(design, model.n)
    assumed = flake_assumed if flake_assumed is not None else max(model.flake + model.hang, 0.001)
    settings = BisectSettings(design=design, confidence=confidence, max_rounds=max_rounds,
                        flake=assumed, miss=max(model.miss, 0.001), min_size=min_size,
                        multiple=multiple, max_parallel=max_parallel, parallel=parallel)
    rng = random.Random(seed)
    results = [run_once(model, settings, rng) for _ in range(trials)]
    return summarize(design, results)


def default_max_rounds(design: str, n: int) -> int:
    """A round budget that lets each design finish on a bad day (adaptive runs one job a round)."""
    if design == "adaptive":
        return 12 * max(1, math.ceil(math.log2(max(n, 2)))) + 20
    return 12


def information_bound(n: int, k: int) -> float:
    """log2 C(n, k): bits needed to name k bad hosts among n; no design can use fewer yes/no jobs."""
    return math.log2(math.comb(n, k))

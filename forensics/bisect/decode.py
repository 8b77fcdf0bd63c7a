"""Posterior probability that each unit is bad, from every group job so far.

Model (stated, so a user can argue with it): each unit is bad independently with
probability `prior`. A job whose members are all good still fails (or hangs) with
probability `flake`; a job holding at least one bad unit still passes with
probability `miss`. Hangs count as failures: a hang is what a bad host usually does.

Exact inference over 2^N subsets is out of reach for thousands of hosts, so it runs
in two steps: a cheap mean-field pass over all units finds the few that could be bad,
then the posterior over those candidates is computed exactly by enumerating every
subset of at most `max_bad` of them (the rest held at their mean-field odds). For a
handful of hosts that is plain Bayes, checkable by hand.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

EPS = 1e-9


@dataclass
class NoiseModel:
    """How far a single job can be trusted."""

    flake: float = 0.02  #: P(job fails or hangs | all members good)
    miss: float = 0.01  #: P(job passes | some member bad)
    prior: float | None = None  #: P(unit bad) before tests; None: 1 / number of units

    def prior_for(self, n: int) -> float:
        """The prior used for `n` units, clamped away from 0 and 1."""
        p = self.prior if self.prior is not None else 1.0 / max(n, 2)
        return min(max(p, EPS), 1 - EPS)


@dataclass
class JobResult:
    """One finished job: the units it held and whether it failed (fail or hang)."""

    units: Sequence[int]
    failed: bool


def _clamp(p: float) -> float:
    return min(max(p, EPS), 1 - EPS)


def mean_field(n: int, obs: Sequence[JobResult], noise: NoiseModel,
               unary_llr: np.ndarray | None = None, iterations: int = 12) -> np.ndarray:
    """Approximate marginals: each unit's odds updated against its companions' current odds."""
    prior = noise.prior_for(n)
    base = math.log(prior / (1 - prior))
    if unary_llr is not None:
        base = base + unary_llr
    flake, miss = _clamp(noise.flake), _clamp(noise.miss)
    if not obs:
        return 1 / (1 + np.exp(-np.broadcast_to(base, (n,)).astype(float)))
    tests = np.concatenate([np.full(len(o.units), i) for i, o in enumerate(obs)]).astype(int)
    members = np.concatenate([np.asarray(o.units, dtype=int) for o in obs])
    failed = np.array([o.failed for o in obs])[tests]
    q = np.full(n, prior)
    for _ in range(iterations):
        log_good = np.log1p(-np.minimum(q, 1 - EPS))
        per_test = np.bincount(tests, weights=log_good[members], minlength=len(obs))
        a = np.exp(per_test[tests] - log_good[members])  # P(no other member bad)
        if_good_fail = (1 - a) * (1 - miss) + a * flake
        ratio = np.where(failed, (1 - miss) / if_good_fail, miss / (1 - if_good_fail))
        llr = np.bincount(members, weights=np.log(ratio), minlength=n)
        new = 1 / (1 + np.exp(-(base + llr)))
        if np.max(np.abs(new - q)) < 1e-7:
            q = new
            break
        q = 0.5 * q + 0.5 * new
    return q


def exact_candidates(candidates: Sequence[int], q_rest: np.ndarray, obs: Sequence[JobResult],
                     noise: NoiseModel, n: int, max_bad: int,
                     unary_llr: np.ndarray | None = None) -> np.ndarray:
    """Exact marginals of `candidates` over all their subsets of size <= max_bad.

    Units outside the candidates count through a background term: the chance that one
    of them makes a job fail, from their current probabilities `q_rest`.
    """
    cand = list(candidates)
    k = len(cand)
    index = {u: i for i, u in enumerate(cand)}
    prior = noise.prior_for(n)
    flake, miss = _clamp(noise.flake), _clamp(noise.miss)
    log_prior_odds = np.full(k, math.log(prior / (1 - prior)))
    if unary_llr is not None:
        log_prior_odds = log_prior_odds + unary_llr[cand]
    rows, lb, lg = [], [], []
    for o in obs:
        inside = [index[u] for u in o.units if u in index]
        if not inside:
            continue
        others = [u for u in o.units if u not in index]
        background = 1 - float(np.prod(1 - q_rest[others])) if others else 0.0
        p_fail_clean = background * (1 - miss) + (1 - background) * flake
        mask = np.zeros(k, dtype=bool)
        mask[inside] = True
        rows.append(mask)
        lb.append(math.log(1 - miss) if o.failed else math.log(miss))
        lg.append(math.log(p_fail_clean) if o.failed else math.log(1 - p_fail_clean))
    m = np.array(rows, dtype=bool).reshape(len(rows), k)
    delta = np.array(lb) - np.array(lg)  # gain in log-likelihood when a test holds a bad unit
    log_w = [0.0]  # the empty set: all candidates good
    marg = np.zeros(k)
    weights_by_size = []
    for size in range(1, min(max_bad, k) + 1):
        combos = np.array(list(itertools.combinations(range(k), size)), dtype=int)
        hit = m[:, combos].any(axis=2) if len(rows) else np.zeros((0, len(combos)), dtype=bool)
        lw = log_prior_odds[combos].sum(axis=1) + (delta[:, None] * hit).sum(axis=0)
        weights_by_size.append((combos, lw))
        log_w.extend(lw.tolist())
    top = max(log_w)
    total = math.exp(0.0 - top)
    for combos, lw in weights_by_size:
        w = np.exp(lw - top)
        total += w.sum()
        np.add.at(marg, combos.ravel(), np.repeat(w, combos.shape[1]))
    return marg / total


def subset_budget(k: int, limit: int = 30_000, cap: int = 5) -> int:
    """Largest subset size s <= cap whose enumeration over k candidates stays under `limit`."""
    s, count = 0, 1
    while s < min(cap, k):
        nxt = count + math.comb(k, s + 1)
        if nxt > limit:
            break
        s, count = s + 1, nxt
    return s


def posteriors(n: int, obs: Sequence[JobResult], noise: NoiseModel,
               unary_llr: np.ndarray | None = None, max_bad: int = 5,
               candidate_floor: float = 1e-4, max_candidates: int = 30) -> np.ndarray:
    """P(bad) per unit: mean field for all, then exact over the likeliest candidates."""
    q = mean_field(n, obs, noise, unary_llr)
    order = np.argsort(-q)
    cand = [int(u) for u in order[:max_candidates] if q[u] >= candidate_floor]
    if not cand:
        return q
    budget = min(max_bad, subset_budget(len(cand)))
    if budget < 1:
        return q
    rest = q.copy()
    rest[cand] = 0.0
    exact = exact_candidates(cand, rest, obs, noise, n, budget, unary_llr)
    q = q.copy()
    q[cand] = exact
    return q


@dataclass
class Decision:
    """Units split by a confidence: convicted, cleared, still open."""

    bad: list[int]
    good: list[int]
    undecided: list[int]


def decide(q: Sequence[float], confidence: float) -> Decision:
    """Split units by `confidence`, which is a promise about the whole answer.

    A unit is convicted when P(bad) >= confidence. Units are cleared only when
    P(bad) <= (1 - confidence) / N, so that the chance that *any* cleared unit is in
    fact bad stays below 1 - confidence however large the cluster: a per-host
    threshold would clear thousands of hosts on their small prior alone.
    """
    n = max(len(q), 1)
    clear = (1 - confidence) / n
    bad = [i for i, p in enumerate(q) if p >= confidence]
    good = [i for i, p in enumerate(q) if p <= clear]
    open_ = [i for i, p in enumerate(q) if clear < p < confidence]
    return Decision(bad, good, open_)


def intersection_verdict(n: int, rounds: Sequence[Sequence[JobResult]]) -> list[int]:
    """The hand method's decoding: units that were in a failing job in every round."""
    flagged = set(range(n))
    for jobs in rounds:
        failing = {u for o in jobs if o.failed for u in o.units}
        flagged &= failing
    return sorted(flagged)

"""Decoding: Bayes on cases small enough to check by hand or by brute force."""

from __future__ import annotations

import itertools
import math
import random

import numpy as np
import pytest

from forensics.bisect.decode import NoiseModel, JobResult, decide, exact_candidates, intersection_verdict, posteriors


def brute_force(n, obs, noise):
    """Independent enumeration of all 2^n bad sets."""
    prior = noise.prior_for(n)
    marg = np.zeros(n)
    total = 0.0
    for bits in itertools.product([0, 1], repeat=n):
        w = math.prod(prior if b else 1 - prior for b in bits)
        for o in obs:
            has_bad = any(bits[u] for u in o.units)
            p_fail = 1 - noise.miss if has_bad else noise.flake
            w *= p_fail if o.failed else 1 - p_fail
        total += w
        marg += np.array(bits) * w
    return marg / total


def test_one_failed_job_by_hand():
    # prior 0.5, P(fail|bad) = 0.8, P(fail|good) = 0.1: 0.4 / (0.4 + 0.05) = 8/9
    q = posteriors(1, [JobResult([0], True)], NoiseModel(flake=0.1, miss=0.2, prior=0.5))
    assert q[0] == pytest.approx(8 / 9)


def test_two_hosts_one_failed_job_then_one_passes():
    noise = NoiseModel(flake=0.1, miss=0.2, prior=0.5)
    obs = [JobResult([0, 1], True), JobResult([0], False)]
    q = posteriors(2, obs, noise)
    # by hand: weights of (b0, b1): (0,0) .25*.1*.9, (1,0) .25*.8*.2, (0,1) .25*.8*.9, (1,1) .25*.8*.2
    w = {(0, 0): .1 * .9, (1, 0): .8 * .2, (0, 1): .8 * .9, (1, 1): .8 * .2}
    total = sum(w.values())
    assert q[0] == pytest.approx((w[1, 0] + w[1, 1]) / total)
    assert q[1] == pytest.approx((w[0, 1] + w[1, 1]) / total)


def test_exact_matches_brute_force_on_random_designs():
    rng = random.Random(5)
    noise = NoiseModel(flake=0.05, miss=0.03, prior=0.2)
    for _ in range(5):
        n = 7
        obs = [JobResult(rng.sample(range(n), rng.randint(1, 4)), rng.random() < 0.5) for _ in range(6)]
        want = brute_force(n, obs, noise)
        got = exact_candidates(list(range(n)), np.zeros(n), obs, noise, n, max_bad=n)
        assert np.allclose(got, want)


def test_grid_of_48_with_one_bad_host_convicts_it_alone():
    from forensics.bisect.designs import grid_partitions

    rows, cols = grid_partitions(48)
    obs = [JobResult(g, 13 in g) for g in rows + cols]
    q = posteriors(48, obs, NoiseModel(flake=0.001, miss=0.001))
    d = decide(q, 0.99)
    assert d.bad == [13] and d.undecided == []


def test_two_bad_in_a_grid_leave_four_open_and_hand_method_convicts_all_four():
    from forensics.bisect.designs import grid_partitions

    rows, cols = grid_partitions(48)
    bad = {13, 30}  # rows 1 and 3, columns 5 and 6
    obs = [JobResult(g, bool(bad & set(g))) for g in rows + cols]
    q = posteriors(48, obs, NoiseModel(flake=0.02, miss=0.01))
    d = decide(q, 0.99)
    assert sorted(np.argsort(-q)[:4]) == [13, 14, 29, 30] and d.bad == []
    assert set(d.undecided) >= {13, 14, 29, 30}
    assert all(0.3 < q[i] < 0.7 for i in (13, 14, 29, 30))  # truly ambiguous: needs another round
    assert intersection_verdict(48, [obs[:6], obs[6:]]) == [13, 14, 29, 30]


def test_clearing_is_family_wise():
    q = [0.001] * 100
    assert decide(q, 0.99).undecided == list(range(100))  # 100 x 0.001 is not < 1%
    assert decide([0.00001] * 100, 0.99).good == list(range(100))

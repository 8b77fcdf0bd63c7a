"""The typed summaries of the scale path (parsers/model/summaries.py): the one merge's laws, over seeded random
host digests (hypothesis is no dependency of the project): associative, commutative, idempotent for duplicates;
the encoding read back equal; a class summary from elsewhere checked field by field with bounds."""

from __future__ import annotations

import json
import random

import pytest

from parsers.model.ranksets import MAX_RANGES, count, of_ranks
from parsers.model.summaries import (MAX_CLASSES, MAX_HOSTS, MAX_POSITIONS, ClassSummary, Position, RankSummary,
                                   SummaryError, merge, merge_all, of_host, p2p_calls, p2p_key)

KINDS = [("collective", "allreduce", None), ("collective", "broadcast", None), ("elsewhere", None, "train.py:47"),
         ("gpu-wait", None, None)]


def _summary(rng: random.Random, rank: int | None, pid: int) -> RankSummary:
    kind, op, where = rng.choice(KINDS)
    comms = tuple((c, Position("allreduce", rng.choice([10, 11, 11, 11]), "opCount", "enqueued"))
                  for c in rng.sample(["0xa", "0xb", "0xc"], rng.randint(0, 2)))
    # a recorder communicator 'r' of every rank: comm rank = job rank (a consistent map, as real ranks give)
    recorder = (("r", rank, rank),) if rank is not None and rng.random() < 0.7 else ()
    waits_on = (("r", rng.randrange(4)),) if recorder and rng.random() < 0.5 else ()
    # a blocking send or recv with a peer py-spy --locals kept: most a ring's neighbour, some a wrong peer
    peer = rng.choice([rank + 1, rank + 1, rank - 1, rng.randrange(48)]) if rank is not None else -1
    p2p = (rng.choice(["send", "recv"]), peer) if 0 <= peer != rank and rng.random() < 0.4 else None
    return RankSummary(rank, pid, rng.choice(["S", "S", "R", "T"]), kind, op, where, (f"f{rng.randrange(3)}",), comms,
                       (("0x1", rng.randrange(4), "RecvWait", rng.choice([None, 3])),) if rng.random() < 0.2 else (),
                       rng.choice([None, None, "RuntimeError: x"]), ((1, 2.5),) if rng.random() < 0.1 else (),
                       tuple(rng.sample(["frozen", "exited", "error"], rng.randint(0, 1))), recorder, waits_on, p2p)


def _host(rng: random.Random, h: int) -> ClassSummary:
    """A host of up to 8 ranks from a small universe (two hosts may claim one rank), at times a process of
    unknown rank, at times a host finding."""
    ranks = rng.sample(range(48), rng.randint(0, 8))
    rows = [_summary(rng, r, 1000 + r) for r in ranks]
    if rng.random() < 0.2:
        rows.append(_summary(rng, None, 77 + h))
    if rng.random() < 0.2 and ranks:
        rows.append(_summary(rng, ranks[0], 5000 + h))  # a second process of this host claims one of its ranks
    findings = [{"rank": rng.choice(ranks + [None]), "reason_class": "host-fault", "reason": "xid 79"}] \
        if rng.random() < 0.2 else []
    return of_host(f"node{h:03d}", rows, findings)


@pytest.mark.parametrize("seed", range(40))
def test_the_merge_is_associative_commutative_and_idempotent(seed):
    rng = random.Random(seed)
    a, b, c = (merge_all(_host(rng, rng.randrange(12)) for _ in range(rng.randint(0, 3))) for _ in range(3))
    assert merge(a, merge(b, c)) == merge(merge(a, b), c)
    assert merge(a, b) == merge(b, a)
    assert merge(a, a) == a and merge(a, ClassSummary()) == a
    assert merge(a, merge(a, b)) == merge(a, b)  # a host's digest that reaches the root twice counts once
    parts = [_host(rng, h) for h in range(12)]
    flat = merge_all(parts)
    shuffled = parts[:]
    rng.shuffle(shuffled)
    cuts = [0, *sorted(rng.sample(range(1, 12), 3)), 12]
    gateways = [merge_all(shuffled[lo:hi + rng.randint(0, 2)]) for lo, hi in zip(cuts, cuts[1:])]  # some overlap
    assert merge_all(gateways) == flat == merge_all([*parts, *parts[:4]])


@pytest.mark.parametrize("seed", range(10))
def test_the_encoding_is_read_back_equal(seed):
    rng = random.Random(100 + seed)
    s = merge_all(_host(rng, h) for h in range(8))
    assert ClassSummary.from_json(json.loads(json.dumps(s.to_json()))) == s
    for row in (_summary(rng, rng.randrange(9), 1), _summary(rng, None, 2)):
        assert RankSummary.from_json(json.loads(json.dumps(row.to_json()))) == row


def test_counts_and_conflicts_are_derived_from_the_rank_sets():
    one = RankSummary(3, 103, "S", "collective", "allreduce")
    a = of_host("a", [one, RankSummary(4, 104, "S"), RankSummary(4, 204, "S")])
    b = of_host("b", [RankSummary(3, 999, "S")])
    both = merge(a, b)
    assert (both.hosts, both.ranks) == (2, 2) == (merge(both, b).hosts, merge(both, b).ranks)
    assert both.conflicts == {3: ["a", "b"], 4: ["a pid 104", "a pid 204"]}
    assert both.stacks[one.stack_key].top == () and count(both.stacks[one.stack_key].ranks) == 1
    assert merge(both, of_host("c", [])).hosts == 3  # a host whose digest summarised no rank still answered


def test_caps_keep_the_same_part_in_any_tree_and_say_so():
    rng = random.Random(7)
    parts = [of_host(f"h{h}", [RankSummary(h, h, "S", "elsewhere", None, f"f{h}")]) for h in range(MAX_CLASSES + 40)]
    flat = merge_all(parts)
    rng.shuffle(parts)
    assert flat.lossy and len(flat.stacks) == MAX_CLASSES and merge_all(parts) == flat
    scattered = of_host("s", [RankSummary(2 * r, r, "S") for r in range(MAX_RANGES + 5)])
    assert scattered.lossy and len(scattered.states["S"]) == MAX_RANGES


@pytest.mark.parametrize("change, why", [
    ({"version": 4}, "version '4'"),  # before `p2p`: its stack peers would be lost unsaid
    ({"version": 5}, "version '5'"),  # before `host_runs`: the hosts of its runs would be lost unsaid
    ({"host_runs": [["zz", 1, 0, 10, 0, 8]]}, "host_runs"),  # a number wider than its digits
    ({"host_runs": [["zz", 3, 0, 999, 1 << 30, 1 << 22]]}, "host_runs"),  # ranks past 2^31
    ({"host_runs": [["zz", 9, 0, MAX_HOSTS, 0, 1]]}, "more hosts than"),  # a huge fleet in one run
    ({"host_runs": [["zz", 1, 0, 1, 0, 8], ["zz", 1, 1, 2, 8, 8]]}, "named twice"),
    ({"host_runs": [["zz", True, 0, 1, 0, 8]]}, "host_runs"),
    ({"p2p": {"send+1": [[3, 2]]}}, "p2p"),
    ({"p2p": {"sendto3": [[0, 1]]}}, "key 'sendto3'"),
    ({"p2p": {"recv+99999999999": [[0, 1]]}}, "key 'recv"),  # a distance past any rank
    ({"p2p": {f"send+{i}": [[0, 0]] for i in range(MAX_POSITIONS + 1)}}, "over the 64"),
    ({"lossy": "no"}, "lossy"),
    ({"host_ranks": {"a": [[5, 3]]}}, "host_ranks"),  # wrong ranks: not a rank set
    ({"host_ranks": {"a": [[0, 1 << 40]]}}, "host_ranks"),  # a huge count of ranks
    ({"states": {"S": [[0, 3], [2, 9]]}}, "states"),  # overlapping ranges
    ({"stacks": {f"k{i}": {"ranks": []} for i in range(MAX_CLASSES + 1)}}, "over the 256"),
    ({"comms": {"c": {"p": [[[[[0, 1]]]]]}}}, "comms"),  # nesting deeper than the shape
    ({"edges": [{"rank": 1, "host": "a", "wait": ["0x1", 2, "RecvWait", 10 ** 30]}]}, "seq"),
    ({"host_findings": [{"rank": -4, "reason": "forged"}]}, "rank '-4' is not a rank"),
    ({"unranked": [{"host": "a"}]}, "pid 'None' is not a pid"),
])
def test_a_hostile_class_summary_is_refused_with_its_reason(change, why):
    good = merge_all(_host(random.Random(3), h) for h in range(4)).to_json()
    with pytest.raises(SummaryError, match=why):
        ClassSummary.from_json(dict(good, **change))


def test_a_rank_set_is_canonical():
    assert of_ranks([5, 3, 4, 9, 3]) == [[3, 5], [9, 9]]


def test_a_blocking_send_or_recv_is_kept_by_kind_and_distance():
    """A ring's sends to the next rank are one key at any size; a wrong peer's is a key of its own; the ranks and
    peers come back as the summaries said them (`p2p_calls`), bounded."""
    ring = [RankSummary(r, 100 + r, "S", p2p=("send", (r + 1) % 6)) for r in range(6)]
    wrong = RankSummary(7, 107, "S", p2p=("recv", 2))
    got = merge(of_host("a", ring[:3]), of_host("b", [*ring[3:], wrong]))
    assert got.p2p == {"send+1": [[0, 4]], "send-5": [[5, 5]], "recv-5": [[7, 7]]}
    assert p2p_key(7, ("recv", 2)) == "recv-5"
    said = [(r, ("send", (r + 1) % 6)) for r in range(6)] + [(7, ("recv", 2))]
    assert sorted(p2p_calls(got.p2p, 100)) == sorted(said)
    assert len(list(p2p_calls(got.p2p, 3))) == 3


@pytest.mark.parametrize("p2p, world, why", [
    (["send", 9], 8, "peer 9 of rank 3 is no other rank of the job's 8"),  # a peer outside [0, world)
    (["send", 3], None, "peer 3 of rank 3"),  # itself
    (["recv", 1 << 40], None, "is not \\[send\\|recv, peer rank\\]"),  # a huge count
    (["recv", -1], None, "not \\[send"), (["recv", True], None, "not \\[send"), (["bcast", 1], None, "not \\[send"),
    (["send", 1, 2], None, "not \\[send"), ("send 1", None, "not \\[send"),
])
def test_a_hostile_p2p_op_is_refused_with_its_reason(p2p, world, why):
    doc = RankSummary(3, 103, "S").to_json()
    assert RankSummary.from_json(dict(doc, p2p=["send", 1]), 8).p2p == ("send", 1)
    with pytest.raises(SummaryError, match=why):
        RankSummary.from_json(dict(doc, p2p=p2p), world)

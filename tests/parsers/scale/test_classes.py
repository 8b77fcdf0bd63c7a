"""Judging a merged digest over its classes (parsers.scale.classes): the odd ones out of a job of any
size, each class judged once; the verdict's equality with a full read is in test_digest.py."""

from __future__ import annotations

from parsers.scale import classes as digest_classes, focus as digest_focus, merge as digest_merge
from parsers.scale.classes import judge_classes
from parsers.scale.merge import difference, ranks_of


def _host(h: int, per: int = 8, odd: dict | None = None) -> dict:
    """Rank summaries of one host as parsers.scale.digest.rank_summary writes them; `odd`: rank -> changes."""
    rows = []
    for r in range(h * per, h * per + per):
        row = {"rank": r, "pid": 1000 + r, "state": "S",
               "stack": {"kind": "collective", "op": "allreduce", "where": "train.py:80"},
               "top": ["all_reduce (c10d.py:3252)"], "comms": {"0xabc": ["allreduce", 11, "opCount", "enqueued"]},
               "recorder_waits": [], "exception": None, "exits": [], "flags": []}
        row.update((odd or {}).get(r, {}))
        rows.append(row)
    return {"host": f"node{h:05d}", "ranks": rows, "host_findings": []}


def test_a_class_of_twelve_thousand_is_judged_once():
    late = {"stack": {"kind": "elsewhere", "op": None, "where": "train.py:47"},
            "comms": {"0xabc": ["allreduce", 10, "opCount", "enqueued"]}}
    hosts = [_host(h, odd={9001: late, 5: {"flags": ["frozen"]}} if h in (0, 1125) else None) for h in range(1500)]
    merged = digest_merge.merge_all(digest_merge.from_document(d) for d in hosts)
    judged = judge_classes(merged)
    assert judged.complete and judged.ranks_covered == 12_000
    assert list(ranks_of(judged.ranks)) == [5, 9001]
    # one flag, two stack classes, two positions: five judgements for 12,000 ranks
    assert judged.judged == 5


def test_recorder_peers_waited_on_are_odd():
    """Ranks 1-7 wait on comm rank 0 in the recorder; rank 0 waits on no one: it is the one read raw."""
    odd = {r: {"recorder": [["abc", r, r]], "waits_on": [["abc", 0]] if r else []} for r in range(8)}
    merged = digest_merge.merge_all([digest_merge.from_document(_host(0, odd=odd))])
    assert merged.members == {"abc": [[0, 7, 0]]}
    judged = judge_classes(merged)
    assert judged.complete and list(ranks_of(judged.ranks)) == [0]


def test_a_chain_of_waits_through_ten_thousand_ranks_stays_whole():
    """Every rank of a 10,000-rank communicator waits on its lower neighbour in the recorder, each its own edge, except
    rank 3333, which waits on none (the end of the chain). Keyed by peer, the waits were 10,000 keys: over the merged
    digest's caps, so the classes were not the whole job and analysis read every rank. Keyed by distance they are
    one: the judgement is complete and the end of the chain is the one odd rank; the focus reads its host and the
    host of a rank that waits on it, not every rank waited on."""
    odd = {r: {"recorder": [["abc", r, r]], "waits_on": [["abc", r - 1]] if r not in (0, 3333) else []}
           for r in range(10_000)}
    odd[0]["waits_on"] = [["abc", 9999]]
    merged = digest_merge.merge_all(digest_merge.from_document(_host(h, odd=odd)) for h in range(1250))
    assert not merged.lossy and set(merged.waits["abc"]) == {"-1", "+9999"}
    judged = judge_classes(merged)
    assert judged.complete and list(ranks_of(judged.ranks)) == [3333]
    host_of = {r: [f"node{r // 8:05d}"] for r in range(10_000)}
    assert {h for h, _ in digest_focus._waits(merged, host_of)} == {"node00416", "node00000"}


def test_a_few_waits_beside_a_class_of_healthy_ranks_keep_it_one_class():
    """Ranks 1-3 wait on comm rank 0 in the recorder; the other 11,996 ranks have recorder state, wait on none and
    nobody waits on them: one class. Where the waits end is rank 0 alone, as the recorder judge names it; counted
    as possibly waited on one by one, every healthy rank was odd (a replicated issue26/slow5: 1,030 of 1,032)."""
    odd = {r: {"recorder": [["abc", r, r]], "waits_on": [["abc", 0]] if r in (1, 2, 3) else []} for r in range(12_000)}
    merged = digest_merge.merge_all(digest_merge.from_document(_host(h, odd=odd)) for h in range(1500))
    assert merged.recorder_ranks == [[0, 11_999]]
    judged = judge_classes(merged)
    assert judged.complete and list(ranks_of(judged.ranks)) == [0]


def test_waits_into_a_cycle_read_the_cycle_and_a_ring_is_read_whole():
    """10,000 ranks each wait on their lower neighbour, and ranks 0 and 1 on each other: no wait ends (every rank
    waited on waits), so no class rule makes a rank odd, and the focus reads where the waits go, the sink cycle
    {0, 1} (the verdict's deadlock), with a few waiters of each and one of each kind of wait: one host, not every
    host waited on (a replicated i39/sendsend-seed39 read 130 of 130). A ring through the job (each rank waits on
    the next, the last on the first) is one cycle of every rank: read whole."""
    chain = {r: {"recorder": [["abc", r, r]], "waits_on": [["abc", r - 1 if r else 1]]} for r in range(10_000)}
    merged = digest_merge.merge_all(digest_merge.from_document(_host(h, odd=chain)) for h in range(1250))
    assert set(merged.waits["abc"]) == {"-1", "+1"}
    assert judge_classes(merged).complete and judge_classes(merged).ranks == []
    host_of = {r: [f"node{r // 8:05d}"] for r in range(10_000)}
    assert {h for h, _ in digest_focus._waits(merged, host_of)} == {"node00000"}
    ring = {r: {"recorder": [["abc", r, r]], "waits_on": [["abc", (r + 1) % 10_000]]} for r in range(10_000)}
    merged = digest_merge.merge_all(digest_merge.from_document(_host(h, odd=ring)) for h in range(1250))
    assert len({h for h, _ in digest_focus._waits(merged, host_of)}) == 1250


def test_a_rank_without_recorder_state_is_odd_when_others_wait():
    """Ranks 8-15 are comm 'abc' (comm rank r = job rank 8 + r); rank 9 left no recorder state and its peers wait
    on it: the recorder judge names it ('no recorder state while its peers wait on it'). Which job rank comm rank
    1 is, only ranks with state say; so every rank without state is odd while others wait (host 0's ranks, with
    no recorder at all, too)."""
    odd = {8 + r: {"recorder": [["abc", r, 8 + r]] if r != 1 else [], "waits_on": [["abc", 1]] if r != 1 else []}
           for r in range(8)}
    hosts = [digest_merge.from_document(_host(0)), digest_merge.from_document(_host(1, odd=odd))]
    merged = digest_merge.merge_all(hosts)
    judged = judge_classes(merged)
    assert judged.complete and list(ranks_of(judged.ranks)) == [0, 1, 2, 3, 4, 5, 6, 7, 9]


def test_host_findings_and_unknown_ranks():
    doc = _host(0)
    doc["ranks"].append({"rank": None, "pid": 77, "state": "S"})
    doc["host_findings"] = [{"rank": 3, "host": "node00000", "reason_class": "host-fault", "reason": "x"}]
    judged = judge_classes(digest_merge.from_document(doc))
    assert list(ranks_of(judged.ranks)) == [3] and judged.hosts == {"node00000"}
    assert judged.processes == {("node00000", 77)}


def test_what_the_caps_dropped_makes_it_incomplete():
    hosts = [_host(h, odd={h * 8: {"stack": {"kind": "elsewhere", "op": None, "where": f"f{h}"}}}) for h in range(300)]
    merged = digest_merge.merge_all(digest_merge.from_document(d) for d in hosts)
    assert merged.lossy  # more stack classes than MAX_CLASSES
    judged = judge_classes(merged)
    assert not judged.complete and "caps" in judged.why_not


def test_difference():
    assert difference([[0, 10], [20, 30]], [[2, 3], [5, 5], [9, 21], [30, 40]]) == [[0, 1], [4, 4], [6, 8], [22, 29]]
    assert difference([[0, 4]], []) == [[0, 4]] and difference([], [[0, 4]]) == []
    assert digest_classes.count(difference([[0, 99_999]], [[0, 99_999]])) == 0


def test_flags_from_a_host_are_bounded_to_known_names():
    """A host may send any flag names (hostile, or a newer tool): each is an oddity, under a bounded set of names."""
    odd = {r: {"flags": [f"made-up-{r}-{i}" for i in range(4)]} for r in range(8)}
    merged = digest_merge.from_document(_host(0, odd=odd))
    assert set(merged.flags) == {"other"} and merged.flags["other"] == [[0, 7]]
    assert list(ranks_of(judge_classes(merged).ranks)) == list(range(8))


# each rule stated once (the odd-ones-out rules with the judges' own): tests/parsers/model/test_rules_once.py


def test_the_stack_peer_waits_are_odd_and_a_flowing_pipeline_is_not():
    """py-spy --locals' peers, kept in each rank's summary: a pipeline whose every send is being received (each
    even host's ranks send to the next host's, which receive) makes no rank odd, at 12,000 ranks in two keys; a
    wrong peer (rank 3 receives from 2, which sends to 4, which receives from 3, while 5 sends to 3) makes both
    ends of every wait odd, as the p2p judge reads them (parsers.judges.p2p_stacks): the cycle, the rank posting
    toward it, and the ranks of the next host left waiting on them; no other rank."""
    flow = {r: {"p2p": ["send", r + 8] if r // 8 % 2 == 0 else ["recv", r - 8]} for r in range(12_000)}
    merged = digest_merge.merge_all(digest_merge.from_document(_host(h, odd=flow)) for h in range(1500))
    assert sorted(merged.p2p) == ["recv-8", "send+8"]
    judged = judge_classes(merged)
    assert judged.complete and judged.ranks == []
    wrong = {**flow, 2: {"p2p": ["send", 4]}, 3: {"p2p": ["recv", 2]}, 4: {"p2p": ["recv", 3]},
             5: {"p2p": ["send", 3]}}
    merged = digest_merge.merge_all(digest_merge.from_document(_host(h, odd=wrong)) for h in range(1500))
    judged = judge_classes(merged)
    assert judged.complete and list(ranks_of(judged.ranks)) == [2, 3, 4, 5, 10, 11, 12, 13]

"""Merged digests (issue 30 item 2): stack classes with rank ranges, position histograms, edges kept;
any tree shape gives the same root; the fleet's merge writes one from its hosts' digests."""

from __future__ import annotations

import json

import pytest

from hf_testpaths import FIXTURES
from host_digests import with_digests
from parsers import knowledge
from parsers.scale import merge as digest_merge
from parsers.scale.digest_first import digest_host
from parsers.model.summaries import SummaryError
from parsers.gather.source import open_source
from forensics.bundle.merged_digest import MERGED_DIGEST
from forensics.bundle.merge import HostPart, merge_bundles

KB = knowledge.load(use_env=False)


def _host_doc(bundle):
    with open_source(bundle) as src:
        return digest_host(src, src.manifest.hosts[0].host, KB)


def _fake_host(host: str, ranks: range, late: int | None = None) -> dict:
    """A host digest's rank summaries as rank_summary writes them (the digest of one real host is used below)."""
    rows = []
    for r in ranks:
        seq = 10 if r == late else 11
        stack = ({"kind": "elsewhere", "op": None, "where": "train.py:47"} if r == late
                 else {"kind": "collective", "op": "allreduce", "where": None})
        rows.append({"rank": r, "pid": 100 + r, "state": "S", "stack": stack,
                     "top": ["slow (train.py:47)"] if r == late else ["all_reduce (c10d.py:3252)"],
                     "comms": {"0xabc": ["allreduce", seq, "opCount", "enqueued"]}, "recorder_waits": [],
                     "exception": None, "exits": []})
    return {"host": host, "ranks": rows, "host_findings": []}


def test_classes_ranges_and_outliers():
    hosts = [digest_merge.from_document(_fake_host(f"n{h}", range(h * 8, h * 8 + 8), late=13)) for h in range(512)]
    root = digest_merge.merge_all(hosts)
    assert root.ranks == 4096 and root.hosts == 512
    lines = digest_merge.stack_classes(root)  # the classes rows (stacks.class_rows), largest first, a line each
    assert [line.split(": ", 1)[0] for line in lines] == ["4095 rank(s) 0-12,14-4095", "1 rank(s) 13"]
    assert "allreduce" in lines[0] and lines[1].endswith("train.py:47")
    assert digest_merge.outliers(root) == {"0xabc": ["allreduce@10: ranks 13"]}
    doc = root.to_json()
    # 4,096 ranks in a few kB: the classes' size follows the variety, not the count; which ranks each host
    # speaks for (what makes the merge idempotent, and a rank two hosts claim a conflict) is a run of numbered
    # hosts with a block of ranks each, one run a width of number here (n0-n9, n10-n99, n100-n511)
    assert len(json.dumps(doc)) < 4000 and doc["host_ranks"] == {}
    assert doc["host_runs"] == [["n", 1, 0, 9, 0, 8], ["n", 2, 10, 99, 80, 8], ["n", 3, 100, 511, 800, 8]]
    assert digest_merge.ClassSummary.from_json(json.loads(json.dumps(doc))) == root


def test_hosts_out_of_runs_keep_their_own_entry():
    """A host of ranks that are no block after its neighbour's, or of no number, is written by itself; a rank two
    hosts claim is still a conflict after the round trip."""
    parts = [digest_merge.from_document(_fake_host(f"node{h:03d}", range(h * 8, h * 8 + 8))) for h in range(4)]
    parts += [digest_merge.from_document(_fake_host("node004", [40, 42])),
              digest_merge.from_document(_fake_host("login", [3]))]
    doc = digest_merge.merge_all(parts).to_json()
    assert doc["host_runs"] == [["node", 3, 0, 3, 0, 8]] and doc["host_ranks"] == {
        "login": [[3, 3]], "node004": [[40, 40], [42, 42]]}
    assert digest_merge.ClassSummary.from_json(doc).conflicts == {3: ["login", "node000"]}


def test_any_tree_shape_gives_the_same_root():
    parts = [digest_merge.from_document(_fake_host(f"n{h}", range(h * 8, h * 8 + 8), late=37 if h == 4 else None))
             for h in range(16)]
    flat = digest_merge.merge_all(parts)
    gateways = [digest_merge.merge_all(parts[i:i + 4]) for i in range(0, 16, 4)]
    tree = digest_merge.merge_all(reversed(gateways))
    assert tree == flat


def test_real_host_digest_merges(tmp_path):
    """The digest of a real 8-rank hang (one rank sleeping) folds to two stack classes and one outlier."""
    doc = _host_doc(FIXTURES / "nccl" / "sleep" / "bundle")
    merged = digest_merge.from_document(doc)
    assert merged.ranks == len(doc["ranks"]) >= 8
    classes = digest_merge.stack_classes(merged)
    assert len(classes) >= 2 and classes[0].startswith(f"{len(doc['ranks']) - 1} rank(s)")


@pytest.mark.parametrize("row, why", [
    (None, "a rank summary that is a NoneType"),
    ({"rank": "x", "pid": 1}, "rank 'x' is not a rank"),
    ({"rank": -1, "pid": 1}, "rank '-1' is not a rank"),
    ({"rank": 3, "pid": 1, "stack": "x"}, "stack: not a mapping"),
    ({"rank": 3, "pid": 1, "top": "no"}, "top: not a list"),
    ({"rank": 3, "pid": 1, "comms": {"c": "bad"}}, "comms 'c'"),
    ({"rank": 3, "pid": 1, "comms": {"c": ["allreduce", 10 ** 30, "opCount", "x"]}}, "seq: .* not a 64-bit number"),
])
def test_a_hostile_summary_is_refused_with_its_reason(row, why):
    doc = {"host": "n5", "ranks": [{"rank": 0, "pid": 1}, row], "host_findings": ["x", {"rank": []}]}
    with pytest.raises(SummaryError, match=why):
        digest_merge.from_document(doc)


def test_fleet_merge_writes_the_merged_digest(tmp_path):
    parts = []
    for name in ("a", "b"):
        parts.append(HostPart(host=name, bundle=with_digests(FIXTURES / "gloo14" / "busy" / "live", tmp_path / name)))
    man = merge_bundles(tmp_path / "job", parts)
    merged = digest_merge.check_merged(json.loads((tmp_path / "job" / MERGED_DIGEST).read_text()))
    ranks = {r.rank for r in man.ranks}
    # the same fixture filed as two hosts: each of its ranks is claimed by both, a conflict with both sources
    assert merged.hosts == 2 and merged.ranks == len(ranks) and len(man.ranks) == 2 * len(ranks)
    assert merged.conflicts == {r: ["a", "b"] for r in sorted(ranks)}
    assert not any("digest" in n for n in man.notes)

"""A host's digest speaks for its own processes only (issue 40 item 3): summaries of other ranks are left out,
a digest with far more summaries than its host's processes is refused unread (its raw files are read), a NaN or
Infinity is no number, and the verdict about the other ranks is unchanged. Bundles built here."""

from __future__ import annotations

import json

import pytest

from benchmarks.bundle_scale import write_bundle
from benchmarks.fleet_lies import claim_all, stop_rank, write_digests
from parsers import knowledge
from parsers.gather.source import open_source
from parsers.scale.digest import DIGEST_NAME, DigestError, StatedJob, read_digest, read_summaries
from forensics.report.words import analyze

KB = knowledge.load(use_env=False)


@pytest.fixture(scope="module")
def bundle(tmp_path_factory):
    root = tmp_path_factory.mktemp("own")
    write_bundle(root, 64, 8, 13)
    stop_rank(root, 13)
    write_digests(root, KB)
    return root


def _key(v):
    c = v.culprit
    return (c.rank, c.host, str(c.reason_class)) if c else None


def test_summaries_of_other_processes_are_left_out(bundle):
    path = bundle / "hosts/node00002" / DIGEST_NAME
    saved = path.read_bytes()
    try:
        claim_all(bundle, "hosts/node00002", 40, state="T")  # 40 ranks of other hosts, each 'stopped'
        dig = read_digest(path, {10016 + i: 16 + i for i in range(8)})
        assert dig.foreign == 40 and len(dig.ranks) == 8
        assert {r.rank for r in dig.ranks} == set(range(16, 24))
        v = analyze(bundle, KB).verdict
        assert _key(v) == (13, "node00001", "stopped") == _key(analyze(bundle, KB, digests=False).verdict)
        assert any("node00002: 40 " in n for n in v.sections["digests"]["notes"])
    finally:
        path.write_bytes(saved)


def test_a_digest_claiming_every_rank_is_refused_unread(bundle):
    """200,000 summaries (36 MB, under the 64 MiB cap): refused on their count, that host read raw."""
    path = bundle / "hosts/node00003" / DIGEST_NAME
    saved = path.read_bytes()
    try:
        claim_all(bundle, "hosts/node00003", 200_000)
        own = {10024 + i: 24 + i for i in range(8)}
        with pytest.raises(DigestError, match="bytes for the 8 processes"):  # refused on its size, not parsed
            read_digest(path, own)
        path.write_bytes(saved)
        claim_all(bundle, "hosts/node00003", 100)
        with pytest.raises(DigestError, match="108 rank summaries for the 8 processes"):  # refused on its count
            read_digest(path, own)
        v = analyze(bundle, KB).verdict
        assert _key(v) == (13, "node00001", "stopped")
        assert any("node00003 unusable" in n for n in v.sections["digests"]["notes"])
    finally:
        path.write_bytes(saved)


def test_the_summaries_are_read_up_to_the_files_and_a_digest_of_another_order_whole(bundle, tmp_path):
    """The merge of the classes reads a digest up to its files' evidence (written last); what it gets is the whole
    read's rank summaries and findings. A digest with its files first, or a head that names 'files' inside a host
    finding (a lie: the head then does not parse alone), is read whole, and says the same."""
    path = bundle / "hosts/node00002" / DIGEST_NAME
    own = {10016 + i: 16 + i for i in range(8)}
    whole = read_digest(path, own)
    doc = json.loads(path.read_bytes())
    assert list(doc)[-1] == "files" and whole.files
    head = read_summaries(path, own)
    assert head.files == {}
    assert (head.ranks, head.host_findings, head.kb) == (whole.ranks, whole.host_findings, whole.kb)
    moved = tmp_path / DIGEST_NAME
    moved.write_text(json.dumps({"files": doc["files"], **doc}, separators=(",", ":")))
    assert read_summaries(moved, own).files == whole.files
    lie = dict(doc, host_findings=[{"rank": 3, "reason_class": "x", "reason": "y", "files": {"a": 1}}])
    moved.write_text(json.dumps(lie, separators=(",", ":")))
    got = read_summaries(moved, own)
    assert got.files == whole.files and got.host_findings == lie["host_findings"]


@pytest.mark.parametrize("value", ["Infinity", "NaN", "-Infinity"])
def test_a_non_finite_number_is_refused(bundle, tmp_path, value):
    doc = (bundle / "hosts/node00000" / DIGEST_NAME).read_text()
    bad = tmp_path / DIGEST_NAME
    bad.write_text(doc.replace('"created":', f'"world_size":{value},"created":', 1))
    with pytest.raises(DigestError, match="not JSON"):
        read_digest(bad)


def test_a_summary_with_fields_of_other_types_counts_for_nothing(bundle):
    path = bundle / "hosts/node00004" / DIGEST_NAME
    saved = path.read_bytes()
    try:
        doc = json.loads(saved)
        doc["ranks"] += [{"rank": [1], "pid": 10032}, {"rank": 2 ** 31 - 1, "pid": 10033}, {"rank": 33, "pid": {}},
                         {"rank": True, "pid": 10034}, "x", None]
        path.write_text(json.dumps(doc))
        dig = read_digest(path, {10032 + i: 32 + i for i in range(8)})
        assert dig.foreign == 6 and len(dig.ranks) == 8
        assert _key(analyze(bundle, KB).verdict) == (13, "node00001", "stopped")
    finally:
        path.write_bytes(saved)


def _deep(levels: int):
    out: list = []
    for _ in range(levels):
        out = [out]
    return out


@pytest.mark.parametrize("lie, why", [
    # its own rank 33 said to sit at a sequence number no counter reaches
    (lambda r: r["comms"].update(c=["allreduce", 10 ** 30, "opCount", "enqueued"]), "seq: .* not a 64-bit number"),
    (lambda r: r.update(top=_deep(60)), "rank summary|not JSON"),  # nesting deeper than any summary has
    (lambda r: r.update(flags=["frozen"] * 50), "flags: 50 items, over the 8"),  # a huge count
    (lambda r: r.update(stack="stopped"), "stack: not a mapping"),
])
def test_a_hostile_summary_of_its_own_rank_refuses_the_digest(bundle, lie, why):
    """Each is refused with its reason, that host's raw files are read, and the other hosts' evidence still gives
    the verdict (issue 43's hostile digests)."""
    path = bundle / "hosts/node00004" / DIGEST_NAME
    saved = path.read_bytes()
    try:
        doc = json.loads(saved)
        lie(next(r for r in doc["ranks"] if r["rank"] == 33))
        path.write_text(json.dumps(doc))
        with pytest.raises(DigestError, match=why):
            read_digest(path, {10032 + i: 32 + i for i in range(8)})
        v = analyze(bundle, KB).verdict
        assert _key(v) == (13, "node00001", "stopped")
        assert any("node00004" in n for n in v.sections["digests"]["notes"]), v.sections["digests"]["notes"]
    finally:
        path.write_bytes(saved)


def test_a_forged_culprit_counts_for_nothing(bundle):
    """Host node00004 says rank 5 (node00000's) is stopped and flags its own rank 33 stopped with no process state
    to show it: the first is not its to say (left out), the second is read raw, and the verdict is unchanged."""
    path = bundle / "hosts/node00004" / DIGEST_NAME
    saved = path.read_bytes()
    try:
        doc = json.loads(saved)
        own = next(r for r in doc["ranks"] if r["rank"] == 33)
        doc["ranks"].append(dict(own, rank=5, pid=10005, state="T", flags=["frozen"]))
        own.update(state="T", flags=["frozen"])
        doc["host_findings"] = [{"rank": 5, "reason_class": "stopped", "reason": "rank 5 is stopped"}]
        path.write_text(json.dumps(doc))
        dig = read_digest(path, {10032 + i: 32 + i for i in range(8)})
        assert dig.foreign == 1 and {r.rank for r in dig.ranks} == set(range(32, 40))
        assert _key(analyze(bundle, KB).verdict) == (13, "node00001", "stopped")
    finally:
        path.write_bytes(saved)


def test_what_the_manifest_says_of_the_job_bounds_each_hosts_digest(bundle):
    """`StatedJob`: each host's own processes (pid -> rank) and the job's size, from the manifest, as digest first and
    the focus check every host's digest by; a host the manifest gives no process speaks for none."""
    with open_source(bundle) as src:
        job = StatedJob.of(src.manifest)
    assert job.world == 64 and job.own("node00002") == {10016 + i: 16 + i for i in range(8)}
    assert job.own("no-such-host") == {} and len(job.processes) == 8
    dig = read_digest(bundle / "hosts/node00002" / DIGEST_NAME, job.own("node00002"), job.world)
    assert sorted(s.rank for s in dig.ranks) == list(range(16, 24))

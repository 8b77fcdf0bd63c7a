"""A host's digest speaks for its own processes only (issue 40 item 3): summaries of other ranks are left out,
a digest with far more summaries than its host's processes is refused unread (its raw files are read), a NaN or
Infinity is no number, and the verdict about the other ranks is unchanged. Bundles built here."""

from __future__ import annotations

import json

import pytest

from benchmarks.bundle_scale import write_bundle
from benchmarks.fleet_lies import claim_all, stop_rank, write_digests
from parsers import knowledge
from parsers.digest import DIGEST_NAME, DigestError, read_digest
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
        assert {r["rank"] for r in dig.ranks} == set(range(16, 24))
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

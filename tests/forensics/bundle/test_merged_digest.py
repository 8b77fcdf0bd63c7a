"""A bundle's merged digest (forensics.bundle.merged_digest): the one merge of its hosts' digests, which the fleet's
merge writes and a gateway's fallback (forensics.fleet.reduce.reduce_bundle) makes again, to the same bytes. A
digest that is there and refused is said with why, and the other hosts still merge; a digest speaks for its own
host's processes only; a host that sent nothing is no host without a digest."""

from __future__ import annotations

import json
from pathlib import Path

from hf_testpaths import FIXTURES
from host_digests import with_digests
from forensics.bundle.merge import HostPart, merge_bundles
from forensics.bundle.merged_digest import MERGED_DIGEST, write_merged_digest
from forensics.fleet.reduce import reduce_bundle
from parsers.scale.digest import DIGEST_NAME
from parsers.scale.merge import check_merged

SLEEP, BUSY = FIXTURES / "nccl" / "sleep" / "bundle", FIXTURES / "gloo14" / "busy" / "live"


def _digest(job: Path, host: str) -> Path:
    return next((job / "hosts" / host).rglob(DIGEST_NAME))


def _written(job: Path) -> bytes:
    return (job / MERGED_DIGEST).read_bytes()


def _reduced(job: Path) -> bytes:
    return json.dumps(reduce_bundle(job).to_json(), separators=(",", ":")).encode()


def test_a_bad_host_digest_is_refused_with_its_reason_and_the_others_still_merge(tmp_path):
    parts = [HostPart(host="h0", bundle=with_digests(SLEEP, tmp_path / "h0")),
             HostPart(host="h1", bundle=with_digests(BUSY, tmp_path / "h1"))]
    for p in (tmp_path / "h1").rglob(DIGEST_NAME):
        p.write_text("{")
    man = merge_bundles(tmp_path / "job", parts)
    said = [n for n in man.notes if "digest" in n]  # the host refused, and why, in the bundle's notes
    assert len(said) == 1 and "h1 (not JSON:" in said[0] and "h0" not in said[0]
    merged = check_merged(json.loads(_written(tmp_path / "job")))
    assert list(merged.host_ranks) == ["h0"] and merged.ranks == 8 and merged.without_digest == ("h1",)
    assert _reduced(tmp_path / "job") == _written(tmp_path / "job")  # the gateway's fallback: the same bytes


def test_a_digest_speaks_for_its_own_hosts_processes_only(tmp_path):
    """A summary of a process the manifest does not give its host counts for nothing in the bundle's merged digest
    (before, the fleet's merge took it as a rank of that host; the gateway's fallback did not)."""
    job = tmp_path / "job"
    man = merge_bundles(job, [HostPart(host=h, bundle=with_digests(BUSY, tmp_path / h)) for h in ("a", "b")])
    honest = _written(job)
    path = _digest(job, "a")
    doc = json.loads(path.read_text())
    files = doc.pop("files")
    doc["ranks"].insert(0, dict(doc["ranks"][0], pid=999_999, rank=77))  # a process host a does not have
    path.write_text(json.dumps(dict(doc, files=files)))  # its files last, as a host writes it
    assert write_merged_digest(job, man) is None
    assert _written(job) == honest and _reduced(job) == honest


def test_a_host_that_sent_nothing_is_no_host_without_a_digest(tmp_path):
    """A host that did not answer has no folder and no ranks: it is in the manifest's hosts with its error, not in
    `without_digest` (which makes the root judge every rank one by one), in the file and in the fallback alike."""
    parts = [HostPart(host="h0", bundle=with_digests(SLEEP, tmp_path / "h0")),
             HostPart(host="h2", bundle=None, status="timeout", error="host h2 did not answer in 20 s")]
    merge_bundles(tmp_path / "job", parts)
    assert check_merged(json.loads(_written(tmp_path / "job"))).without_digest == ()
    assert _reduced(tmp_path / "job") == _written(tmp_path / "job")

"""Merging per-host bundles written by the real BundleWriter into one job bundle."""

from __future__ import annotations

from pathlib import Path

from parsers.model.manifest import JobArtifact, CollectorRecord, HostRecord, MissingRank, RankRecord, Status
from forensics.bundle.merge import HostPart, merge_bundles
from forensics.bundle.reader import open_bundle
from forensics.bundle.writer import BundleWriter


def host_bundle(root: Path, real_name: str, ranks: list[int], world: int, missing: list[int] = ()) -> Path:
    writer = BundleWriter(root)
    writer.add_host(HostRecord(host=real_name, dir=writer.host_dir(real_name)))
    for rank in ranks:
        rel = writer.rank_dir(real_name, rank, 100 + rank)
        stack = writer.write_text(f"{rel}/pyspy.json", "[]\n")
        writer.add_rank(RankRecord(host=real_name, pid=100 + rank, dir=rel, rank=rank, world_size=world, job_id="j",
                                   collectors=[CollectorRecord("pyspy", Status.OK, files=[stack])]))
    for rank in missing:
        writer.add_missing(MissingRank(rank=rank, reason="no process", host=real_name, job_id="j"))
    writer.write_text("launcher.json", "{}\n")
    writer.add_artifact(JobArtifact(kind="launcher", path="launcher.json"))
    writer.note("a note")
    writer.save()
    return root


def test_merge_reroots_every_path_and_records_silent_hosts(tmp_path):
    a = host_bundle(tmp_path / "a", "vm", [0, 1], 6, missing=[2])  # both "hosts" call themselves vm
    b = host_bundle(tmp_path / "b", "vm", [2, 3], 6)
    parts = [
        HostPart("node1", a, seconds=1.0),
        HostPart("node2", b, seconds=1.5),
        HostPart("node3", None, status="timeout", error="host node3 did not answer in 20 s", seconds=20.0),
    ]
    merged = merge_bundles(tmp_path / "job", parts)
    bundle = open_bundle(tmp_path / "job")  # the lead's reader accepts it
    assert [(r.host, r.rank) for r in bundle.manifest.ranks] == [("node1", 0), ("node1", 1), ("node2", 2), ("node2", 3)]
    for rank in bundle.manifest.ranks:
        assert rank.dir == f"hosts/{rank.host}/rank{rank.rank}-pid{100 + rank.rank}"
        assert bundle.rank_files(rank, "pyspy")  # files exist where the manifest says
    hosts = {h.host: h for h in bundle.manifest.hosts}
    assert hosts["node3"].status == "timeout" and "20 s" in hosts["node3"].error

    assert {a.path for a in bundle.manifest.artifacts} == {"hosts/node1/_bundle/launcher.json",
                                                           "hosts/node2/_bundle/launcher.json"}
    assert all(bundle.path(a.path).is_file() for a in bundle.manifest.artifacts)
    # rank 2 was "missing" on node1 but node2 had it; ranks 4 and 5 nobody had, and node3 was silent
    assert [m.rank for m in merged.missing] == [4, 5]
    assert "not heard from: node3" in merged.missing[0].reason
    assert any("calls itself 'vm'" in n for n in merged.notes)
    assert not merged.complete
    assert (tmp_path / "job" / "hosts" / "node1" / "host-manifest.json").is_file()


def test_ranks_collected_elsewhere_are_not_missing(tmp_path):
    """The reduced tree's root files one host of a 100,000-rank job; the gateways hold every other rank but 7 and
    9-11: only those are missing, and the 99,990 held ranks are never listed (nor walked one by one)."""
    a = host_bundle(tmp_path / "a", "vm", [8], 100_000)
    held = [[0, 6], [12, 99_999]]
    merged = merge_bundles(tmp_path / "job", [HostPart("node1", a)], collected_elsewhere=held)
    assert [m.rank for m in merged.missing] == [7, 9, 10, 11]
    assert [m.rank for m in open_bundle(tmp_path / "job").manifest.missing] == [7, 9, 10, 11]
    # without it the same job lists every rank it did not see (capped), as before
    plain = merge_bundles(tmp_path / "job2", [HostPart("node1", host_bundle(tmp_path / "b", "vm", [8], 20))])
    assert [m.rank for m in plain.missing] == [r for r in range(20) if r != 8]

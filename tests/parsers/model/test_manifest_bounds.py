"""Item 3 of issue 16 (bundle side): counts and types from a manifest are checked before
use, and one bad host manifest in a fleet merge costs only that host."""

from __future__ import annotations

import json
import time

import pytest

from parsers.model.manifest import manifest_from_dict
from forensics.bundle.merge import HostPart, merge_bundles
from forensics.bundle.reader import open_bundle
from parsers.input.manifest_schema import MAX_WORLD, check_manifest
from tests.forensics.bundle.test_merge import host_bundle

BASE = {"format": "hang-forensics-bundle", "version": 1, "created": "2026-01-01", "tool_version": "x"}


def _rank(**over):
    return {"host": "h", "pid": 1, "dir": "hosts/h/rank0-pid1", "rank": 0, "world_size": 4, **over}


@pytest.mark.parametrize("bad, where", [
    ({"ranks": [_rank(world_size=10**12)]}, "ranks[0].world_size"),
    ({"ranks": [_rank(world_size=MAX_WORLD + 1)]}, "ranks[0].world_size"),
    ({"ranks": [_rank(rank=-1)]}, "ranks[0].rank"),
    ({"ranks": [_rank(pid="12")]}, "ranks[0].pid"),
    ({"ranks": [_rank(pid=True)]}, "ranks[0].pid"),
    ({"ranks": [_rank(cmdline="python")]}, "ranks[0].cmdline"),
    ({"ranks": [_rank(collectors=[{"name": "x", "status": "ok", "files": "abc"}])]}, "collectors[0].files"),
    ({"ranks": [_rank(collectors=[{"name": "x", "status": "ok", "seconds": float("nan")}])]}, "seconds"),
    ({"ranks": {"0": _rank()}}, "manifest.ranks"),
    ({"hosts": [{"host": 5}]}, "hosts[0].host"),
    ({"missing": [{"rank": 10**15, "reason": "x"}]}, "missing[0].rank"),
    ({"notes": [1]}, "notes[0]"),
    ({"interrupted": "yes"}, "interrupted"),
])
def test_bad_types_and_ranges_are_named(bad, where):
    data = {**BASE, **bad}
    start = time.monotonic()
    with pytest.raises(ValueError) as err:
        manifest_from_dict(data)
    assert where in str(err.value)
    assert time.monotonic() - start < 0.1


def test_good_manifest_passes_and_keeps_interrupted():
    man = manifest_from_dict({**BASE, "ranks": [_rank()], "interrupted": True})
    assert man.interrupted and not man.complete
    check_manifest({**BASE, "future_key": {"anything": 1}})  # unknown keys from newer writers are ignored


def test_one_bad_host_manifest_loses_no_other_host(tmp_path):
    good = host_bundle(tmp_path / "good", "vm", [0, 1], 4)
    bad = host_bundle(tmp_path / "bad", "vm", [2, 3], 4)
    data = json.loads((bad / "manifest.json").read_text())
    data["ranks"][0]["world_size"] = 3_000_000_000_000
    (bad / "manifest.json").write_text(json.dumps(data))
    garbage = tmp_path / "garbage"
    garbage.mkdir()
    (garbage / "manifest.json").write_text("{not json")
    parts = [HostPart("node1", good), HostPart("node2", bad), HostPart("node3", garbage)]
    merged = merge_bundles(tmp_path / "job", parts)
    bundle = open_bundle(tmp_path / "job")
    assert [(r.host, r.rank) for r in bundle.manifest.ranks] == [("node1", 0), ("node1", 1)]
    hosts = {h.host: h for h in bundle.manifest.hosts}
    assert hosts["node1"].status == "ok"
    assert hosts["node2"].status == "failed" and "world_size" in hosts["node2"].error
    assert hosts["node3"].status == "failed" and "corrupted manifest" in hosts["node3"].error
    assert [m.rank for m in merged.missing] == [2, 3]
    assert not merged.complete


def test_merge_caps_missing_ranks(tmp_path):
    big = host_bundle(tmp_path / "big", "vm", [0], MAX_WORLD)  # the largest world the schema allows
    start = time.monotonic()
    merged = merge_bundles(tmp_path / "job", [HostPart("node1", big)])
    assert len(merged.missing) <= 100_000 and any("have no process" in n for n in merged.notes)
    assert time.monotonic() - start < 30


# item 9: bisect --from-bundles refuses impossible confidences (real CLI, exit 2)

@pytest.mark.parametrize("raw", ["1e400", "NaN", "-0.5", "1.5", "\"high\"", "true", "Infinity"])
@pytest.mark.parametrize("place", ["culprit", "suspect"])
def test_bisect_refuses_bad_confidence(tmp_path, raw, place, capsys):
    from forensics.cli.main import main

    verdict = ('{"culprit": {"host": "n03", "confidence": %s}, "suspects": []}' % raw if place == "culprit"
               else '{"suspects": [{"host": "n03", "confidence": %s}]}' % raw)
    path = tmp_path / "v.json"
    path.write_text(verdict)
    marker = tmp_path / "ran"
    rc = main(["bisect", "--hosts", "n[01-04]", "--test", f"touch {marker}", "--from-bundles", str(path),
               "--quiet", "--state", str(tmp_path / "s.json")])
    err = capsys.readouterr().err
    assert rc == 2 and "confidence" in err and str(path) in err
    assert not marker.exists() and not (tmp_path / "s.json").exists()


def test_bisect_fifo_verdict_does_not_hang(tmp_path):
    import os

    from forensics.bisect import from_bundles

    fifo = tmp_path / "v.json"
    os.mkfifo(fifo)
    start = time.monotonic()
    imp = from_bundles.read_bundles([fifo])
    assert imp.problems and "FIFO" in imp.problems[0] and time.monotonic() - start < 1

"""Tree mode's reduction (forensics.fleet.reduce): each gateway folds its hosts' digests into one merged
digest, run as the gateway runs it (a real `python -m forensics.fleet.reduce` process); the root merges the
gateways' answers to the same merged digest, and the same class judgement, as one flat merge of every host."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from hf_testpaths import FIXTURES
from host_digests import with_digests
from forensics.bundle.merge import HostPart, merge_bundles
from forensics.fleet.reduce import merge_answers, read_answer
from parsers.scale import merge as digest_merge
from parsers.scale.digest import DIGEST_NAME
from parsers.scale.classes import judge_classes
from parsers.gather.source import open_source

EMPTY = digest_merge.ClassSummary().to_json()
REPO = Path(__file__).resolve().parents[3]
HOSTS = [FIXTURES / "nccl" / "sleep" / "bundle", FIXTURES / "gloo14" / "oom" / "live",
         FIXTURES / "gloo14" / "busy" / "live", FIXTURES / "nccl" / "kill" / "bundle"]


def _gateway(tmp_path: Path, name: str, hosts: list[tuple[str, Path]]) -> str:
    """A gateway's job bundle of its hosts' answers, reduced by the real command: its stdout, as sent up."""
    parts = [HostPart(host=h, bundle=with_digests(b, tmp_path / f"{name}-{h}")) for h, b in hosts]
    merge_bundles(tmp_path / name, parts)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
    done = subprocess.run([sys.executable, "-m", "forensics.fleet.reduce", str(tmp_path / name)], capture_output=True,
                          text=True, env=env, timeout=120, check=True)
    return done.stdout


def test_gateways_reduce_and_the_root_merges_to_the_flat_merge(tmp_path):
    named = [(f"h{i}", b) for i, b in enumerate(HOSTS)]
    answers = [_gateway(tmp_path, "gw0", named[:2]), _gateway(tmp_path, "gw1", named[2:])]
    root, bad = merge_answers(answers)
    assert not bad
    flat = digest_merge.merge_all(
        digest_merge.from_document(dict(json.loads((tmp_path / f"gw{i // 2}-{h}" / rec_dir / DIGEST_NAME).read_text()),
                                        host=h))
        for i, (h, _) in enumerate(named) for rec_dir in _dirs(tmp_path / f"gw{i // 2}-{h}"))
    assert root == flat and root.hosts == 4 and root.ranks == 8
    assert sorted(root.conflicts) == list(range(7))  # four jobs' fixtures: ranks 0-6 claimed by two hosts or more
    host_digests = (digest_merge.from_document(json.loads(p.read_text()))
                    for p in tmp_path.glob(f"gw?-*/hosts/*/{DIGEST_NAME}"))
    assert sum(len(a) for a in answers) < sum(len(json.dumps(d.to_json())) for d in host_digests)
    assert judge_classes(root).complete


def _dirs(bundle: Path) -> list[str]:
    with open_source(bundle) as src:
        return [rec.dir for rec in src.manifest.hosts]


def test_a_host_without_a_digest_makes_the_root_judge_rank_by_rank(tmp_path):
    answer = _gateway(tmp_path, "gw0", [("h0", HOSTS[0])])
    assert judge_classes(read_answer(answer)).complete
    for p in (tmp_path / "gw0" / "hosts").rglob(DIGEST_NAME):
        p.unlink()
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
    out = subprocess.run([sys.executable, "-m", "forensics.fleet.reduce", str(tmp_path / "gw0")], capture_output=True,
                         text=True, env=env, timeout=120, check=True).stdout
    doc = read_answer(out)
    assert doc.without_digest == ("h0",) and not judge_classes(doc).complete


@pytest.mark.parametrize("bad, why", [
    ("{", "not JSON"), ('{"format": "x"}', "not a hang-forensics-merged-digest"),
    (json.dumps(dict(EMPTY, flags={"frozen": [[5, 1]]})), "sorted"),
    (json.dumps(dict(EMPTY, lossy=0)), "lossy"),
    (json.dumps(dict(EMPTY, stacks={"k": {"kind": 1, "ranks": []}})), "kind: a int, not text"),
])
def test_a_bad_answer_is_refused_with_its_reason(bad, why):
    with pytest.raises(ValueError, match=why):
        read_answer(bad)
    root, refused = merge_answers([bad])
    assert root.hosts == 0 and refused and why in refused[0]


# the root's fetch of raw files from a gateway (forensics.fleet.reduce fetch / file_fetched): bounded and confined

def _gateway_bundle(tmp_path: Path) -> Path:
    """A gateway's job bundle of two real hosts, filed as the fleet files answers (place_archive, merge_bundles)."""
    from forensics.fleet.filing import place_archive
    from forensics.fleet.remote import pack

    gw = tmp_path / "gw"
    gw.mkdir()
    parts = []
    for host, src in (("h0", HOSTS[0]), ("h1", HOSTS[1])):
        with open_source(src) as s:
            root = s.root
        parts.append(HostPart(host=host, bundle=gw / "hosts" / host, placed=place_archive(pack(root), gw, host)))
    merge_bundles(gw, parts)
    return gw


def _fetch(bundle: Path, *args: str) -> list[str]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
    done = subprocess.run([sys.executable, "-m", "forensics.fleet.reduce", "fetch", "--bundle", str(bundle), *args],
                          capture_output=True, text=True, env=env, timeout=120)
    return done.stdout.splitlines()


def test_a_fetch_sends_only_the_hosts_of_the_asked_ranks_and_the_root_files_them_as_they_were(tmp_path):
    from forensics.fleet.reduce import file_fetched

    gw = _gateway_bundle(tmp_path)
    with open_source(gw) as src:
        h0_ranks = sorted(r.rank for r in src.manifest.ranks if r.host == "h0" and r.rank is not None)
        h1_ranks = {r.rank for r in src.manifest.ranks if r.host == "h1"}
        h0_files = sorted(f.rel for f in src.files if f.rel.startswith("hosts/h0/"))
    only_h0 = [r for r in h0_ranks if r not in h1_ranks]  # 8-rank nccl job beside a 4-rank gloo job
    assert only_h0, (h0_ranks, h1_ranks)
    lines = _fetch(gw, "--ranks", f"{only_h0[0]}-{only_h0[-1]}")
    parts, problems = [], []
    file_fetched("gw", lines, {"h0", "h1"}, tmp_path / "root", parts, problems, 64)
    assert not problems and [p.host for p in parts] == ["h0"]
    merge_bundles(tmp_path / "root", parts)
    with open_source(tmp_path / "root") as src:  # the same files, the same ranks, at the root
        assert sorted(f.rel for f in src.files if f.rel.startswith("hosts/h0/")) == h0_files
        assert sorted(r.rank for r in src.manifest.ranks if r.rank is not None) == h0_ranks


def test_the_root_refuses_frames_for_hosts_it_did_not_ask_and_hostile_archives(tmp_path):
    import io
    import tarfile

    from forensics.fleet import wire
    from forensics.fleet.reduce import MAX_FETCH_HOSTS, file_fetched

    gw = _gateway_bundle(tmp_path)
    lines = _fetch(gw, "--hosts", "h0,h1")
    parts, problems = [], []
    file_fetched("gw", lines, {"h1"}, tmp_path / "root", parts, problems, MAX_FETCH_HOSTS)  # h0 is not its host
    # wording is the behaviour: the problem line names the refused host
    assert [p.host for p in parts] == ["h1"] and "'h0', not one of its hosts" in problems[0]
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        data = b"x"
        info = tarfile.TarInfo("bundle/../../escaped")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    evil = list(wire.encode({"host": "h2", "status": "ok"}, buf.getvalue()))
    file_fetched("gw", evil, {"h2"}, tmp_path / "root", parts, problems, MAX_FETCH_HOSTS)
    assert [p.host for p in parts] == ["h1"] and "h2: refused" in problems[-1]
    assert not (tmp_path / "escaped").exists() and not (tmp_path / "root" / "hosts" / "h2").exists()
    file_fetched("gw", _fetch(gw, "--hosts", "h0"), {"h0"}, tmp_path / "root2", [], problems, 0)
    assert "over the 0 hosts" in problems[-1]


def test_a_gateway_refuses_a_bad_request_and_sends_no_linked_host_folder(tmp_path):
    from forensics.fleet.reduce import parse_intervals

    with pytest.raises(ValueError):
        parse_intervals("5-1")
    with pytest.raises(ValueError):
        parse_intervals("0-" + "9" * 12)
    with pytest.raises(ValueError):
        parse_intervals(",".join(["1"] * 5000))
    assert parse_intervals("3,16-23") == [[3, 3], [16, 23]]
    gw = _gateway_bundle(tmp_path)
    assert "failed" in _fetch(gw, "--ranks", "../etc")[0]
    shutil.move(gw / "hosts" / "h0", tmp_path / "elsewhere")
    (gw / "hosts" / "h0").symlink_to(tmp_path / "elsewhere")
    assert _fetch(gw, "--hosts", "h0") == []  # a host folder that is a link: nothing sent


def test_a_fetch_reads_the_gateways_index_and_falls_back_to_the_manifest(tmp_path):
    """The index a gateway writes beside its bundle gives the same hosts as its manifest; a broken or planted one
    is not trusted past its checks: a bad index means the manifest is read, and a folder is still sent only when
    it is a real directory of the bundle."""
    from forensics.fleet import wire
    from forensics.fleet.reduce import (fetch_index_path, hosts_to_fetch, read_fetch_index, split_frames,
                                        write_fetch_index)
    from parsers.gather.source import read_manifest_file

    gw = _gateway_bundle(tmp_path)
    manifest = read_manifest_file(gw / "manifest.json")
    by_host = {h: sorted(r.rank for r in manifest.ranks if r.host == h and r.rank is not None) for h in ("h0", "h1")}
    only_h0 = [r for r in by_host["h0"] if r not in by_host["h1"]]  # 8-rank job beside a 4-rank one
    ranges = [[only_h0[0], only_h0[0]]]
    plain = hosts_to_fetch(gw, ranges, set(), 64)  # no index yet: the manifest
    write_fetch_index(gw, manifest)
    assert read_fetch_index(gw) == [("h0", by_host["h0"]), ("h1", by_host["h1"])]
    assert hosts_to_fetch(gw, ranges, set(), 64) == plain == [("h0", gw / "hosts" / "h0")]
    assert [h for h, _ in hosts_to_fetch(gw, [[0, 10**6]], set(), 64)] == ["h0", "h1"]
    frames = split_frames(_fetch(gw, "--ranks", str(only_h0[0])))  # the gateway's own command reads it too
    assert len(frames) == 1 and wire.decode(frames[0]).header["host"] == "h0"
    for bad in ("not json", json.dumps({"format": "hang-forensics-fetch-index", "version": 1, "hosts": [["h0", [-1]]]}),
                json.dumps({"format": "other", "version": 1, "hosts": []})):
        fetch_index_path(gw).write_text(bad)
        assert read_fetch_index(gw) is None
        assert hosts_to_fetch(gw, ranges, set(), 64) == plain  # the manifest decides
    # an index that names a host for every rank cannot make a link or a foreign path a folder to send
    fetch_index_path(gw).write_text(json.dumps({"format": "hang-forensics-fetch-index", "version": 1,
                                                "hosts": [["../../etc", [only_h0[0]]], ["h1", [only_h0[0]]]]}))
    assert [h for h, _ in hosts_to_fetch(gw, ranges, set(), 64)] == ["h1"]  # its index's word, inside the bundle


def test_a_gateway_starts_without_graphs_readers_or_judges_of_files():
    """`python -m forensics.fleet.reduce gateway` (and each `fetch`) imports this module on every gateway: it merges
    digests and sends files, and never builds a graph (networkx, ~0.2 s to import), reads a raw file (the registry
    imports every reader) or makes a host's digest (the readers, the judges, the knowledge base)."""
    heavy = ("networkx", "parsers.gather.registry", "parsers.gather.evidence", "parsers.scale.digest_first",
             "parsers.knowledge", "forensics.bundle.digest")
    code = f"import sys, forensics.fleet.reduce; print([m for m in {heavy!r} if m in sys.modules])"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120,
                          check=True)
    assert done.stdout.strip() == "[]"

"""Host digests (issue 30): made by the readers analysis uses, bounded, versioned and checked on read;
analysis reads them first and gives the verdict a full read gives, on every bundle fixture."""

from __future__ import annotations

import json
import shutil
import tarfile
from pathlib import Path

import pytest

from hf_testpaths import FIXTURES
from parsers import knowledge
from parsers.scale import digest
from forensics.report.words import analyze
from parsers.scale.digest import DIGEST_NAME, DigestError, decode_parsed, encode_parsed, read_digest, write_json
from parsers.scale.digest_first import digest_host
from parsers.gather.evidence import read_file
from parsers.model.events import ErrorEvent, OpEvent, Origin, Parsed
from parsers.model.stacks import Frame, ThreadStack
from parsers.gather.source import open_source

#: bundle folders, and live bundles kept as archives (issue 26's captures, with collect's second look)
BUNDLES = sorted(p.parent for p in FIXTURES.rglob("manifest.json")) + sorted(FIXTURES.rglob("bundle.tar.gz"))
KB = knowledge.load(use_env=False)


def _with_digests(bundle: Path, tmp_path: Path) -> Path:
    """A copy of a fixture bundle with each host's digest made as collect makes it (digest_host)."""
    dst = tmp_path / "b"
    if bundle.is_file():  # an archived fixture: unpacked first (our own archive; the data filter anyway)
        with tarfile.open(bundle) as tar:
            tar.extractall(tmp_path / "x", filter="data")
        bundle = next((tmp_path / "x").rglob("manifest.json")).parent
    shutil.copytree(bundle, dst, symlinks=True)
    with open_source(dst) as src:
        for rec in src.manifest.hosts:
            (dst / rec.dir / DIGEST_NAME).write_bytes(write_json(digest_host(src, rec.host, KB)))
    return dst


def _verdict_key(v) -> tuple:
    c = v.culprit
    return (c.rank if c else None, c.host if c else None, str(c.reason_class) if c else None, list(v.leads),
            [(s.rank, s.host, str(s.reason_class)) for s in v.suspects], v.hang)


def test_fixtures_found():
    assert len(BUNDLES) >= 29  # the bundle fixtures this test walks (a moved folder must not make it vacuous)


@pytest.mark.parametrize("bundle", BUNDLES, ids=lambda p: str(p.relative_to(FIXTURES)))
def test_digest_first_verdict_equals_full_read(bundle, tmp_path):
    dst = _with_digests(bundle, tmp_path)
    full = analyze(dst, KB, digests=False).verdict
    result = analyze(dst, KB)
    first = result.verdict
    used = first.sections.get("digests")
    assert used is not None and used["hosts_from_digest"] >= 1 and not used["notes"], used
    # the raw files opened were chosen over the merged digest's classes (parsers.scale.classes), not rank by rank
    assert used["odd_ones_out_by"] == "classes", used["classes"]
    assert _verdict_key(first) == _verdict_key(full)
    processes = {r.rank for r in result.evidence.ranks}
    for s in first.suspects:  # every rank the verdict names that has files of its own rests on them, read raw
        assert s.rank not in processes or s.rank in used["raw_ranks"], (s.rank, used)


def test_a_fault_past_the_notes_cap_reaches_the_digest_verdict(tmp_path):
    """A host's kernel log of over 200 kept lines whose Xid 79 comes after them: the digest kept only its first
    200 notes, so the full read named the host and the digest path did not (seen on a real collect, whose dmesg
    held 506 such lines with the OOM kills past line 200). Real lines: tests/fixtures/host/kernel/."""
    public = (FIXTURES / "host" / "kernel" / "public-gpu-faults.log").read_text().splitlines()
    noise = next(ln for ln in public if "Xid" in ln and "): 13," in ln)  # Xid 13: an application's fault
    fatal = next(ln for ln in public if "79, GPU has fallen off the bus" in ln)
    bundle = tmp_path / "src"
    shutil.copytree(FIXTURES / "nccl" / "sleep" / "bundle", bundle, symlinks=True)
    kernel = next(bundle.glob("hosts/*/kernel.log"))
    kernel.write_text("\n".join([noise] * 300 + [fatal]) + "\n")
    dst = _with_digests(bundle, tmp_path / "d")
    full = analyze(dst, KB, digests=False).verdict
    first = analyze(dst, KB).verdict
    assert first.sections["digests"]["hosts_from_digest"] >= 1
    assert any(h.get("status") == "exclude" for h in full.sections["hosts"])  # the test's premise
    assert first.sections["hosts"] == full.sections["hosts"]
    assert _verdict_key(first) == _verdict_key(full)


def test_digest_first_reads_few_raw_files(tmp_path):
    """A hang where one rank sleeps: the victims' files come from the digest, the sleeper's are read raw."""
    dst = _with_digests(FIXTURES / "nccl" / "sleep" / "bundle", tmp_path)
    v = analyze(dst, KB).verdict
    used = v.sections["digests"]
    assert used["files_from_digest"] > used["files_read_raw"]
    assert v.culprit is not None and used["raw_ranks"] == [v.culprit.rank]


def _real_parsed() -> list:
    with open_source(FIXTURES / "nccl" / "kill" / "bundle") as src:
        return [read_file(ref, KB.line_filter) for ref in src.files]


def test_round_trip_is_the_reduced_model():
    """Decoding keeps all that encoding wrote: the model rebuilt from a digest encodes to the same digest,
    and where no string was cut it equals the reduced model (typed, not dicts)."""
    arts = [a for a in _real_parsed() if a.parsed is not None]
    assert len(arts) > 20
    equal = 0
    for art in arts:
        data = json.loads(json.dumps(encode_parsed(art.parsed, str(art.path), art.rel)))
        back = decode_parsed(data, str(art.path), art.rel)
        assert json.loads(json.dumps(encode_parsed(back, str(art.path), art.rel))) == data, art.rel
        small = digest.reduce_parsed(art.parsed)
        for name in ("events", "stacks", "process", "exits", "recorder", "exceptions", "samples"):
            if max((len(x) for x in _strings(getattr(small, name))), default=0) <= digest.MAX_STR:
                assert getattr(back, name) == getattr(small, name), (art.rel, name)
                equal += 1
    assert equal > 100


def _strings(obj, depth=0):
    if isinstance(obj, str):
        yield obj
    elif depth < 30 and isinstance(obj, (list, tuple, set)):
        for x in obj:
            yield from _strings(x, depth + 1)
    elif depth < 30 and isinstance(obj, dict):
        for k, v in obj.items():
            yield from _strings(k, depth + 1)
            yield from _strings(v, depth + 1)
    elif depth < 30 and hasattr(obj, "__dataclass_fields__"):
        for f in obj.__dataclass_fields__:
            yield from _strings(getattr(obj, f), depth + 1)


def test_paths_follow_the_bundle():
    """A file's own path inside its evidence (a citation) is written as a number and read back as where the
    file is now: a bundle copied to another machine cites its own files."""
    art = next(a for a in _real_parsed() if a.kind == "rank-log" and a.parsed and a.parsed.events)
    data = encode_parsed(art.parsed, str(art.path), art.rel)
    assert str(art.path) not in json.dumps(data)
    back = decode_parsed(data, "/elsewhere/stderr.log", art.rel)
    assert {e.origin.file for e in back.events} == {"/elsewhere/stderr.log"}


def test_size_is_bounded():
    o = Origin(host="h", pid=1, rank=0, file="/x/stderr.log", line=1)
    big = Parsed(kind="nccl-log")
    big.events = [OpEvent("0xabc", 0, "allreduce", i, o) for i in range(100_000)]
    big.events += [ErrorEvent("nccl-warn", "x" * 5000, o) for _ in range(10_000)]
    big.stacks = [ThreadStack(t, f"t{t}", [Frame(f"f{i}", "a.py", i) for i in range(500)], is_main=t == 0)
                  for t in range(300)]
    big.notes = [(i, "y" * 300) for i in range(10_000)]
    size = len(json.dumps(encode_parsed(big, "/x/stderr.log", "r/stderr.log")))
    assert size < 600_000, size  # from ~60 MB of model to a few hundred kB, whatever the input
    back = decode_parsed(encode_parsed(big))
    ops = [e for e in back.events if isinstance(e, OpEvent)]
    assert [e.seq for e in ops] == list(range(100_000 - digest.OPS_PER_COMM, 100_000))  # the last ones kept
    assert len(back.stacks[0].frames) == digest.MAIN_FRAMES and len(back.stacks[1].frames) == digest.OTHER_FRAMES


@pytest.mark.parametrize("doc, why", [
    (b"{not json", "not JSON"),
    (b'{"format": "hang-forensics-digest", "version": 99}', "newer"),
    (b'{"format": "something-else", "version": 1}', "not a hang-forensics-digest"),
    (b'{"format": "hang-forensics-digest", "version": 1, "host": "h"}', "missing"),
])
def test_bad_digest_is_refused_with_its_reason(tmp_path, doc, why):
    path = tmp_path / DIGEST_NAME
    path.write_bytes(doc)
    with pytest.raises(DigestError, match=why):
        read_digest(path)


@pytest.mark.parametrize("bad", [
    {"$t": "os.system", "x": 1},  # only the model's own types are ever built
    {"$t": "events.OpEvent", "comm": "c", "comm_rank": 0, "op": "x", "seq": "not a number", "origin": None},
    {"$t": "events.Origin", "no_such_field": 1},
    {"$t": "events.OpEvent", "comm": "c", "comm_rank": 0, "op": "x", "seq": 1, "origin": 5},  # the model's types too
    {"$t": "stacks.ThreadStack", "thread_id": 1, "frames": [1, 2]},  # and the items of their lists
    {"$t": "events.CommMember", "comm": "c", "comm_rank": 0, "nranks": 2, "origin": {"$t": "events.Origin"},
     "global_ranks": ["0"]},
    {"$p": 7},
    {"$unknown": 1},
    # plain values pass as they are only where the field takes their type: a bool is no int, a number no string
    {"$t": "events.OpEvent", "comm": "c", "comm_rank": 0, "op": "x", "seq": True, "origin": {"$t": "events.Origin"}},
    {"$t": "events.OpEvent", "comm": "c", "comm_rank": 0, "op": 7, "seq": 1, "origin": {"$t": "events.Origin"}},
    {"$t": "events.Origin", "pid": 1.5},
    {"$t": "stacks.Frame", "function": "f"},  # a model's type, but no event: not among a file's events
    5,  # nor a plain value
])
def test_foreign_shapes_are_refused(bad):
    with pytest.raises(DigestError):
        decode_parsed({"kind": "nccl-log", "events": [bad]})


def test_bad_digest_falls_back_to_raw_files(tmp_path):
    dst = _with_digests(FIXTURES / "nccl" / "kill" / "bundle", tmp_path)
    full = analyze(dst, KB, digests=False).verdict
    host_dir = next(dst.glob("hosts/*/digest.json")).parent
    doc = json.loads((host_dir / DIGEST_NAME).read_bytes())
    doc["version"] = digest.VERSION + 1
    (host_dir / DIGEST_NAME).write_text(json.dumps(doc))
    v = analyze(dst, KB).verdict
    assert _verdict_key(v) == _verdict_key(full)  # the only host's digest refused: every file read raw, and said
    assert v.sections["digests"]["hosts_from_digest"] == 0 and v.sections["digests"]["files_from_digest"] == 0
    # wording is the behaviour: the note the output shows for a refused digest
    assert "newer than this tool reads" in v.sections["digests"]["notes"][0]
    doc["version"] = digest.VERSION
    first = next(iter(doc["files"]))
    doc["files"][first]["parsed"] = {"kind": "x", "events": [{"$t": "builtins.eval"}]}
    (host_dir / DIGEST_NAME).write_text(json.dumps(doc))
    v = analyze(dst, KB).verdict
    assert any("unknown type" in n for n in v.sections["digests"]["notes"])  # that file read raw, said
    assert _verdict_key(v) == _verdict_key(full)
    doc["kb"] = "0" * 16
    (host_dir / DIGEST_NAME).write_text(json.dumps(doc))
    res = analyze(dst, KB)
    assert res.verdict.sections["digests"]["files_from_digest"] == 0
    assert any("another knowledge base" in p for p in res.evidence.problems)


@pytest.mark.parametrize("bundle", [FIXTURES / "nccl" / "sleep" / "bundle", FIXTURES / "gloo14" / "oom" / "live",
                                    FIXTURES / "nccl_x2" / "mixed" / "kill" / "bundle"], ids=lambda p: p.parts[-3])
def test_digest_survives_the_fleet_refiling_its_host(bundle, tmp_path):
    """The fleet's merge files each host's bundle under the name it reached the host by (not the name the
    host gave itself): the digest stays usable there, and the verdict is the full read's."""
    from forensics.bundle.merge import HostPart, merge_bundles

    dst = _with_digests(bundle, tmp_path)
    with open_source(dst) as src:
        if len(src.manifest.hosts) != 1:
            pytest.skip("one host a part")
    merge_bundles(tmp_path / "job", [HostPart(host="gw-node-17", bundle=dst)])
    full = analyze(tmp_path / "job", KB, digests=False).verdict
    first = analyze(tmp_path / "job", KB).verdict
    used = first.sections["digests"]
    assert used["hosts_from_digest"] == 1 and not used["notes"], used
    # the digest served files, unless every rank is an odd one out (gloo14/oom: each logged a c10d warning) and
    # a host finding names the host (its host files read raw: the host it is filed under now, gw-node-17)
    assert used["files_from_digest"] > 0 or used["classes"]["odd_ranks"] == used["classes"]["ranks_covered"], used
    assert _verdict_key(first) == _verdict_key(full)
    assert first.culprit is None or first.culprit.host in (None, "gw-node-17")


def test_loose_folder_skips_the_digest_quietly(tmp_path):
    """A digest inside a folder read without its manifest is recognised and not taken for evidence."""
    dst = _with_digests(FIXTURES / "nccl" / "sleep" / "bundle", tmp_path)
    (dst / "manifest.json").unlink()
    ev_kinds = {a.kind for a in analyze(dst, KB).evidence.artifacts}
    assert "host-digest" not in ev_kinds


#: the data types new in digest version 2 (the kinds whose data a version-1 digest wrote as a plain dict)
_V2_DATA = {"LineOnly", "Heartbeat", "StoreWait", "NetFailure", "TorchFrame", "BarrierWait", "HorovodLine",
            "DeviceFault", "FailureTrail", "CommAborted", "NcclReason", "FatalError", "CrashSignal", "UnusedParameters",
            "C10dSaid"}


def _as_version_1(node, found: list) -> object:
    """A digest's JSON as a version-1 writer wrote it: the data of the kinds typed in version 2 as a plain dict of
    the fields set (`found` counts them)."""
    if isinstance(node, list):
        return [_as_version_1(x, found) for x in node]
    if not isinstance(node, dict):
        return node
    out = {k: _as_version_1(v, found) for k, v in node.items()}
    data = out.get("data")
    if isinstance(data, dict) and str(data.get("$t", "")).removeprefix("events.") in _V2_DATA:
        found.append(data.pop("$t"))
    return out


def test_a_version_1_digest_still_reads_and_gives_the_same_verdict(tmp_path):
    """Version 2 types every event's data; a version-1 digest (dict data for those kinds) is still read, its
    dicts typed where each event is rebuilt, and gives the verdict of the raw read."""
    dst = _with_digests(FIXTURES / "nccl" / "kill" / "bundle", tmp_path)
    full = analyze(dst, KB, digests=False).verdict
    host_dir = next(dst.glob("hosts/*/digest.json")).parent
    doc = json.loads((host_dir / DIGEST_NAME).read_bytes())
    assert doc["version"] == digest.VERSION == 3  # 3: a rank summary's p2p op (this bundle has none)
    found: list = []
    old = _as_version_1(doc, found)
    assert found  # the bundle's digest carries such kinds: the rewrite is not vacuous
    old["version"] = 1
    (host_dir / DIGEST_NAME).write_text(json.dumps(old))
    v = analyze(dst, KB).verdict
    assert v.sections["digests"]["hosts_from_digest"] == 1 and not v.sections["digests"].get("notes")
    assert _verdict_key(v) == _verdict_key(full)
    data = [e.data for entry in old["files"].values() if "parsed" in entry
            for e in decode_parsed(entry["parsed"]).events if type(e) is ErrorEvent]
    assert len(data) >= len(found) and not any(isinstance(d, dict) for d in data)  # each dict typed on the way in


@pytest.mark.parametrize("data, why", [
    ({"$t": "events.WorkerReport", "exitcode": 1}, "xid event's data must be a DeviceFault, not WorkerReport"),
    ({"$t": "events.DeviceFault", "forged": 1}, "DeviceFault has no field 'forged'"),
    ({"$t": "events.NoSuchData"}, "unknown type 'events.NoSuchData'"),
    ({"xid": "79"}, "DeviceFault's xid must be int"),
])
def test_a_forged_data_tag_is_refused_with_a_clear_error(data, why):
    event = {"$t": "events.ErrorEvent", "kind": "xid", "message": "m", "origin": {"$t": "events.Origin"}, "data": data}
    with pytest.raises(DigestError, match=why):
        decode_parsed({"kind": "rank-log", "events": [event]})


@pytest.mark.parametrize("version, why", [(digest.VERSION + 1, "newer than this tool reads"),
                                          (0, "not one this tool wrote")])
def test_a_version_outside_those_read_is_refused(version, why):
    with pytest.raises(DigestError, match=why):
        digest.check_digest({"format": digest.FORMAT, "version": version})

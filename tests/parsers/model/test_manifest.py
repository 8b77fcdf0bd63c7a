"""The bundle format: round trip, validation of foreign and damaged manifests."""

from __future__ import annotations

import json
import tarfile
from pathlib import Path
import tempfile

import pytest

from parsers.input.errors import InputError

from forensics.bundle.archive import make_archive
from parsers.model.manifest import CollectorRecord, RankRecord, Status
from forensics.bundle.reader import open_bundle
from forensics.bundle.writer import BundleWriter, safe_name
from forensics.errors import ForensicsError


def _bundle(tmp_path):
    writer = BundleWriter(tmp_path / "b", command=["forensics", "collect"])
    rel = writer.rank_dir("hostA", 3, 4242)
    writer.write_text(f"{rel}/proc.json", "{}")
    writer.add_rank(RankRecord(host="hostA", pid=4242, dir=rel, rank=3,
                               collectors=[CollectorRecord("process_state", Status.OK, 0.01,
                                                           files=[f"{rel}/proc.json"])]))
    writer.save()
    return writer


def test_round_trip(tmp_path):
    writer = _bundle(tmp_path)
    bundle = open_bundle(writer.root)
    rank = bundle.manifest.ranks[0]
    assert (rank.host, rank.pid, rank.rank) == ("hostA", 4242, 3)
    assert rank.collector("process_state").status == Status.OK
    assert bundle.rank_files(rank, "process_state")[0].name == "proc.json"
    assert bundle.manifest.complete


def test_archive_round_trip(tmp_path):
    writer = _bundle(tmp_path)
    archive = make_archive(writer.root)
    assert open_bundle(archive).manifest.ranks[0].pid == 4242


def test_not_a_bundle(tmp_path):
    with pytest.raises(ForensicsError, match="not a bundle"):
        open_bundle(tmp_path)
    (tmp_path / "x.txt").write_text("hello")
    with pytest.raises(ForensicsError, match="not a bundle"):
        open_bundle(tmp_path / "x.txt")
    with pytest.raises(ForensicsError, match="no such file"):
        open_bundle(tmp_path / "absent")


def test_corrupted_manifest(tmp_path):
    writer = _bundle(tmp_path)
    path = writer.root / "manifest.json"
    path.write_text(path.read_text()[:50])
    with pytest.raises(ForensicsError, match="corrupted manifest"):
        open_bundle(writer.root)


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda d: d.update(format="something-else"), "format"),
        (lambda d: d.update(version=99), "version 99"),
        (lambda d: d["ranks"][0].pop("pid"), r"ranks\[0\]: missing field\(s\) pid"),
        (lambda d: d["ranks"][0].update(collectors="x"), "collectors: expected a list"),
    ],
)
def test_invalid_manifest_names_the_fault(tmp_path, change, message):
    writer = _bundle(tmp_path)
    path = writer.root / "manifest.json"
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))
    with pytest.raises(ForensicsError, match=message):
        open_bundle(writer.root)


def test_paths_outside_bundle_refused(tmp_path):
    bundle = open_bundle(_bundle(tmp_path).root)
    with pytest.raises(InputError, match="outside"):
        bundle.path("../../etc/passwd")


def test_archive_with_escaping_member_is_not_extracted_outside(tmp_path):
    writer = _bundle(tmp_path)
    evil = tmp_path / "evil.tar"
    with tarfile.open(evil, "w") as tar:
        tar.add(writer.root / "manifest.json", arcname="manifest.json")
        tar.add(writer.root / "manifest.json", arcname="../escaped.json")
    with pytest.raises(ForensicsError, match="leaves the archive"):
        open_bundle(evil)  # refused whole: an archive that tries to escape is not evidence to trust
    assert not list(Path(tempfile.gettempdir()).glob("forensics-src-*/escaped.json"))
    assert not (Path(tempfile.gettempdir()) / "escaped.json").exists()


def test_damaged_archive(tmp_path):
    writer = _bundle(tmp_path)
    archive = make_archive(writer.root)
    data = archive.read_bytes()
    archive.write_bytes(data[: len(data) // 2])
    with pytest.raises(ForensicsError):
        open_bundle(archive)


def test_safe_name():
    assert safe_name("../../etc") == "etc"
    assert safe_name("node-01.cluster") == "node-01.cluster"
    assert "/" not in safe_name("a/b")


# A bundle whose manifest is damaged is read as a loose folder, its manifest's refusal recorded (issue 31):
# the logs beside a damaged manifest are still the evidence; nothing is taken from the manifest.

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"


def _damaged(tmp_path: Path, damage) -> Path:
    import shutil

    root = tmp_path / "bundle"
    shutil.copytree(FIXTURES / "nccl_x2" / "mixed" / "kill" / "bundle", root)
    path = root / "manifest.json"
    path.write_text(damage(path.read_text()))
    return root


@pytest.mark.parametrize("damage, why", [
    (lambda text: text[:200], "corrupted manifest"),  # cut short: no JSON
    (lambda text: text.replace('"world_size": 4', '"world_size": -7', 1), "invalid manifest"),  # a value out of range
    (lambda text: "[" * 100_000 + "]" * 100_000, "corrupted manifest"),  # nested past the decoder's recursion limit
])
def test_a_damaged_manifest_is_a_recorded_problem_and_the_logs_are_read(tmp_path, damage, why):
    from parsers.pipeline.analyze import analyze

    root = _damaged(tmp_path, damage)
    result = analyze(root)
    ev = result.evidence
    assert ev.manifest is None and ev.form == "folder"
    refused = [w for name, w in ev.skipped if name == "manifest.json"]
    # wording is the behaviour: the skip reason the output lists
    assert refused and refused[0].startswith("manifest refused, the folder was read without it: ") and why in refused[0]
    assert not any(a.rel == "manifest.json" for a in ev.artifacts)  # the damaged file itself is not read as a log
    kinds = {a.kind for a in ev.artifacts}
    assert "rank-log" in kinds and len(ev.artifacts) > 10, kinds
    assert any(m.startswith("manifest.json: manifest refused") for m in result.verdict.missing_evidence)


def test_a_damaged_manifest_and_nothing_else_is_still_a_clear_error(tmp_path):
    from forensics.report.postmortem import load

    (tmp_path / "manifest.json").write_text("{not json")
    with pytest.raises(ForensicsError, match="corrupted manifest .*no other file in it"):
        load(tmp_path)

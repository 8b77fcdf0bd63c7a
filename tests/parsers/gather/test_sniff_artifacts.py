"""Artifacts are recognised by content whatever their names; bad files never stop the rest."""

import shutil
from pathlib import Path

from parsers.gather.evidence import load_directory, load_files
from parsers.gather.registry import recognise

FIX = Path(__file__).resolve().parents[2] / "fixtures"


def test_kinds_by_content_under_meaningless_names(tmp_path):
    sources = {
        "fr-dump": FIX / "gloo/sleep/node00/fr_live_rank_0",
        "rank-log": FIX / "gloo/sleep/node00/rank0.stderr",
        "pyspy-text": FIX / "pyspy/dump.txt",
        "nccl-log": FIX / "nccl/field-notes/lines.log",
    }
    for i, (kind, src) in enumerate(sources.items()):
        dst = tmp_path / f"blob{i}.out"
        shutil.copy(src, dst)
        assert recognise(dst.name, dst.read_bytes(), complete=True).name == kind, src
    json_dump = FIX / "gloo/sleep/node00/fr_live_rank_0.json"
    assert recognise(json_dump.name, json_dump.read_bytes(), complete=True).name == "fr-dump"


def test_bad_files_are_reported_and_the_rest_loads(tmp_path):
    good = tmp_path / "node07" / "something.log"
    good.parent.mkdir()
    shutil.copy(FIX / "nccl/field-notes/lines.log", good)
    (tmp_path / "broken_rank_2.pkl").write_bytes(b"\x80\x04\x95entries pg_status" + b"\x00" * 10)
    (tmp_path / "empty.txt").write_text("")
    (tmp_path / "image.bin").write_bytes(b"\x00\x01\x02" * 100)
    arts = load_directory(tmp_path)
    by_name = {a.path.name: a for a in arts.artifacts}
    assert by_name["something.log"].kind == "nccl-log" and by_name["something.log"].rank == 2
    assert by_name["something.log"].host == "vm"  # content wins over the folder name
    assert by_name["broken_rank_2.pkl"].error and by_name["broken_rank_2.pkl"].rank == 2
    assert {Path(p).name for p, _ in arts.skipped} >= {"empty.txt", "image.bin", "broken_rank_2.pkl"}


def test_hints_from_a_manifest_are_used(tmp_path):
    src = FIX / "gloo/sleep/node00/fr_live_rank_0"
    arts = load_files([(src, {"host": "gpu-a17", "pid": 4242, "rank": 9})])
    art = arts.artifacts[0]
    assert (art.rank, art.host, art.pid) == (9, "gpu-a17", 4242)

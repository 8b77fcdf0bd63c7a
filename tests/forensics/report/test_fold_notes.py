"""Issue 41 item 3: per-rank missing-evidence notes fold like `clush -b` output: 8 gdb timeouts are one line with
the ranks as a folded set, not 8 lines; notes of different kinds stay apart, and one rank's note keeps its pid.

Real input: the 8-rank NCCL collection (tests/fixtures/nccl/sleep/bundle), copied, its manifest's gdb (and py-spy)
records set to the outcome and error words the collectors write on a timeout (forensics/collectors/gdb.py,
pyspy.py), with seconds and thread counts that differ from rank to rank as they do in real runs."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from hf_testpaths import FIXTURES
from forensics.report.text import render_view
from forensics.report.view import build_view
from forensics.report.words import analyze

BUNDLE = FIXTURES / "nccl" / "sleep" / "bundle"


def _bundle(tmp_path: Path, timed_out: dict[str, list[int]]) -> Path:
    """The real bundle with the collectors named in `timed_out` marked timed out at those ranks."""
    out = tmp_path / "bundle"
    shutil.copytree(BUNDLE, out)
    man = json.loads((out / "manifest.json").read_text())
    for rec in man["ranks"]:
        for col in rec["collectors"]:
            if rec["rank"] in timed_out.get(col["name"], []):
                col["status"] = "timeout"
                col["error"] = (f"gdb: time limit reached during -stack-list-frames (partial: {rec['rank'] % 3} of "
                                f"{12 + rec['rank']} threads)" if col["name"] == "gdb"
                                else f"py-spy did not answer in {5 + rec['rank'] / 10:.1f} s")
                col["files"] = [] if col["name"] == "gdb" else col["files"]
    (out / "manifest.json").write_text(json.dumps(man))
    return out


def _missing_lines(path: Path) -> list[str]:
    text = render_view(build_view(analyze([path]).verdict), width=0)
    tail = text.split("missing evidence:\n", 1)
    return tail[1].splitlines() if len(tail) > 1 else []


@pytest.mark.parametrize("ranks", [list(range(8)), [0, 1, 2, 5, 6]])
def test_gdb_timeouts_fold_to_one_line(tmp_path: Path, ranks: list[int]) -> None:
    lines = _missing_lines(_bundle(tmp_path, {"gdb": ranks}))
    gdb = [x for x in lines if "gdb: timeout" in x]
    assert len(gdb) == 1, lines
    folded = "0-7" if len(ranks) == 8 else "0-2,5-6"
    assert gdb[0].startswith(f"  - ranks {folded} (host "), gdb[0]
    # the seconds and thread counts differ: the first rank's are said, the rest are in --json
    assert f"rank {ranks[0]}: gdb: time limit reached" in gdb[0] and "--json" in gdb[0]  # wording is the behaviour


def test_kinds_stay_apart_and_one_rank_keeps_its_pid(tmp_path: Path) -> None:
    lines = _missing_lines(_bundle(tmp_path, {"gdb": [3], "py-spy": [0, 4, 7]}))
    gdb = [x for x in lines if "gdb: timeout" in x]
    spy = [x for x in lines if "py-spy: timeout" in x]
    assert len(gdb) == 1 and gdb[0].startswith("  - rank 3 (") and " pid " in gdb[0], lines
    assert len(spy) == 1 and spy[0].startswith("  - ranks 0,4,7 (host "), lines


def test_json_keeps_every_ranks_note(tmp_path: Path) -> None:
    verdict = analyze([_bundle(tmp_path, {"gdb": list(range(8))})]).verdict
    notes = [x for x in verdict.to_dict()["missing_evidence"] if "gdb: timeout" in x]
    assert len(notes) == 8 and len(set(notes)) == 8

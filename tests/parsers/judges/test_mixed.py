"""Inputs from another job are reported as such (issue 41 item 5): a bundle given with a log of another job
(another world size, pids, host, ranks) says so under the VERDICT in text, --json and HTML; the same job's own
extra logs say nothing. The bundle is a real 8-rank NCCL collection (tests/fixtures/nccl/sleep/bundle) and the
other job's files are real captures of other jobs (tests/fixtures/nccl/sigstop, tests/fixtures/gloo)."""

from __future__ import annotations

from pathlib import Path

import pytest

from forensics.report.html import verdict_html
from forensics.report.text import render_view
from forensics.report.view import build_view
from forensics.report.words import analyze
from parsers.judges.mixed import foreign_inputs

FIX = Path(__file__).resolve().parents[2] / "fixtures"
BUNDLE = FIX / "nccl" / "sleep" / "bundle"


def _logs(folder: Path, pattern: str) -> list[Path]:
    return sorted(folder.rglob(pattern))


def test_the_same_jobs_logs_are_not_foreign() -> None:
    extra = _logs(FIX / "nccl" / "sleep", "nccl.node0*.log")[:2]
    assert extra
    result = analyze([BUNDLE, *extra])
    assert foreign_inputs(result.evidence) == []
    assert "mixed inputs" not in render_view(build_view(result.verdict))


@pytest.mark.parametrize("world", [4, 2])
def test_another_world_size_is_reported(tmp_path: Path, world: int) -> None:
    """A log of a `world`-rank job beside the 8-rank bundle: its nranks say another job."""
    src = next(iter(_logs(FIX / "nccl" / "sleep", "nccl.node05.*.log")))
    text = src.read_text().replace("nranks 8", f"nranks {world}").replace("nRanks 8", f"nRanks {world}")
    other = tmp_path / "other-job.log"
    other.write_text(text.replace("node05", "far01"))
    result = analyze([BUNDLE, other])
    found = foreign_inputs(result.evidence)
    assert [f.file for f in found] == ["other-job.log"]
    assert ("world-size", world, [8]) in [(w, f, b) for w, f, b in found[0].reasons]
    view = build_view(result.verdict)
    line = next(x for x in render_view(view).splitlines() if x.startswith("  mixed inputs:"))
    # wording is the behaviour: what the file and the bundle say
    assert f"world size {world}, the bundle's 8" in line and "host far01" in line
    assert view.to_json()["sections"]["mixed_inputs"][0]["file"] == "other-job.log"
    assert "mixed inputs: other-job.log" in verdict_html(view)

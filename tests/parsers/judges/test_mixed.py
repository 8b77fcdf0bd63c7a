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


#: real logs of other jobs (gloo captures of 2026-12-01, glog stamps with no year) beside the 8-rank bundle of 11-29
OTHER_RUNS = ["busy/live/hosts/vm/rank0-pid15762/stderr.log", "dataloader/live/hosts/vm/rank2-pid16704/stderr.log",
              "oom/live/hosts/vm/rank1-pid14820/stderr.log"]


@pytest.mark.parametrize("rel", OTHER_RUNS)
def test_a_log_days_away_is_another_run(rel: str) -> None:
    """Issue 41 item 5's own case: a bundle plus an unrelated job's log, days apart, same world size or none
    stated: its dated lines all lie more than a day after the bundle's collection, and the verdict says so."""
    other = FIX / "gloo14" / rel
    result = analyze([BUNDLE, other])
    found = foreign_inputs(result.evidence)
    assert [f.file for f in found] == [other.name], found
    assert "time" in [w for w, _f, _b in found[0].reasons]
    line = next(x for x in render_view(build_view(result.verdict)).splitlines() if x.startswith("  mixed inputs:"))
    # wording is the behaviour: the file's dates and the bundle's, and how far apart
    assert "its lines dated 12-01 " in line and "2 days after the bundle's 11-29 09:26:34" in line, line
    assert "printed nothing since" not in line, line  # dated after the collection: no job's own earlier lines


@pytest.mark.parametrize("shift", ["1129", "1130"])
def test_a_log_within_a_day_of_the_collection_is_not_foreign_by_time(tmp_path: Path, shift: str) -> None:
    """The same real log dated the bundle's day or 20 h after its collection (logs print local time, up to 14 h
    off UTC): within a day of the bundle's time, no reason of time, so it is not called another job's."""
    src = FIX / "gloo14" / OTHER_RUNS[0]
    moved = tmp_path / "same-day.log"
    moved.write_text(src.read_text().replace("1201 ", f"{shift} "))
    found = foreign_inputs(analyze([BUNDLE, moved]).evidence)
    assert found == [], found


def test_a_log_dated_days_before_the_bundle_says_its_other_reading(tmp_path: Path) -> None:
    """Dated days before the bundle, and only its dates say so: another run's, or this job (hung for days with
    its watchdog off) has printed nothing since; the line says both readings."""
    src = FIX / "gloo14" / OTHER_RUNS[0]
    earlier = tmp_path / "earlier.log"
    earlier.write_text(src.read_text().replace("1201 ", "1124 "))
    found = foreign_inputs(analyze([BUNDLE, earlier]).evidence)
    assert [f.file for f in found] == ["earlier.log"] and found[0].reasons[-1][0] == "time", found
    line = next(x for x in render_view(build_view(analyze([BUNDLE, earlier]).verdict)).splitlines()
                if "mixed inputs:" in x)
    # wording is the behaviour
    assert "5 days before the bundle's" in line and "or this job has printed nothing since" in line, line


def test_a_log_of_another_size_and_days_away_says_both(tmp_path: Path) -> None:
    """Another world size and dates days before: both reasons, and no 'this job printed nothing since' reading."""
    src = next(iter(_logs(FIX / "nccl" / "sleep", "nccl.node05.*.log")))
    text = src.read_text().replace("nranks 8", "nranks 4").replace("nRanks 8", "nRanks 4")
    other = tmp_path / "old-small.log"
    other.write_text("[W1124 05:31:45.821682802 ProcessGroupGloo.cpp:524] Warning: Unable to resolve hostname\n" + text)
    found = foreign_inputs(analyze([BUNDLE, other]).evidence)
    assert [f.file for f in found] == ["old-small.log"], found
    assert {"world-size", "time"} <= {w for w, _f, _b in found[0].reasons}, found
    line = next(x for x in render_view(build_view(analyze([BUNDLE, other]).verdict)).splitlines()
                if "mixed inputs:" in x)
    assert "printed nothing since" not in line, line

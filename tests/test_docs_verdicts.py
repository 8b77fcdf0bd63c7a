"""The sample VERDICT lines in README.md and docs/commands/report.md are what the tool prints today (issue 41
item 9): the demo is run for real (a 4-rank gloo job, rank 2 slow), then analyze and report are run on its
bundle, and every VERDICT/culprit line of those pages' samples must be a line they print (pids, which differ
each run, are compared as 'pid N')."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration  # a real gloo job

REPO = Path(__file__).resolve().parents[1]
PAGES = {"README.md": "analyze", "docs/commands/report.md": "report"}


def _pid_free(line: str) -> str:
    return re.sub(r"pid \d+", "pid N", line.rstrip())


def samples(page: str) -> list[str]:
    """The VERDICT and culprit lines inside the page's code blocks."""
    text = (REPO / page).read_text()
    blocks = re.findall(r"```\n(.*?)```", text, re.S)
    return [_pid_free(ln) for b in blocks for ln in b.splitlines() if ln.startswith(("VERDICT:", "  culprit:"))]


def _run(*argv: str) -> str:
    done = subprocess.run([sys.executable, "-m", "forensics", *argv], capture_output=True, text=True, timeout=600)
    return done.stdout


def test_pages_have_samples() -> None:
    for page in PAGES:
        assert any(s.startswith("VERDICT: rank 2 ") for s in samples(page)), page


def test_sample_verdicts_are_what_the_tool_prints(tmp_path: Path) -> None:
    bundle = tmp_path / "hang"
    _run("demo", "-o", str(bundle), "-q")
    printed = {"analyze": {_pid_free(x) for x in _run("analyze", str(bundle)).splitlines()},
               "report": {_pid_free(x) for x in _run("report", str(bundle), "-o",
                                                     str(tmp_path / "r.html")).splitlines()}}
    for page, command in PAGES.items():
        for line in samples(page):
            assert line in printed[command], f"{page}: {line!r} is not what `forensics {command}` prints today"

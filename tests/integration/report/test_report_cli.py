"""`forensics report` on a real bundle packed as an archive, as bundles travel in tickets."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
pytestmark = pytest.mark.integration


def test_report_from_archive_lands_beside_it(demo_bundle: Path, tmp_path: Path):
    from forensics.bundle.archive import make_archive

    archive = make_archive(demo_bundle, tmp_path / "hang.tar.gz")
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    run = subprocess.run([sys.executable, "-m", "forensics", "report", str(archive)], capture_output=True, text=True, env=env, timeout=120)
    assert run.returncode == 0, run.stderr
    out = tmp_path / "hang.html"
    assert out.is_file() and f"report: {out}" in run.stdout
    text = out.read_text()
    assert 'id="culprit"' in text and "rank 2 " in text

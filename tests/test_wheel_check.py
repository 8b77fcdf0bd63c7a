"""scripts/wheel_check.sh: the install docs/deploy.md describes (a wheel built from this checkout, installed
into a clean venv, its `forensics` naming a fixture's culprit) works, run as CI runs every test."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.integration
def test_the_wheel_installs_into_a_clean_venv_and_names_the_culprit() -> None:
    done = subprocess.run(["bash", str(REPO / "scripts" / "wheel_check.sh")], capture_output=True, text=True,
                          timeout=280, check=False)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "VERDICT: rank 3 " in done.stdout
    assert "installs into a clean venv and names the culprit" in done.stdout

"""`forensics steps` on step times recorded by forensics.arm() in real CPU training loops.

The patterns come from what the program really does (checkpoint writes with fsync; a
growing heap of cyclic objects under Python's collector; arm(gc=N)), so assertions name
the pattern, never a timing.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fleet_simjob import REPO

pytestmark = pytest.mark.integration
WORKLOAD = Path(__file__).resolve().parent / "steps_workload.py"
ENV = dict(os.environ, PYTHONPATH=str(REPO), OMP_NUM_THREADS="1")


def _run(out: Path, *args: str) -> Path:
    subprocess.run([sys.executable, str(WORKLOAD), "--out", str(out), *args], check=True, env=ENV, timeout=240)
    return out / "steps-rank0.csv"


def _steps(*files: Path) -> dict:
    done = subprocess.run([sys.executable, "-m", "forensics", "steps", "--json", *map(str, files)], capture_output=True, text=True, env=ENV, check=True)
    return json.loads(done.stdout)


def test_checkpoint_every_ten_steps_is_periodic(tmp_path):
    pytest.importorskip("torch")
    result = _steps(_run(tmp_path / "ck", "--pattern", "checkpoint", "--steps", "80", "--every", "10"))
    periodic = [f for f in result["findings"] if f["kind"] == "periodic-slow"]
    assert periodic and "every 10 steps" in periodic[0]["title"]


def test_growing_heap_reads_as_gc_decline_and_the_cure_makes_it_periodic(tmp_path):
    pytest.importorskip("torch")
    runs = [_run(tmp_path / f"run{i}", "--pattern", "gc", "--steps", "150") for i in (1, 2)]
    result = _steps(*runs)  # two runs = a restart in between
    assert result["restarts"] == [149]  # the first step (setup) is not timed
    assert "gc-decline" in [f["kind"] for f in result["findings"]]
    cured = _steps(_run(tmp_path / "cured", "--pattern", "gc", "--steps", "150", "--gc-every", "25"))
    periodic = [f for f in cured["findings"] if f["kind"] == "periodic-slow"]
    assert periodic and "every 25 steps" in periodic[0]["title"]

"""Real processes: a py-spy text dump of a live target, and a fresh gloo hang analysed end to end."""

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from parsers.gather.evidence import load_directory
from parsers.judges.logs import correlate
from parsers.readers import pyspy_text

ROOT = Path(__file__).resolve().parents[3]
PYSPY = Path(sys.executable).with_name("py-spy")
pytestmark = pytest.mark.integration


@pytest.mark.skipif(not PYSPY.exists(), reason="py-spy not installed beside this Python")
def test_pyspy_text_of_a_live_process():
    target = subprocess.Popen([sys.executable, str(ROOT / "tests/fixtures/pyspy/target.py")])
    try:
        time.sleep(1.0)
        out = subprocess.run([str(PYSPY), "dump", "--pid", str(target.pid)], capture_output=True, text=True,
                             timeout=30)
    finally:
        target.kill()
        target.wait()
    parsed = pyspy_text.parse_lines(out.stdout.splitlines())
    assert parsed.unknown_lines == 0 and parsed.facts["pid"] == target.pid
    assert {s.name for s in parsed.stacks} == {"MainThread", "busy-worker", "sleeper"}


def test_fresh_gloo_kill_is_analysed(tmp_path):
    """Run the scenario script (3 gloo ranks, rank 2 SIGKILLed) and analyse what it left."""
    res = subprocess.run([sys.executable, str(ROOT / "scripts/device/nccl_scenarios.py"), "--backend", "gloo",
                          "--world", "3", "--scenarios", "kill", "--out-dir", str(tmp_path), "--port-base", "29690",
                          "--scenario-s", "20", "--pg-timeout", "10"], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    truth = json.loads((tmp_path / "kill" / "truth.json").read_text())
    assert truth["culprit_rank"] == 2 and truth["exit_codes"]["2"] == -9
    culprit = correlate(load_directory(tmp_path / "kill")).culprit
    assert (culprit.rank, culprit.host) == (2, "node02") and culprit.reason_class in truth["expected_reason_classes"]

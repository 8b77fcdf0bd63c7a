"""`forensics demo` end to end through the CLI, as the README tells users to run it."""

from __future__ import annotations

import json
import subprocess

import pytest

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("fault", ["sleep", "stop", "crash"])
def test_demo_names_injected_culprit(fault, forensics_cli, cli_env, tmp_path):
    proc = subprocess.run(
        [*forensics_cli, "demo", "--fault", fault, "--ranks", "4", "--json", "-q", "-o", str(tmp_path / "b")],
        env=cli_env, capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["correct"] is True
    assert data["culprit"]["rank"] == 2
    assert data["culprit"]["reason_class"] == {"sleep": "outside-collective", "stop": "stopped",
                                               "crash": "missing"}[fault]
    # the job is gone afterwards
    again = subprocess.run(["pgrep", "-f", str(tmp_path)], capture_output=True, text=True)
    assert again.stdout.strip() == ""
    analyzed = subprocess.run([*forensics_cli, "analyze", str(tmp_path / "b"), "--json"], env=cli_env,
                              capture_output=True, text=True, timeout=60)
    assert analyzed.returncode == 0
    assert json.loads(analyzed.stdout)["culprit"]["rank"] == 2

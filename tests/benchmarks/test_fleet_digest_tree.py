"""The device run's driver (benchmarks/fleet_digest_tree.py, as scripts/device/fleet_100k.sh calls it), small: the
reduced tree through the real CLI (`forensics collect --reduce --json` over the stand-in ssh and two real gateways)
and the flat digest-first row name the stopped rank; a size whose answers cannot be made within the budget is
skipped and recorded, not run into the device's time limit; the JSON and the table are written."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks import fleet_digest_tree

pytestmark = pytest.mark.integration  # real collections, real gateways and stand-in ssh processes

REPO = Path(__file__).resolve().parents[2]


def test_rows_run_and_a_size_past_the_budget_is_skipped(tmp_path):
    out, table = tmp_path / "rows.json", tmp_path / "rows.txt"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p))
    # 64 ranks = 8 hosts (the stopped rank: host 2's local rank 3 = rank 19); 64,000 ranks' answers (8,000
    # hosts) are estimated from the 8 hosts' at >= 130 s, past a 100 s budget
    done = subprocess.run([sys.executable, str(REPO / "benchmarks" / "fleet_digest_tree.py"), "--rows",
                           "64:cli,64:digest,64000:cli", "--gateways", "2", "--gateway-fanout", "4", "--workers", "2",
                           "--budget-s", "100", "--json-out", str(out), "--table-out", str(table)],
                          capture_output=True, text=True, env=env, timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(out.read_text())
    cli, flat, big = report["rows"]
    assert cli["mode"] == "cli" and cli["status"] == "ok", cli
    assert cli["culprit"] == 19 and cli["culprit_ok"] and cli["ranks_seen"] == 64 and cli["exit_code"] == 0
    assert cli["hosts_fetched"] == ["node00002"] and cli["gateway_lines"] == 2
    assert 0 < cli["last_answer_s"] < cli["verdict_s"] and cli["after_last_answer_s"] > 0
    assert 0 < cli["root_peak_rss_mb"] < 2048 and cli["bytes_to_root"] > cli["merged_digest_bytes"] > 0
    assert flat["mode"] == "digest" and flat["status"] == "ok" and flat["culprit_ok"], flat
    assert big["status"].startswith("skipped"), big
    assert report["answers"]["64000"]["status"].startswith("skipped")
    assert report["answers"]["64"]["status"] == "ok" and report["answers"]["64"]["cpu_ms_a_host"] > 0
    assert "tree, CLI --reduce" in table.read_text()
    assert Path(report["work_dir"]).parent == Path(report["bundle_dir"])
    assert not Path(report["work_dir"]).exists()  # answers and every row's bundles removed


def test_estimates_scale_linearly_from_the_largest_size_run():
    done = [{"mode": "cli", "ranks": 4096, "status": "ok", "wall_s": 8.0},
            {"mode": "cli", "ranks": 512, "status": "ok", "wall_s": 5.0},
            {"mode": "digest", "ranks": 4096, "status": "skipped: ..."}]
    assert fleet_digest_tree.estimate(done, "cli", 32768) == pytest.approx(8.0 * 8 * 1.25 + 5)
    assert fleet_digest_tree.estimate(done, "cli", 512) == pytest.approx(8.0 * 1.25 + 5)  # never scaled below 1
    assert fleet_digest_tree.estimate(done, "digest", 32768) is None  # nothing of that mode ran: no guess

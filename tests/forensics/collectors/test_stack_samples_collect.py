"""`forensics collect --samples N` on real hung gloo jobs with the real py-spy.

A hung job is the hard case for sampling: one rank SIGSTOPped (py-spy cannot suspend it;
nonblocking still reads it), the others blocked in all_reduce. Every target must keep its
run state, the stopped one stays stopped, and the samples must say the job does not move.
"""

from __future__ import annotations

import json
import subprocess

import pytest

from parsers.gather.evidence import load_path
from parsers.judges.activity import is_moving, rank_activities

pytestmark = pytest.mark.integration


def test_samples_of_a_hung_job_leave_every_target_as_it_was(hung_job, tmp_path, proc_state, forensics_cli, cli_env):
    job = hung_job("stop", ranks=4, culprit=2)
    before = {pid: proc_state(pid) for pid in job.pids}
    assert before[job.pids[2]] == "T"
    out = tmp_path / "b"
    done = subprocess.run([*forensics_cli, "collect", "--pid", ",".join(map(str, job.pids)), "-o", str(out), "--json",
                           "-q",
                           "--samples", "8", "--sample-interval",
                           "0.05"], capture_output=True, text=True, env=cli_env, timeout=180)
    assert done.returncode in (0, 3), done.stderr
    assert {pid: proc_state(pid) for pid in job.pids} == before  # never left stopped, never resumed
    manifest = json.loads((out / "manifest.json").read_text())
    for rank in manifest["ranks"]:
        rec = next(c for c in rank["collectors"] if c["name"] == "py-spy-samples")
        assert rec["status"] == "ok" and rec["details"]["taken"] == 8, rec
        assert rec["details"]["state_before"] == rec["details"]["state_after"]
    ev = load_path(out)
    acts = rank_activities(ev)
    assert sorted(acts) == [0, 1, 2, 3]
    for r in (0, 1, 3):
        assert acts[r]["where"][0]["label"] == "all_reduce" and acts[r]["waiting_share"] == 1.0, acts[r]
    assert all(is_moving(rk.samples) is False for rk in ev.ranks), [a["text"] for a in acts.values()]


def test_samples_are_bounded_by_the_cap_and_the_time_limit(hung_job, tmp_path, forensics_cli, cli_env):
    job = hung_job("sleep", ranks=2, culprit=1)
    out = tmp_path / "b"
    subprocess.run([*forensics_cli, "collect", "--pid", str(job.pids[1]), "-o", str(out), "-q", "--samples", "100000",
                    "--sample-interval", "5", "--timeout",
                    "3"], capture_output=True, text=True, env=cli_env, timeout=120)
    manifest = json.loads((out / "manifest.json").read_text())
    rec = next(c for c in manifest["ranks"][0]["collectors"] if c["name"] == "py-spy-samples")
    assert rec["details"]["requested"] == 200 and rec["details"]["budget_s"] == 3.0
    assert rec["seconds"] < 3.0 + 6.0  # the budget, plus at most one dump's own limit
    assert 2 <= rec["details"]["taken"] <= 200
    acts = rank_activities(load_path(out))
    assert acts[1]["where"][0]["label"].startswith("slow_data_loader")

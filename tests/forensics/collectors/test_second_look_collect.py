"""`forensics collect`'s second look on real gloo jobs: a hung one is judged a hang from the looks and its
culprit named; a training one is judged to progress and nobody is named; without a second look (and
nothing else time-stamped) one snapshot names no hang culprit."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from forensics.demo.launcher import free_port
from hf_testpaths import FIXTURES
from forensics.report.words import analyze
from parsers.model.findings import ReasonClass

pytestmark = pytest.mark.integration
RUNNING_JOB = FIXTURES / "second_look" / "running_job.py"


@pytest.fixture
def running_job():
    """Factory: a 2-rank gloo job that trains (load_batch's 20 ms sleep, then all_reduce) for `seconds`."""
    procs: list[subprocess.Popen] = []

    def make(seconds: float = 90.0) -> list[int]:
        port = free_port()
        for r in range(2):
            env = dict(os.environ, RANK=str(r), WORLD_SIZE="2", LOCAL_RANK=str(r), LOCAL_WORLD_SIZE="2",
                       MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), OMP_NUM_THREADS="1")
            procs.append(subprocess.Popen([sys.executable, str(RUNNING_JOB), "--seconds", str(seconds)], env=env,
                                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True))
        time.sleep(8)  # past init_process_group: training
        assert all(p.poll() is None for p in procs), "the running job ended early"
        return [p.pid for p in procs]

    yield make
    for p in procs:
        p.kill()
        p.wait(timeout=10)


def _collect(pids, out, forensics_cli, cli_env, *extra):
    done = subprocess.run([*forensics_cli, "collect", "--pid", ",".join(map(str, pids)), "-o", str(out), "-q", *extra],
                          capture_output=True, text=True, env=cli_env, timeout=240)
    assert done.returncode in (0, 3), done.stderr
    return json.loads((out / "manifest.json").read_text())


def test_a_hung_job_is_a_hang_from_the_second_look_and_its_culprit_is_named(hung_job, tmp_path, proc_state,
                                                                            forensics_cli, cli_env):
    job = hung_job("sleep", ranks=3, culprit=1)
    before = {pid: proc_state(pid) for pid in job.pids}
    manifest = _collect(job.pids, tmp_path / "b", forensics_cli, cli_env)
    assert {pid: proc_state(pid) for pid in job.pids} == before  # the looks never stopped a target
    for rank in manifest["ranks"]:
        rec = next(c for c in rank["collectors"] if c["name"] == "second-look")
        assert rec["status"] == "ok" and rec["details"]["gap_s"] == 3.0 and rec["details"]["waited_s"] >= 2.9, rec
        assert rec["details"]["overlapped_s"] > 0  # the stack reads ran inside the gap (issue 39 item 8)
        assert rank["collectors"][-1]["name"] == "second-look"  # look 2 came after every other collector
    costs = manifest["hosts"][0]["costs"]  # what each collector cost, in the manifest
    assert costs["py-spy"]["runs"] == 3 and costs["second-look"]["runs"] == 3
    assert all(c["max_s"] <= c["total_s"] for c in costs.values())
    v = analyze(tmp_path / "b").verdict
    assert v.hang == "hang" and "two looks" in v.hang_basis and "collection time" in v.hang_basis
    assert v.hung_ranks == [0, 1, 2]
    assert v.culprit is not None and v.culprit.rank == 1 and v.culprit.reason_class == ReasonClass.OUTSIDE, v.text


def test_a_training_job_shows_progress_and_no_hang_culprit(running_job, tmp_path, forensics_cli, cli_env):
    pids = running_job()
    _collect(pids, tmp_path / "b", forensics_cli, cli_env)
    v = analyze(tmp_path / "b").verdict
    assert v.hang == "progress" and "two looks" in v.hang_basis, v.text
    assert v.culprit is None or v.culprit.reason_class == ReasonClass.STRAGGLER, v.text


def test_without_a_second_look_one_snapshot_names_no_hang_culprit(hung_job, tmp_path, forensics_cli, cli_env):
    job = hung_job("sleep", ranks=3, culprit=1)
    manifest = _collect(job.pids, tmp_path / "b", forensics_cli, cli_env, "--second-look", "0")
    assert not any(c["name"] == "second-look" for r in manifest["ranks"] for c in r["collectors"])
    v = analyze(tmp_path / "b").verdict
    assert v.hang == "not established" and v.culprit is None, v.text
    assert v.suspects and v.suspects[0].rank == 1 and v.suspects[0].demotion.unproven  # a lead, not a culprit
    assert any("rank 1" in lead for lead in v.leads), v.leads

"""Real hung gloo jobs, collected with the real py-spy and gdb, analyzed end to end.

After every collection each target must be in the run state it had before.
"""

from __future__ import annotations

import json

import pytest

from parsers.model.manifest import JobArtifact, Status
from forensics.bundle.writer import BundleWriter
from forensics.collect.local import collect_local
from forensics.collectors.base import CollectOptions
from forensics.demo.launcher import write_record
from forensics.report.words import analyze

pytestmark = pytest.mark.integration


def _collect(job, out, options=None, with_launcher=False):
    writer = BundleWriter(out)
    if with_launcher:
        write_record(job, out / "launcher.json")
        writer.add_artifact(JobArtifact(kind="launcher", path="launcher.json"))
    result = collect_local(out, options or CollectOptions(), pids=job.alive_pids(), quiet=True, writer=writer)
    verdict = analyze(out).verdict
    return result, verdict


def test_sleeper_is_named_and_nothing_left_stopped(hung_job, tmp_path, proc_state):
    job = hung_job("sleep", ranks=4, culprit=2)
    before = {pid: proc_state(pid) for pid in job.pids}
    result, verdict = _collect(job, tmp_path / "b")
    assert result.complete
    culprit = verdict.culprit
    assert (culprit.rank, culprit.pid, culprit.reason_class) == (2, job.pids[2], "outside-collective")
    assert "slow_data_loader" in culprit.reason
    assert "ranks 0-1,3 wait in all_reduce" in verdict.consequences  # its own line under the verdict (issue 27)
    after = {pid: proc_state(pid) for pid in job.pids}
    assert all(s not in ("T", "t") for s in after.values()), (before, after)
    assert [r.state_before for r in result.writer.manifest.ranks] == [before[p] for p in job.pids]


def test_stopped_rank_is_named_and_stays_stopped(hung_job, tmp_path, proc_state):
    job = hung_job("stop", ranks=4, culprit=1)
    assert proc_state(job.pids[1]) == "T"
    result, verdict = _collect(job, tmp_path / "b")
    culprit = verdict.culprit
    assert (culprit.rank, culprit.reason_class) == (1, "stopped")
    rec = result.writer.manifest.ranks[1]
    spy = rec.collector("py-spy")
    assert spy.status == Status.OK and spy.details["nonblocking"] is True
    # the stopped rank stays stopped (it is evidence); the others keep running
    assert proc_state(job.pids[1]) == "T"
    assert all(proc_state(p) not in ("T", "t") for i, p in enumerate(job.pids) if i != 1)


def test_crashed_rank_is_missing_and_named(hung_job, tmp_path):
    job = hung_job("crash", ranks=4, culprit=3)
    result, verdict = _collect(job, tmp_path / "b", with_launcher=True)
    assert [m.rank for m in result.writer.manifest.missing] == [3]
    culprit = verdict.culprit
    assert (culprit.rank, culprit.reason_class) == (3, "missing")
    assert "exited with code 17" in culprit.reason
    assert any("wait in new_group" in line for line in verdict.consequences)  # its own line (issue 27)


def test_gdb_backtraces_show_gloo_threads_and_detach(hung_job, tmp_path, proc_state):
    job = hung_job("sleep", ranks=2, culprit=1)
    result, verdict = _collect(job, tmp_path / "b", CollectOptions(gdb=True))
    for rec in result.writer.manifest.ranks:
        gdb = rec.collector("gdb")
        assert gdb.status == Status.OK, gdb.error
        assert rec.state_after not in ("T", "t")
        data = json.loads((tmp_path / "b" / gdb.files[0]).read_text())
        assert "pt_gloo_runloop" in {t.get("name") for t in data["threads"]}
    assert all(proc_state(p) not in ("T", "t") for p in job.pids)
    assert verdict.culprit.rank == 1


def test_gdb_cut_short_leaves_target_running(hung_job, tmp_path, proc_state):
    job = hung_job("sleep", ranks=2, culprit=1)
    result, _ = _collect(job, tmp_path / "b", CollectOptions(gdb=True, extra={"gdb_timeout": 0.3}))
    gdb = [rec.collector("gdb") for rec in result.writer.manifest.ranks]
    assert {g.status for g in gdb} == {Status.TIMEOUT}, [(g.status, g.error) for g in gdb]  # what went otherwise
    assert not result.complete
    assert all(proc_state(p) not in ("T", "t") for p in job.pids)



def test_discovery_finds_the_job_and_drops_loader_children(hung_job, tmp_path):
    import os
    import subprocess
    import sys

    from forensics.collect.targets import discover
    from forensics.discover.ranks import job_id_of
    from forensics.discover.procfs import read_environ

    job = hung_job("sleep", ranks=3, culprit=1)
    job_id = job_id_of(read_environ(job.pids[0]))
    ranks, _ = discover(job=job_id)
    assert sorted(r.pid for r in ranks) == sorted(job.pids)
    assert sorted(r.rank for r in ranks) == [0, 1, 2]

    # a rank that starts a data-loader-like child: the child inherits RANK but is not a rank
    env = dict(os.environ, RANK="0", WORLD_SIZE="1", TORCHELASTIC_RUN_ID=f"loader-test-{os.getpid()}")
    code = ("import subprocess,sys; c=subprocess.Popen([sys.executable,'-c','import time; time.sleep(60)']); "
            "print(c.pid, flush=True); c.wait()")
    parent = subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, text=True)
    try:
        child_pid = int(parent.stdout.readline())
        ranks, _ = discover(job=env["TORCHELASTIC_RUN_ID"])
        assert [r.pid for r in ranks] == [parent.pid], (child_pid, ranks)
        result = collect_local(tmp_path / "b", CollectOptions(), quiet=True, job=env["TORCHELASTIC_RUN_ID"])
        assert [r.pid for r in result.writer.manifest.ranks] == [parent.pid]
        # ... but it is collected as the rank's child, with its state and stack
        kids = result.writer.manifest.ranks[0].children
        assert [(k.pid, k.ppid, k.inherits_rank) for k in kids] == [(child_pid, parent.pid, True)]
        assert kids[0].state == "S" and {c.name: c.status for c in kids[0].collectors} == {
            "process_state": Status.OK, "py-spy": Status.OK}
    finally:
        subprocess.run(["pkill", "-KILL", "-P", str(parent.pid)])
        parent.kill()
        parent.wait()

"""Detector rules, env setup, GC schedule, leader election (real TCPStore and lock files), collection argv."""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from forensics.trigger import election, launch
from forensics.trigger.auto import arm_from_env
from forensics.trigger.detector import Detector
from forensics.trigger.envsetup import apply_env, recommended_env
from forensics.trigger.gc_control import GcSchedule

REPO = Path(__file__).resolve().parents[3]


def test_stall_fires_after_the_limit_and_progress_resets_it():
    d = Detector(stall_after=10, slow_factor=100)
    d.start(0.0)
    assert d.check(9.9) is None
    d.collective_done(9.0)
    assert d.check(18.9) is None
    alarm = d.check(19.0)
    assert alarm.kind == "stall" and "10.0 s" in alarm.message


def test_slow_step_needs_history_and_fires_while_running():
    d = Detector(stall_after=1e9, slow_factor=4, min_history=5, min_slow=1.0)
    d.start(0.0)
    t = 0.0
    for _ in range(6):  # step 0 opens the loop, then 5 steps of 0.5 s
        t += 0.5
        d.step_done(t)
    assert d.typical_step() == 0.5
    assert d.check(t + 1.9) is None
    alarm = d.check(t + 2.0)
    assert alarm.kind == "slow-step" and alarm.step == 6 and "4x the median" in alarm.message


def test_slow_step_respects_min_slow():
    d = Detector(stall_after=1e9, slow_factor=4, min_history=2, min_slow=3.0)
    d.start(0.0)
    for t in (0.01, 0.02, 0.03):
        d.step_done(t)
    assert d.check(0.03 + 2.9) is None and d.check(0.03 + 3.0).kind == "slow-step"


def test_env_is_set_only_where_the_user_did_not(tmp_path):
    env = {"NCCL_DEBUG": "WARN", "TORCH_NCCL_TRACE_BUFFER_SIZE": "100"}
    applied = apply_env(tmp_path / "logs", env)
    assert env["NCCL_DEBUG"] == "WARN" and "NCCL_DEBUG" not in applied
    assert "TORCH_FR_BUFFER_SIZE" not in env  # the old name counts as the user's choice
    assert env["NCCL_DEBUG_FILE"] == f"{tmp_path}/logs/nccl.%h.%p.log"
    assert env["TORCH_FR_DUMP_TEMP_FILE"].endswith("/logs/fr_trace_rank_")
    assert {v.name for v in recommended_env("/x")} >= {"NCCL_PROXY_DUMP_SIGNAL", "NCCL_RAS_ENABLE",
                                                       "TORCH_NCCL_DUMP_ON_TIMEOUT"}


def test_env_makes_a_post_mortem_decidable(tmp_path):
    """Issue 39: FR timing on (started vs scheduled), the recorder's copy beside the NCCL logs."""
    env = {"NCCL_ENABLE_TIMING": "0"}
    applied = apply_env(tmp_path / "logs", env)
    assert "TORCH_NCCL_ENABLE_TIMING" not in applied  # the old name is the user's choice
    env = {}
    apply_env(tmp_path / "logs", env)
    assert env["TORCH_NCCL_ENABLE_TIMING"] == "1"
    assert env["FORENSICS_RECORDER_COPY_DIR"] == str(tmp_path / "logs")
    assert env["FORENSICS_RECORDER_COPY_DIR"] == env["NCCL_DEBUG_FILE"].rsplit("/", 1)[0]


def test_gc_schedule_disables_and_collects_every_n():
    was = gc.isenabled()
    sched = GcSchedule(3)
    try:
        assert not gc.isenabled()
        for step in range(1, 10):
            sched.on_step(step)
        assert sched.collections == 3
    finally:
        sched.restore()
    assert gc.isenabled() == was
    with pytest.raises(ValueError):
        GcSchedule(0)


def test_lock_file_election_has_one_winner(tmp_path):
    results = []
    threads = [threading.Thread(target=lambda: results.append(election.elect("7", tmp_path,
                                                                             None)[0])) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results.count(True) == 1


@pytest.mark.integration  # imports torch, a real TCPStore
def test_store_election_and_members_over_a_real_tcpstore():
    torch_dist = pytest.importorskip("torch.distributed")
    store = torch_dist.TCPStore("127.0.0.1", 29931, 1, True, wait_for_workers=False)
    results = []
    threads = [threading.Thread(target=lambda: results.append(election.elect("1", Path("/nonexistent"),
                                                                             store))) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert [r for r in results if r[0]] == [(True, "store")] and len(results) == 6
    election.publish_self(store, 0, "node1", 11)
    election.publish_self(store, 2, "node2", 22)
    assert election.read_members(store, 4) == {0: ("node1", 11), 2: ("node2", 22)}  # rank 1, 3 absent: no wait


def test_collection_argv_per_layout(tmp_path):
    out = tmp_path / "b"
    local = launch.collection_argv(out, {0: ("h", 10), 1: ("h", 11)}, "h", {}, [])
    assert local[-2:] == ["--pid", "10,11"]
    multi = launch.collection_argv(out, {0: ("n1", 10), 1: ("n2", 11)}, "n1",
                                   {"TORCHELASTIC_RUN_ID": "abc", "MASTER_PORT": "1"}, ["--fanout", "8"])
    assert multi[-6:] == ["--hosts", "n[1-2]", "--match-env", "TORCHELASTIC_RUN_ID=abc", "--fanout", "8"]
    slurm = launch.collection_argv(out, {0: ("n1", 10), 1: ("n2", 11)}, "n1", {"SLURM_JOB_ID": "77"}, [])
    assert slurm[-2:] == ["--slurm-job", "77"]


def test_env_var_arming_is_off_by_default_and_runs_a_script(tmp_path):
    assert arm_from_env({}) is None
    script = tmp_path / "train.py"
    script.write_text("import forensics.trigger.watch as a, sys, os\nprint('armed' if a._armed else 'bare', "
                      "sys.argv[1:], os.environ.get('NCCL_DEBUG_FILE', '-'))\n")
    env = dict(os.environ, PYTHONPATH=str(REPO), FORENSICS_OUT=str(tmp_path / "o"))
    env.pop("NCCL_DEBUG_FILE", None)
    bare = subprocess.run([sys.executable, "-m", "forensics.trigger.autoarm", str(script), "x"], capture_output=True,
                          text=True, env=env)
    assert bare.stdout.split()[0] == "bare"
    armed = subprocess.run([sys.executable, "-m", "forensics.trigger.autoarm", str(script), "x"], capture_output=True,
                           text=True, env=dict(env, FORENSICS_ARM="1"))
    assert armed.stdout.startswith("armed ['x']") and str(tmp_path / "o" / "logs") in armed.stdout, armed.stderr


def test_env_command_prints_sourceable_exports(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NCCL_", "TORCH_"))}
    env["PYTHONPATH"] = str(REPO)
    text = subprocess.run([sys.executable, "-m", "forensics", "env", "--dir", str(tmp_path / "a b")],
                          capture_output=True, text=True, env=env, check=True).stdout
    shown = subprocess.run(["bash", "-c", text + '\necho "$NCCL_DEBUG_FILE|$TORCH_FR_DUMP_TEMP_FILE"'],
                           capture_output=True, text=True).stdout.strip()
    assert shown == f"{tmp_path}/a b/nccl.%h.%p.log|{tmp_path}/a b/fr_trace_rank_"
    assert (tmp_path / "a b").is_dir()

"""Launchers build safe argv lists; the state file is atomic and checked."""

from __future__ import annotations

import json
import shlex
import subprocess

import pytest

from forensics.bisect import state as state_io
from forensics.bisect.launchers import (JobSpec, LaunchError, LocalLauncher, SlurmLauncher, SSHLauncher, expand,
                                        expand_hosts)

SPEC = JobSpec(["node001", "node002", "node003"], 29711, 2, 4, 90)


def test_placeholders_are_replaced_inside_single_arguments():
    argv = expand("torchrun --nnodes {nnodes} --rdzv-endpoint {first}:{port} 'train x.py' --hosts={hosts}", SPEC)
    assert argv == ["torchrun", "--nnodes", "3", "--rdzv-endpoint", "node001:29711", "train x.py",
                    "--hosts=node001,node002,node003"]


def test_shell_metacharacters_stay_data_when_run_locally(tmp_path):
    marker = tmp_path / "pwned"
    argv = LocalLauncher().argv(expand(f"echo {{hosts}} ';touch {marker}'", SPEC), SPEC)
    out = subprocess.run(argv, capture_output=True, text=True).stdout
    assert out.strip() == f"node001,node002,node003 ;touch {marker}"
    assert not marker.exists()


@pytest.mark.parametrize("bad", ["-oProxyCommand=sh", "a;b", "a b", "$(x)", ""])
def test_unsafe_host_names_are_refused(bad):
    with pytest.raises(LaunchError):
        expand("true {hosts}", JobSpec([bad], 1, 1, 1, 1))


def test_ssh_quotes_the_remote_command_and_bounds_it():
    argv = SSHLauncher(options=["Port=2222"]).argv(["sh", "-c", "echo $HOME; exit 3"], SPEC)
    assert argv[:7] == ["ssh", "-o", "BatchMode=yes", "-o", "ConnectTimeout=10", "-o", "Port=2222"]
    assert argv[argv.index("--") + 1] == "node001"
    assert shlex.split(argv[-1]) == ["timeout", "-k", "5", "90", "sh", "-c", "echo $HOME; exit 3"]


def test_srun_runs_on_exactly_the_group_with_a_time_limit():
    argv = SlurmLauncher(extra=["--partition=debug"]).argv(["./check"], SPEC)
    assert "--nodelist=node[001-003]" in argv and "--nodes=3" in argv and "--time=2" in argv
    assert argv[-2:] == ["--partition=debug", "./check"]


def test_host_sets_expand_sorted_by_clustershell():
    assert expand_hosts("node[01-03],gpu7") == ["gpu7", "node01", "node02", "node03"]
    with pytest.raises(LaunchError):
        expand_hosts("node[01-")


def test_state_round_trip_and_atomic_replace(tmp_path):
    path = tmp_path / "s.json"
    st = state_io.new_state({"units": []})
    state_io.save(st, path)
    st["rounds"].append({"index": 0})
    state_io.save(st, path)
    assert state_io.load(path)["rounds"] == [{"index": 0}]
    assert [p.name for p in tmp_path.iterdir()] == ["s.json"]  # no temp files left


@pytest.mark.parametrize("text,msg", [("{", "not valid JSON"), ('{"format": "other"}', "not a bisect state"),
                                      (json.dumps({"format": state_io.FORMAT, "version": 99}), "newer")])
def test_bad_state_files_are_refused_clearly(tmp_path, text, msg):
    path = tmp_path / "s.json"
    path.write_text(text)
    with pytest.raises(state_io.StateError, match=msg):
        state_io.load(path)

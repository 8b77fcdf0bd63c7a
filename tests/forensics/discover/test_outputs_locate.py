"""forensics.discover.outputs on real processes and real torchrun layouts (no mocks).

A real child process writes into real files; its /proc entries are what is read.
The torchrun --log-dir tree is the one a real `torchrun --log-dir` run left
(tests/fixtures/gloo14/torchrun/logdir).
"""

import os
import shutil
import subprocess
import sys

import pytest

from forensics.discover import outputs
from hf_testpaths import FIXTURES

LOGDIR = FIXTURES / "gloo14" / "torchrun" / "logdir"


@pytest.fixture
def sleeper(tmp_path):
    procs = []

    def start(env=None, stdout=None, stderr=None, cwd=None):
        p = subprocess.Popen([sys.executable, "-c", "import time; print('hi', flush=True); time.sleep(60)"],
                             env=env, stdout=stdout, stderr=stderr, cwd=cwd)
        procs.append(p)
        return p

    yield start
    for p in procs:
        p.kill()
        p.wait()


def test_fd_files_are_found_and_copied_through_proc(sleeper, tmp_path):
    out, err = open(tmp_path / "r.out", "wb"), open(tmp_path / "r.err", "wb")
    p = sleeper(stdout=out, stderr=err)
    out.close(), err.close()
    found = []
    for _ in range(50):
        found = outputs.locate_outputs(p.pid, {})
        if found and found[0].size:
            break
        subprocess.run(["sleep", "0.1"])
    assert [(f.kind, f.stream, f.path) for f in found] == [("fd", "stdout", str(tmp_path / "r.out")),
                                                           ("fd", "stderr", str(tmp_path / "r.err"))]
    assert found[0].open_path == f"/proc/{p.pid}/fd/1"
    # the named path is replaced by a symlink to another file: the copy still reads the process's own file
    os.rename(tmp_path / "r.out", tmp_path / "moved")
    (tmp_path / "secret").write_text("not yours")
    os.symlink(tmp_path / "secret", tmp_path / "r.out")
    copied = outputs.copy_output(found[0], tmp_path / "copy", 1 << 20, outputs.target_user(p.pid))
    assert copied == (3, False) and (tmp_path / "copy").read_text() == "hi\n"


def test_pipes_are_not_outputs(sleeper):
    p = sleeper(stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert outputs.locate_outputs(p.pid, {}) == []


def test_torchelastic_error_file_and_its_torchrun_logs(sleeper, tmp_path):
    tree = tmp_path / "logs"
    shutil.copytree(LOGDIR, tree)
    env = dict(os.environ, TORCHELASTIC_ERROR_FILE=str(tree / "attempt_0" / "1" / "error.json"))
    p = sleeper(env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    found = outputs.locate_outputs(p.pid, env, local_rank=1)
    assert [(f.kind, f.stream) for f in found] == [("error-file", "error"), ("torchrun-log", "stdout"),
                                                   ("torchrun-log", "stderr")]
    assert found[2].path.endswith("attempt_0/1/stderr.log")


def test_symlinked_error_file_is_refused(sleeper, tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "secret").write_text("root only")
    os.symlink(tmp_path / "secret", tmp_path / "a" / "error.json")
    os.symlink(tmp_path / "secret", tmp_path / "a" / "stderr.log")
    env = dict(os.environ, TORCHELASTIC_ERROR_FILE=str(tmp_path / "a" / "error.json"))
    p = sleeper(env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    assert outputs.locate_outputs(p.pid, env) == []


def test_file_of_another_owner_is_refused(sleeper, tmp_path):
    if os.geteuid() != 0:
        pytest.skip("needs root to chown")
    log = tmp_path / "x" / "stderr.log"
    log.parent.mkdir()
    log.write_text("someone else's")
    os.chown(log, 12345, 12345)
    env = dict(os.environ, TORCHELASTIC_ERROR_FILE=str(log.parent / "error.json"))
    p = sleeper(env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    assert outputs.locate_outputs(p.pid, env) == []


def test_torchrun_log_dir_of_the_parent_agent(tmp_path):
    tree = tmp_path / "logs" / "run1_abc"
    shutil.copytree(LOGDIR, tree)
    # a real parent whose command line names --log-dir, as torchrun's agent does
    code = ("import subprocess,sys,time; c=subprocess.Popen([sys.executable,'-c','import time; time.sleep(60)'],"
            " stdout=subprocess.DEVNULL); print(c.pid, flush=True); time.sleep(60)")
    parent = subprocess.Popen([sys.executable, "-c", code, "--log-dir", str(tmp_path / "logs")], stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL,
                              text=True)
    try:
        child = int(parent.stdout.readline())
        found = outputs.locate_outputs(child, {}, local_rank=0)
        assert [(f.kind, f.stream) for f in found] == [("torchrun-log", "stdout"), ("torchrun-log", "stderr")]
        assert "attempt_0/0/" in found[0].path
    finally:
        subprocess.run(["pkill", "-KILL", "-P", str(parent.pid)])
        parent.kill()
        parent.wait()


def test_slurm_default_output_names():
    env = {"SLURM_SUBMIT_DIR": "/home/u/run", "SLURM_JOB_ID": "4242", "SLURM_ARRAY_JOB_ID": "4240",
           "SLURM_ARRAY_TASK_ID": "2"}
    assert outputs.slurm_output_names(env) == ["/home/u/run/slurm-4240_2.out", "/home/u/run/slurm-4242.out"]
    assert outputs.slurm_output_names({"SLURM_SUBMIT_DIR": "/x", "SLURM_JOB_ID": "1; rm -rf /"}) == []


def test_slurm_output_found(sleeper, tmp_path):
    (tmp_path / "slurm-77.out").write_text("[rank3]: RuntimeError: x\n")
    env = dict(os.environ, SLURM_SUBMIT_DIR=str(tmp_path), SLURM_JOB_ID="77")
    p = sleeper(env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    found = outputs.locate_outputs(p.pid, env)
    assert [(f.kind, f.stream, f.path) for f in found] == [("slurm-output", "combined", str(tmp_path / "slurm-77.out"))]


def test_torchrun_log_dir_flag_forms():
    assert outputs.torchrun_log_dir(["torchrun", "--log-dir", "/l", "x.py"]) == "/l"
    assert outputs.torchrun_log_dir(["torchrun", "--log_dir=/m", "x.py"]) == "/m"
    assert outputs.torchrun_log_dir(["python", "x.py"]) is None

"""Bad input gets a clear message, a documented exit code, and keeps what was gathered."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path
import subprocess
import sys
import time

import pytest

from parsers.model.manifest import Status
from forensics.collect.local import collect_local
from forensics.collectors.base import CollectOptions

pytestmark = pytest.mark.integration


def _run(argv, env, **kw):
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120, **kw)


def test_unknown_pid(forensics_cli, cli_env, tmp_path):
    proc = _run([*forensics_cli, "collect", "--pid", "999999999", "-o", str(tmp_path / "b")], cli_env)
    assert proc.returncode == 2
    # wording is the behaviour: the CLI's error for a pid that does not exist
    assert "pid 999999999: no such process" in proc.stderr


def test_not_a_bundle_and_corrupt_manifest(forensics_cli, cli_env, tmp_path):
    proc = _run([*forensics_cli, "analyze", str(tmp_path)], cli_env)
    assert proc.returncode == 2 and "not a bundle" in proc.stderr
    (tmp_path / "manifest.json").write_text("{not json")
    proc = _run([*forensics_cli, "analyze", str(tmp_path)], cli_env)
    assert proc.returncode == 2 and "corrupted manifest" in proc.stderr


def _sleeper(env_extra=None, seconds="60"):
    env = dict(os.environ, RANK="0", WORLD_SIZE="1", LOCAL_WORLD_SIZE="1", **(env_extra or {}))
    return subprocess.Popen([sys.executable, "-c", f"import time; time.sleep({seconds})"], env=env)


def test_missing_tools_are_recorded_and_rest_kept(tmp_path, monkeypatch):
    target = _sleeper()
    try:
        monkeypatch.setenv("FORENSICS_GDB", "/nonexistent/gdb")
        monkeypatch.setenv("FORENSICS_PY_SPY", "/nonexistent/py-spy")
        result = collect_local(tmp_path / "b", CollectOptions(gdb=True), pids=[target.pid], quiet=True)
        rec = result.writer.manifest.ranks[0]
        assert rec.collector("gdb").status == Status.UNAVAILABLE
        assert rec.collector("py-spy").status == Status.UNAVAILABLE
        assert rec.collector("process_state").status == Status.OK
        assert not result.complete
        manifest = json.loads((tmp_path / "b" / "manifest.json").read_text())
        assert manifest["ranks"][0]["collectors"][0]["name"] == "process_state"
    finally:
        target.kill()
        target.wait()


def test_target_exits_during_collection(tmp_path):
    target = _sleeper(seconds="0.4")
    try:
        time.sleep(0.1)
        result = collect_local(tmp_path / "b", CollectOptions(gdb=True, extra={"gdb_timeout": 30}), pids=[target.pid],
                               quiet=True)
    finally:
        target.wait()
    rec = result.writer.manifest.ranks[0]
    assert rec.state_after in (None, "Z")  # exited by the end (zombie until reaped)
    assert rec.collector("gdb").status in (Status.GONE, Status.FAILED, Status.OK)
    assert (tmp_path / "b" / "manifest.json").is_file()


def _zombie() -> subprocess.Popen:
    """A child that has exited and is not reaped yet (state Z): what a target that ends mid-collection is."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with open(f"/proc/{child.pid}/stat") as fh:
            if fh.read().rsplit(")", 1)[1].split()[0] == "Z":
                return child
        time.sleep(0.02)
    child.kill()
    raise AssertionError("the child did not become a zombie")


@pytest.mark.parametrize("which", ["gdb", "py-spy"])
def test_a_zombie_target_is_gone_not_denied(which, tmp_path):
    """ptrace on a zombie fails with EPERM, the words of a refused attach (gdb: 'process N is a zombie ...
    Operation not permitted', seen when a target exited during collection): the record must say gone."""
    from forensics.collectors.base import RankTarget
    from forensics.collectors.gdb import GdbCollector
    from forensics.collectors.pyspy import PySpyCollector

    tool = {"gdb": "gdb", "py-spy": "py-spy"}[which]
    if shutil.which(tool) is None and not (Path(sys.executable).parent / tool).exists():
        pytest.skip(f"{tool} is not installed")
    child = _zombie()
    try:
        (tmp_path / "r0").mkdir()
        target = RankTarget(pid=child.pid, host="h", rank=0, environ={}, bundle_root=tmp_path, rel_dir="r0")
        collector = GdbCollector() if which == "gdb" else PySpyCollector()
        rec = collector.collect(target, CollectOptions(gdb=True, extra={"gdb_timeout": 30}))
    finally:
        child.wait()
    assert rec.status == Status.GONE, rec


def test_ptrace_not_permitted_is_clear(tmp_path, forensics_cli, cli_env):
    if os.geteuid() != 0:
        pytest.skip("needs root to run the collector as another user")
    target = _sleeper()
    shared = Path(tempfile.mkdtemp(prefix="forensics-denied-", dir="/tmp"))
    os.chmod(shared, 0o777)
    out = shared / "b"
    try:
        proc = _run(
            ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", *forensics_cli, "collect", "--pid",
             str(target.pid), "-o", str(out), "--json", "-q"],
            dict(cli_env, HOME=str(shared)),
        )
    finally:
        target.kill()
        target.wait()
        shutil.rmtree(shared, ignore_errors=True)
    assert proc.returncode == 3, proc.stderr
    summary = json.loads(proc.stdout)
    spy = next(f for f in summary["failures"] if f["collector"] == "py-spy")
    assert spy["status"] == "denied" and "CAP_SYS_PTRACE" in spy["error"]


def test_unwritable_output_is_a_clear_error(forensics_cli, cli_env, tmp_path):
    target = _sleeper()
    try:
        proc = _run([*forensics_cli, "collect", "--pid", str(target.pid), "-o", "/proc/forbidden/b"], cli_env)
    finally:
        target.kill()
        target.wait()
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr and "error:" in proc.stderr

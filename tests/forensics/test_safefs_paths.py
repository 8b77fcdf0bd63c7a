"""Issue 40 item 1: a root `forensics` writes only where the caller could. Every output path is walked from /
one component at a time (forensics.safefs.check_parents / ensure_folder): a folder another user owns or may
write to, or a link another user planted, refuses the write with a line that says which component and why.

Reproducer of the issue: the user plants /home/evil/out -> /etc (here: a folder of root's that stands for
/etc) and asks root for `analyze|hosts|report B -o /home/evil/out/NAME` and `collect -o /home/evil/out/NAME`;
nothing may appear in the victim folder.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from forensics import safefs
from forensics.errors import ForensicsError
from hf_testpaths import FIXTURES, REPO
from throwaway_user import throwaway_user

BUNDLE = FIXTURES / "nccl" / "sigstop" / "bundle"
ENV = {**os.environ, "PYTHONPATH": str(REPO)}


def _cli(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "forensics", *argv], capture_output=True, text=True, env=ENV,
                          timeout=180)


@pytest.fixture(scope="module")
def evil():
    with throwaway_user("hf40p") as user:
        yield user


@pytest.fixture
def land(tmp_path: Path, evil):
    """tmp/home/evil (the user's, 0755) holding out -> tmp/etc (root's victim folder), a shared 1777 area where
    the user planted a link too, a root folder others may write (0777, no sticky bit) and a root-owned link."""
    uid, gid, _ = evil
    os.chmod(tmp_path, 0o755)
    victim = tmp_path / "etc"
    victim.mkdir(mode=0o755)
    home = tmp_path / "home" / "evil"
    home.mkdir(parents=True)
    os.chown(home, uid, gid)
    os.symlink(victim, home / "out")
    os.lchown(home / "out", uid, gid)
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o1777)
    os.symlink(victim, shared / "out")
    os.lchown(shared / "out", uid, gid)
    loose = tmp_path / "loose"
    loose.mkdir()
    os.chmod(loose, 0o777)
    mine = tmp_path / "mine"
    mine.mkdir(mode=0o755)
    os.symlink(mine, tmp_path / "rootlink")
    return tmp_path


PLANTED = ("home/evil/out/NAME", "home/evil/NAME", "shared/out/NAME", "loose/NAME", "home/evil/out/new/NAME")


@pytest.mark.parametrize("rel", PLANTED)
def test_check_parents_refuses_every_planted_component(land: Path, rel: str):
    with pytest.raises(ForensicsError) as info:
        safefs.check_parents(land / rel)
    text = str(info.value)
    assert "refused as root" in text
    assert any(w in text for w in ("symbolic link of uid", "belongs to uid", "may be written by other users")), text
    with pytest.raises(ForensicsError):
        safefs.ensure_folder((land / rel).parent / "more")
    assert list((land / "etc").iterdir()) == []


def test_trusted_paths_still_written(land: Path):
    """A root-owned link, a sticky shared folder (/tmp), `..` after a link, a relative path: all written."""
    for rel in ("rootlink/a.txt", "shared/b.txt", "rootlink/../mine/c.txt", "mine/new/deeper/d.txt"):
        path = land / rel
        safefs.ensure_folder(path.parent)
        safefs.write_new(path, "x")
    assert sorted(p.name for p in (land / "mine").rglob("*.txt")) == ["a.txt", "c.txt", "d.txt"]
    assert (land / "shared" / "b.txt").read_text() == "x"
    os.chdir(land / "mine")
    try:
        safefs.write_new(Path("e.txt"), "y")
    finally:
        os.chdir(REPO)
    assert (land / "mine" / "e.txt").read_text() == "y"


def test_link_loop_is_refused(land: Path):
    os.symlink(land / "loopb", land / "loopa")
    os.symlink(land / "loopa", land / "loopb")
    with pytest.raises(ForensicsError, match="link too many"):
        safefs.check_parents(land / "loopa" / "x")


@pytest.mark.integration
@pytest.mark.parametrize("rel", ["home/evil/out/NAME", "shared/out/NAME"])
def test_commands_refuse_the_planted_parent(land: Path, rel: str):
    """The issue's reproducer through the CLI: exit 2, one line naming the component, nothing in the victim."""
    target = str(land / rel)
    runs = {
        "analyze": _cli("analyze", str(BUNDLE), "-o", target),
        "analyze --json": _cli("analyze", str(BUNDLE), "--json", "-o", target),
        "hosts": _cli("hosts", str(BUNDLE), "-o", target),
        "report": _cli("report", str(BUNDLE), "-o", target),
        "collect": _cli("collect", "--pid", "999999", "-o", target),
        "collect --tar": _cli("collect", "--pid", "999999", "--tar", "-o", target + "/b"),
    }
    for what, run in runs.items():
        assert run.returncode == 2, (what, run.returncode, run.stderr[-2000:])
        assert "refused as root" in run.stderr and "Traceback" not in run.stderr, (what, run.stderr)
    assert list((land / "etc").iterdir()) == []


@pytest.mark.integration
def test_every_other_writer_refuses_the_planted_parent(land: Path):
    """The writers the reproducer did not name, each reaching the checked writer its own way: steps -o,
    recorder env -o, bisect --state, the fleet's collect --hosts -o, and analyze --save and report's default
    file into a bundle that lies in the victim folder, reached through the planted link. Each refuses (exit 2,
    one line) and the victim folder, the bundle in it included, is as it was."""
    series = land / "mine" / "steps.txt"
    series.write_text("1.0\n1.0\n1.1\n1.0\n")
    bundle = land / "etc" / "b"
    shutil.copytree(BUNDLE, bundle)
    before = sorted(p.name for p in bundle.iterdir())
    planted = land / "home/evil/out"
    runs = {
        "steps": _cli("steps", str(series), "-o", f"{planted}/s.txt"),
        "recorder env": _cli("recorder", "env", "-o", f"{planted}/r.txt"),
        "bisect --state": _cli("bisect", "--hosts", "n1,n2", "--test", "true {hosts}", "--launcher", "local",
                               "--state", f"{planted}/state.json"),
        "collect --hosts": _cli("collect", "--hosts", "n1", "-o", f"{planted}/fleet"),
        "analyze --save": _cli("analyze", f"{planted}/b", "--save"),
        "report": _cli("report", f"{planted}/b"),
    }
    for what, run in runs.items():
        assert run.returncode == 2, (what, run.returncode, run.stderr[-2000:])
        assert "refused as root" in run.stderr and "Traceback" not in run.stderr, (what, run.stderr)
    assert [p.name for p in (land / "etc").iterdir()] == ["b"] and sorted(p.name for p in bundle.iterdir()) == before

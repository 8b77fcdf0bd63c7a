"""forensics.safefs: files opened for a job as its user; files written only new, in folders we made or claimed."""

from __future__ import annotations

import os
import pwd
import stat

import pytest

from forensics import safefs
from forensics.errors import ForensicsError
from open_dirs import open_dir
from parsers.input.safeio import UnsafeFile


def test_create_never_follows_or_overwrites(tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("keep\n")
    (tmp_path / "link").symlink_to(victim)
    with pytest.raises(ForensicsError, match="symbolic link|already exists"):
        safefs.write_new(tmp_path / "link", "x")
    with pytest.raises(ForensicsError, match="already exists"):
        safefs.write_new(victim, "x")
    assert victim.read_text() == "keep\n"
    safefs.write_new(tmp_path / "new", "hello")
    assert stat.S_IMODE(os.stat(tmp_path / "new").st_mode) == 0o600


def test_replace_file_replaces_the_name_not_the_link_target(tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("keep\n")
    (tmp_path / "manifest.json").symlink_to(victim)
    safefs.replace_file(tmp_path / "manifest.json", "{}\n")
    assert victim.read_text() == "keep\n" and not (tmp_path / "manifest.json").is_symlink()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["manifest.json", "victim"]


def test_make_dirs_refuses_a_link_component(tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    root = tmp_path / "b"
    root.mkdir()
    (root / "hosts").symlink_to(elsewhere)
    with pytest.raises(ForensicsError, match="not a folder"):
        safefs.make_dirs(root, "hosts/h1")
    assert list(elsewhere.iterdir()) == []
    made = safefs.make_dirs(root, "job/attached")
    assert made.is_dir() and stat.S_IMODE(os.stat(made).st_mode) == 0o700


def test_claim_folder_new_empty_full_and_locked(tmp_path):
    new = safefs.claim_folder(tmp_path / "new")
    assert (new / safefs.LOCK_NAME).is_file() and stat.S_IMODE(os.stat(new).st_mode) == 0o700
    with pytest.raises(ForensicsError, match="in use by another forensics command"):
        safefs.claim_folder(new)
    safefs.release_folder(new)
    assert list(new.iterdir()) == []
    empty = tmp_path / "empty"
    empty.mkdir(mode=0o755)
    safefs.claim_folder(empty)
    assert stat.S_IMODE(os.stat(empty).st_mode) == 0o700
    full = tmp_path / "full"
    full.mkdir()
    (full / "x").write_text("x")
    with pytest.raises(ForensicsError, match="exists and is not empty"):
        safefs.claim_folder(full)
    (tmp_path / "link").symlink_to(tmp_path / "empty2")
    (tmp_path / "empty2").mkdir()
    with pytest.raises(ForensicsError, match="symbolic link"):
        safefs.claim_folder(tmp_path / "link")


def test_private_folder(tmp_path):
    safefs.private_folder(tmp_path)
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)
    with pytest.raises(ForensicsError, match="other users may write"):
        safefs.private_folder(shared)
    (tmp_path / "l").symlink_to(tmp_path)
    with pytest.raises(ForensicsError, match="not a folder"):
        safefs.private_folder(tmp_path / "l")


def test_job_user_is_the_real_ids():
    me = safefs.job_user(os.getpid())
    assert me == safefs.JobUser(os.getuid(), os.getgid())
    assert safefs.job_user(2 ** 30) is None


@pytest.fixture
def open_area():
    """A folder nobody can reach (pytest's tmp_path sits in a 0700 folder)."""
    with open_dir("hf-safefs-", 0o755) as path:
        yield path


@pytest.mark.skipif(os.geteuid() != 0, reason="opening as another user needs root")
def test_open_for_job_as_nobody(open_area):
    tmp_path = open_area
    nobody = pwd.getpwnam("nobody")
    user = safefs.JobUser(nobody.pw_uid, nobody.pw_gid)
    public = tmp_path / "public"
    public.write_text("root's\n")
    public.chmod(0o644)
    with pytest.raises(UnsafeFile, match="owned by another user"):  # readable, but root's: not for nobody's job
        safefs.open_for_job(public, user)
    secret = tmp_path / "secret"
    secret.write_text("root only\n")
    secret.chmod(0o600)
    with pytest.raises(PermissionError, match="as uid"):
        safefs.open_for_job(secret, user)
    hidden = tmp_path / "hidden"
    hidden.mkdir(mode=0o700)
    theirs = hidden / "theirs"
    theirs.write_text("nobody's, out of reach\n")
    os.chown(theirs, user.uid, user.gid)
    with pytest.raises(PermissionError):  # owned by nobody, but nobody could not reach it
        safefs.open_for_job(theirs, user)
    mine = tmp_path / "mine"
    mine.write_text("nobody's\n")
    os.chown(mine, user.uid, user.gid)
    with safefs.open_for_job(mine, user) as fh:
        assert fh.read() == b"nobody's\n"
    (tmp_path / "link").symlink_to(mine)
    with pytest.raises(UnsafeFile, match="symbolic link"):
        safefs.open_for_job(tmp_path / "link", user)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    os.chown(fifo, user.uid, user.gid)
    with pytest.raises(UnsafeFile, match="not a regular file"):
        safefs.open_for_job(fifo, user)
    with pytest.raises(UnsafeFile, match="group root"):
        safefs.open_for_job(mine, safefs.JobUser(user.uid, 0))


@pytest.mark.skipif(os.geteuid() != 0, reason="opening as another user needs root")
def test_open_for_job_from_many_threads_leaves_no_child(open_area):
    """collect opens from one thread per rank: forks from threads work, and every child is reaped."""
    from concurrent.futures import ThreadPoolExecutor

    nobody = pwd.getpwnam("nobody")
    user = safefs.JobUser(nobody.pw_uid, nobody.pw_gid)
    mine = open_area / "mine"
    mine.write_text("x" * 100)
    os.chown(mine, user.uid, user.gid)

    def one(_):
        with safefs.open_for_job(mine, user) as fh:
            return len(fh.read())

    before = set(_children())  # children other tests left behind are not this test's to count
    with ThreadPoolExecutor(8) as pool:
        assert set(pool.map(one, range(64))) == {100}
    assert set(_children()) - before == set()  # every opener child was reaped


def _children() -> list[int]:
    """Pids whose parent is this process (from /proc: no helper process of our own to count)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                text = open(f"/proc/{entry}/stat").read()
            except OSError:
                continue
            if int(text.rsplit(")", 1)[1].split()[1]) == os.getpid():
                found.append(int(entry))
    return found

"""Issue 31 items 1 and 2 on real processes and a real unprivileged user: a root `forensics` copies only
what the job's user could read, and writes only new files in folders it made or an empty one of yours.

Each case is a reproducer of the issue, run as root (as in production) against a throwaway user
created here (useradd, removed after): a setuid-root program started by that user naming a root-only
file; symlinks that user plants at every name `report`, `analyze --save`, `collect -o` and
`collect --tar` would write, pointing at a root-owned victim that must stay as it was.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from hf_testpaths import FIXTURES, REPO
from open_dirs import open_dir
from throwaway_user import throwaway_user

pytestmark = pytest.mark.integration

NEEDS = [t for t in ("useradd", "userdel", "setpriv", "gcc") if not shutil.which(t)]
SIGSTOP_BUNDLE = FIXTURES / "nccl" / "sigstop" / "bundle"
ENV = {**os.environ, "PYTHONPATH": str(REPO)}

#: a rank that says it is ready on stdout, then waits: compiled here, made setuid root for the test
SLEEPER_C = r"""
#include <stdio.h>
#include <unistd.h>
int main(void) { printf("ready\n"); fflush(stdout); for (;;) pause(); }
"""


def _cli(*argv: str, cwd: Path | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "forensics", *argv], capture_output=True, text=True,
                          env=ENV, cwd=cwd, timeout=timeout)


@pytest.fixture(scope="module")
def probe_user():
    """A throwaway unprivileged user (uid, gid, name); removed after the module."""
    if os.geteuid() == 0 and NEEDS:
        pytest.skip(f"needs {', '.join(NEEDS)}")
    with throwaway_user("hf31") as user:
        yield user


def _as(user, *argv: str) -> list[str]:
    uid, gid, _ = user
    return ["setpriv", f"--reuid={uid}", f"--regid={gid}", "--clear-groups", *argv]


@pytest.fixture
def area():
    """A shared folder like /tmp (root's, 1777): the probe user may add names, not touch root's files."""
    with open_dir("hf31-", 0o1777) as path:
        yield path


def _victim(folder: Path) -> tuple[Path, tuple]:
    """A root-owned file the user must not be able to change through us: (path, fingerprint)."""
    victim = folder / "victim.conf"
    victim.write_text("root's own settings\n")
    victim.chmod(0o644)
    return victim, _print(victim)


def _print(path: Path) -> tuple:
    st = os.stat(path)
    return (hashlib.sha256(path.read_bytes()).hexdigest(), st.st_mode, st.st_uid, st.st_mtime_ns, st.st_size)


def _user_dir(user, parent: Path, name: str) -> Path:
    """A folder the probe user made (mkdir as that user), as an attacker would."""
    path = parent / name
    subprocess.run(_as(user, "mkdir", "-m", "0755", str(path)), check=True)
    return path


def _plant(user, target: Path, link: Path) -> None:
    """The probe user plants a symlink `link` -> `target` (ln as that user)."""
    subprocess.run(_as(user, "ln", "-s", str(target), str(link)), check=True)
    assert link.is_symlink() and os.lstat(link).st_uid == user[0]


# ----------------------------------------------------------------------------- item 1: read as the job's user


@pytest.fixture
def setuid_rank(probe_user, area):
    """A setuid-root copy of a small program, started by the probe user as rank 0 of a one-rank job whose
    environment names: a root-only secret (NCCL_DEBUG_FILE), a file the user owns and may read
    (TORCHELASTIC_ERROR_FILE) and a Flight Recorder dump the user owns but cannot reach (in a
    root-only folder). Yields (pid, paths)."""
    uid, gid, _ = probe_user
    src = area / "sleeper.c"
    src.write_text(SLEEPER_C)
    exe = area / "sleeper"
    subprocess.run(["gcc", "-O", "-o", str(exe), str(src)], check=True, capture_output=True)
    os.chown(exe, 0, 0)
    exe.chmod(0o4755)
    secret = area / "root-only.key"
    secret.write_text("ROOT-ONLY-SECRET-7f3a\n")
    secret.chmod(0o600)
    public = area / "root-public.txt"
    public.write_text("ROOT-OWNED-PUBLIC-9c1d\n")
    public.chmod(0o644)
    mine = area / "user"
    mine.mkdir()
    os.chown(mine, uid, gid)
    errfile = mine / "error.json"
    errfile.write_text('{"message": "USER-OWNED-MARKER-51e2"}\n')
    os.chown(errfile, uid, gid)
    hidden = area / "root-dir"
    hidden.mkdir(mode=0o700)
    dump = hidden / "fr_0"
    dump.write_bytes(b"USER-DUMP-UNREACHABLE-c4d8")
    os.chown(dump, uid, gid)
    userlog = mine / "nccl.log"
    userlog.write_text("host:1:1 [0] NCCL INFO USER-NCCL-LOG-2b7e\n")
    os.chown(userlog, uid, gid)
    out = mine / "stdout.txt"
    out.touch()
    os.chown(out, uid, gid)
    run_id = f"hf31-{uuid.uuid4().hex[:8]}"
    paths = {"secret": secret, "public": public, "errfile": errfile, "userlog": userlog, "dump": dump,
             "run_id": run_id}

    def start(nccl_file: Path, error_file: Path) -> int:
        env = {"PATH": "/usr/bin:/bin", "RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "0",
               "TORCHELASTIC_RUN_ID": run_id, "NCCL_DEBUG": "INFO", "NCCL_DEBUG_FILE": str(nccl_file),
               "TORCHELASTIC_ERROR_FILE": str(error_file), "TORCH_FR_DUMP_TEMP_FILE": str(hidden / "fr_")}
        with open(out, "w") as fh:
            proc = subprocess.Popen(_as(probe_user, str(exe)), env=env, stdout=fh, stderr=subprocess.STDOUT)
        procs.append(proc)
        deadline = time.monotonic() + 20
        while "ready" not in out.read_text():
            assert time.monotonic() < deadline and proc.poll() is None, "the setuid rank did not start"
            time.sleep(0.05)
        status = Path(f"/proc/{proc.pid}/status").read_text()
        uids = next(line.split()[1:] for line in status.splitlines() if line.startswith("Uid:"))
        assert uids[0] == str(uid) and uids[1] == "0", f"not a setuid-root rank of the user: Uid {uids}"
        return proc.pid

    procs: list[subprocess.Popen] = []
    yield start, paths
    for proc in procs:
        proc.kill()
        proc.wait(timeout=10)


@pytest.mark.parametrize("nccl,error,how", [("secret", "errfile", "pid"), ("public", "errfile", "discovery"),
                                            ("userlog", "secret", "pid")])
def test_setuid_rank_gets_only_what_its_user_could_read(setuid_rank, tmp_path, nccl, error, how):
    """Issue 31: a setuid-root program started by a user with NCCL_DEBUG_FILE=/etc/shadow (or
    TORCHELASTIC_ERROR_FILE=/etc/shadow) got that file copied byte for byte. Now files are opened as the
    REAL uid/gid: a root-only 0600 file, a root-owned file anyone may read, and the user's own file in a
    folder the user cannot enter stay out; the user's readable files come in."""
    start, paths = setuid_rank
    pid = start(paths[nccl], paths[error])
    out = tmp_path / "b"
    pick = ["--pid", str(pid)] if how == "pid" else ["--job", paths["run_id"]]
    done = _cli("collect", *pick, "-o", str(out), "--json", "-q", "--timeout", "10")
    assert done.returncode in (0, 3), done.stderr
    blob = b"".join(p.read_bytes() for p in out.rglob("*") if p.is_file())
    assert b"ROOT-ONLY-SECRET" not in blob and b"ROOT-OWNED-PUBLIC" not in blob
    assert b"USER-DUMP-UNREACHABLE" not in blob
    man = json.loads((out / "manifest.json").read_text())
    (rank,) = [r for r in man["ranks"] if r["pid"] == pid]
    by_name = {c["name"]: c for c in rank["collectors"]}
    assert by_name["flight_recorder"]["status"] == "denied", by_name["flight_recorder"]
    if error == "errfile":  # what the user could read is still collected
        assert b"USER-OWNED-MARKER-51e2" in blob
        assert by_name["nccl_log"]["status"] == "denied", by_name["nccl_log"]
        assert by_name["stdio"]["status"] == "ok"
    else:
        assert b"USER-NCCL-LOG-2b7e" in blob and by_name["nccl_log"]["status"] == "ok", by_name["nccl_log"]
        assert by_name["stdio"]["status"] != "ok", by_name["stdio"]


# ----------------------------------------------------------------------------- item 2: writes


def test_report_default_output_refuses_a_bundle_of_another_user(probe_user, area):
    """`forensics report BUNDLE` wrote BUNDLE/report.html through a link the bundle's owner planted."""
    victim, before = _victim(area)
    bundle = _user_dir(probe_user, area, "bundle")
    subprocess.run(_as(probe_user, "cp", "-r", f"{SIGSTOP_BUNDLE}/.", str(bundle)), check=True)
    _plant(probe_user, victim, bundle / "report.html")
    done = _cli("report", str(bundle))
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "belongs to uid" in done.stderr  # issue 40: the walk of the path refuses the user's folder first
    assert _print(victim) == before


def test_report_default_output_is_new_and_never_follows_a_link(tmp_path):
    """In a bundle of the caller's own, report.html is created new; a link or file at the name is
    passed over (report-2.html), never written through."""
    bundle = tmp_path / "b"
    shutil.copytree(SIGSTOP_BUNDLE, bundle)
    victim, before = _victim(tmp_path)
    (bundle / "report.html").symlink_to(victim)
    done = _cli("report", str(bundle))
    assert done.returncode in (0, 4), done.stderr
    assert f"report: {bundle / 'report-2.html'}" in done.stdout
    assert _print(victim) == before
    assert stat.S_IMODE(os.stat(bundle / "report-2.html").st_mode) == 0o600


def test_report_explicit_output_refuses_a_planted_link(probe_user, area):
    victim, before = _victim(area)
    _plant(probe_user, victim, area / "r.html")
    done = _cli("report", str(SIGSTOP_BUNDLE), "-o", str(area / "r.html"))
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert _print(victim) == before


def test_analyze_save_refuses_a_bundle_of_another_user(probe_user, area):
    """`analyze --save` wrote analysis.json through a planted link."""
    victim, before = _victim(area)
    bundle = _user_dir(probe_user, area, "bundle")
    subprocess.run(_as(probe_user, "cp", "-r", f"{SIGSTOP_BUNDLE}/.", str(bundle)), check=True)
    _plant(probe_user, victim, bundle / "analysis.json")
    done = _cli("analyze", "--save", str(bundle))
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert _print(victim) == before


def test_analyze_save_in_own_bundle_never_follows_a_link(tmp_path):
    bundle = tmp_path / "b"
    shutil.copytree(SIGSTOP_BUNDLE, bundle)
    victim, before = _victim(tmp_path)
    (bundle / "analysis.json").symlink_to(victim)
    done = _cli("analyze", "--save", str(bundle))
    assert done.returncode in (0, 4), done.stderr
    assert _print(victim) == before
    saved = json.loads((bundle / "analysis-2.json").read_text())
    assert saved["schema"].startswith("hang-forensics/analyze/")


@pytest.fixture
def root_rank(tmp_path):
    """A real rank of root's (RANK=0 WORLD_SIZE=1) to collect; stopped after the test."""
    log = tmp_path / "rank.out"
    with open(log, "w") as fh:
        proc = subprocess.Popen([sys.executable, "-c", "import time; print('ready', flush=True); time.sleep(120)"],
                                env={**os.environ, "RANK": "0", "WORLD_SIZE": "1"}, stdout=fh, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 20
    while "ready" not in log.read_text():
        assert time.monotonic() < deadline and proc.poll() is None
        time.sleep(0.05)
    yield proc.pid
    proc.kill()
    proc.wait(timeout=10)


def test_collect_into_a_folder_the_user_made_is_refused(probe_user, area, root_rank):
    """`collect -o DIR` into a folder the user created followed its links (.write-test, environ.json,
    proc.json) onto a root-owned victim."""
    victim, before = _victim(area)
    out = _user_dir(probe_user, area, "out")
    for name in (".write-test", "environ.json", "proc.json", "manifest.json"):
        _plant(probe_user, victim, out / name)
    done = _cli("collect", "--pid", str(root_rank), "-o", str(out), "-q")
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert _print(victim) == before
    empty = _user_dir(probe_user, area, "empty")  # empty, but not the caller's
    done = _cli("collect", "--pid", str(root_rank), "-o", str(empty), "-q")
    assert done.returncode == 2 and "not to you" in done.stderr, done.stderr
    assert list(empty.iterdir()) == []


def test_collect_refuses_a_non_empty_folder_and_one_in_use(tmp_path, root_rank):
    full = tmp_path / "full"
    full.mkdir()
    (full / "notes.txt").write_text("mine\n")
    done = _cli("collect", "--pid", str(root_rank), "-o", str(full), "-q")
    assert done.returncode == 2, done.stderr
    # wording is the behaviour: the CLI's refusal, whole
    assert done.stderr.strip().splitlines() == [f"forensics collect: error: {full}: exists and is not empty; "
                                                "give a new or empty folder"]
    assert sorted(p.name for p in full.iterdir()) == ["notes.txt"]
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / ".forensics.lock").write_text("4242\n")  # what a running collect holds
    done = _cli("collect", "--pid", str(root_rank), "-o", str(busy), "-q")
    # wording is the behaviour: the CLI's refusal of a folder in use
    assert done.returncode == 2 and "in use by another forensics command" in done.stderr, done.stderr
    fresh = tmp_path / "fresh"  # the positive control: a new folder gets a bundle, and no lock is left
    done = _cli("collect", "--pid", str(root_rank), "-o", str(fresh), "-q", "--timeout", "10")
    assert done.returncode in (0, 3), done.stderr
    assert (fresh / "manifest.json").is_file() and not (fresh / ".forensics.lock").exists()
    assert stat.S_IMODE(os.stat(fresh).st_mode) == 0o700


def test_two_collects_into_one_folder_do_not_mix(tmp_path, root_rank):
    """Two collects started at once into one new -o folder: one is refused, the other's bundle is whole."""
    out = tmp_path / "one"
    argv = [sys.executable, "-m", "forensics", "collect", "--pid", str(root_rank), "-o", str(out), "-q", "--timeout",
            "10"]
    procs = [subprocess.Popen(argv, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) for _ in range(2)]
    results = [(p.wait(timeout=120), p.stderr.read()) for p in procs]
    for p in procs:
        p.stdout.close()
        p.stderr.close()
    codes = sorted(rc for rc, _ in results)
    assert codes[1] == 2 and codes[0] in (0, 3), results
    assert any("not empty" in err or "in use" in err for rc, err in results if rc == 2)
    man = json.loads((out / "manifest.json").read_text())
    assert len(man["ranks"]) == 1


def test_collect_tar_refuses_a_planted_archive_name(probe_user, area, root_rank):
    """`collect --tar` wrote OUT.tar.gz through a link planted at that name."""
    victim, before = _victim(area)
    parent = _user_dir(probe_user, area, "drop")
    subprocess.run(_as(probe_user, "chmod", "0777", str(parent)), check=True)
    _plant(probe_user, victim, parent / "b.tar.gz")
    done = _cli("collect", "--pid", str(root_rank), "-o", str(parent / "b"), "--tar", "-q")
    assert done.returncode == 2 and "already exists" in done.stderr, done.stderr
    assert _print(victim) == before
    assert not (parent / "b").exists()  # refused before anything was collected


def test_make_archive_never_follows_a_link_planted_after_the_check(probe_user, area, tmp_path):
    """The race: the name is planted after collect checked it; the archive is created O_EXCL|O_NOFOLLOW."""
    from forensics.bundle.archive import make_archive
    from forensics.errors import ForensicsError

    victim, before = _victim(area)
    drop = _user_dir(probe_user, area, "drop")
    _plant(probe_user, victim, drop / "b.tar.gz")
    folder = tmp_path / "b"
    folder.mkdir()
    (folder / "x.txt").write_text("x")
    # issue 40: the user's folder is refused as a parent before the name is tried
    with pytest.raises(ForensicsError, match="symbolic link|already exists|belongs to uid"):
        make_archive(folder, drop / "b.tar.gz")
    assert _print(victim) == before

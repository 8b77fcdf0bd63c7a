"""Host sets, safe command construction, the answer framing, and Slurm argv/demux."""

from __future__ import annotations

import shlex
import subprocess

import pytest

from forensics.errors import ForensicsError
from forensics.fleet import command as cmd
from forensics.fleet import hosts, slurm, wire


def test_nodeset_and_hostfile(tmp_path):
    assert hosts.expand_nodeset("node[001-003]") == ["node001", "node002", "node003"]
    path = tmp_path / "hosts"
    path.write_text("# cluster\nnode01 slots=8\nnode[02-03]\n\nnode01\n")
    assert hosts.unique(hosts.read_hostfile(path)) == ["node01", "node02", "node03"]
    assert hosts.fold(["n1", "n2", "n3"]) == "n[1-3]"


@pytest.mark.parametrize("bad", ["-oProxyCommand=x", "a b", "a;b", "u@h", "$(id)", "h`id`", "", "a/b"])
def test_hostile_host_names_rejected(bad):
    with pytest.raises(ForensicsError):
        hosts.validate_host(bad)


def test_hostfile_errors_name_the_line(tmp_path):
    path = tmp_path / "hosts"
    path.write_text("node1\nbad;host\n")
    with pytest.raises(ForensicsError, match=r":2: "):
        hosts.read_hostfile(path)
    with pytest.raises(ForensicsError, match="No such file"):
        hosts.read_hostfile(tmp_path / "absent")


@pytest.mark.parametrize("bad", ["Port=22 -oProxyCommand=x", "-oProxyCommand=x", "ProxyCommand", "Port =22"])
def test_ssh_options_must_be_single_key_value(bad):
    with pytest.raises(ForensicsError):
        cmd.check_ssh_option(bad)


def test_ssh_options_put_user_first_and_keep_batch_mode():
    opts = cmd.ssh_options(["Port=2222"], 7.4)
    assert opts[:2] == ["-o", "Port=2222"]
    assert "BatchMode=yes" in opts and "ConnectTimeout=7" in opts


def test_remote_command_survives_a_real_shell_unchanged():
    """Whatever the values, /bin/sh hands the remote program exactly the argv we built."""
    hostile = "X=$(touch /tmp/nope);`id` 'q' \"d\" %h {host} \\ *"
    spec = cmd.RemoteSpec(python="printf", tag="t1", match_env=[hostile, "H={host}"])
    argv = cmd.for_host(cmd.remote_argv(spec), "node7")
    line = cmd.shell_command(argv)
    echoed = subprocess.run(["/bin/sh", "-c", line.replace("printf", "printf '%s\\n'", 1)], capture_output=True,
                            text=True).stdout
    assert echoed.splitlines() == argv[1:]
    assert "H=node7" in argv and shlex.split(line) == argv


def test_match_env_needs_a_name():
    with pytest.raises(ForensicsError):
        cmd.check_match_env("=x")
    with pytest.raises(ForensicsError):
        cmd.check_match_env("A-B=x")


def test_wire_round_trip_and_damage():
    data = bytes(range(256)) * 600  # 200 KB of base64: several wire lines
    lines = ["motd noise", *wire.encode({"host": "h", "status": "ok"}, data), "trailing"]
    assert len(lines) == 2 + 2 + 4 and max(len(line) for line in lines) == wire.LINE
    answer = wire.decode(lines)
    assert answer.archive == data and answer.header["host"] == "h"
    import base64
    import hashlib

    text = base64.b64encode(data).decode()  # an older collector's 76-character lines still read
    old = [lines[1], *(text[i:i + 76] for i in range(0, len(text), 76)),
           "FORENSICS-FLEET 1 END " + hashlib.sha256(data).hexdigest()]
    assert wire.decode(old).archive == data
    assert wire.decode(list(wire.encode({"status": "no-ranks"}, None))).archive is None
    with pytest.raises(wire.WireError, match="no answer"):
        wire.decode(["nothing here"])
    with pytest.raises(wire.WireError, match="cut short"):
        wire.decode(lines[:4])
    damaged = list(lines)
    damaged[3] = damaged[3][:-4] + "AAAA"
    with pytest.raises(wire.WireError):
        wire.decode(damaged)


def test_wire_answer_cut_into_pieces_as_srun_label_prints_it():
    """srun --label prints a long line as several labelled pieces, and with --unbuffered cuts wherever one of its
    reads ended: on a loaded host the header was cut mid-JSON and the whole answer read as 'no answer' (seen in
    test_slurm here). Every cut, of the header, the archive and the end line alike, must decode the same."""
    import random

    data = bytes(random.Random(7).randbytes(3000))
    header = {"host": "node7", "status": "ok", "errors": ["x" * 900]}  # a header longer than srun's 1 KB pieces
    lines = list(wire.encode(header, data))
    rng = random.Random(11)
    for cuts in (1, 3, 7, 64, 1000, None):
        pieces = []
        for line in lines:
            at = 0
            while at < len(line) or at == 0:
                step = cuts or rng.randint(1, 200)
                pieces.append(f"0: {line[at:at + step]}")
                at += step
        runs = slurm.runs_from_output(["node7"], ["srun: a warning", *pieces], [], 0, 1.0, False)
        answer = wire.decode(runs["node7"].stdout)
        assert (answer.header, answer.archive) == (header, data), cuts
    empty = [f"0: {c}" for line in wire.encode({"host": "node7", "status": "no-ranks"}, None) for c in line]
    assert wire.decode(slurm.runs_from_output(["node7"], empty, [], 0, 1.0, False)["node7"].stdout).archive is None


def test_slurm_argv_and_job_id_checks():
    argv = slurm.srun_argv("4242", ["node1", "node2"], ["python3", "-m", "forensics.fleet.remote"], 20)
    assert argv[:3] == ["srun", "--overlap", "--jobid=4242"]
    assert "--nodelist=node[1-2]" in argv and "--ntasks-per-node=1" in argv and "--label" in argv
    assert argv[-3:] == ["python3", "-m", "forensics.fleet.remote"]
    for bad in ["42; rm -rf /", "-1", "--uid=0", "abc"]:
        with pytest.raises(ForensicsError):
            slurm.check_job_id(bad)
    assert slurm.check_job_id("4242_7") == "4242_7"


def test_slurm_scontrol_and_label_demux():
    text = "JobId=7 JobName=train UserId=root(0) JobState=RUNNING Reason=None NodeList=node[1-2] NumNodes=2"
    assert slurm.parse_scontrol(text) == ("RUNNING", ["node1", "node2"])
    assert slurm.parse_scontrol("JobId=7 JobState=PENDING NodeList=(null)") == ("PENDING", [])
    out = ([f"0: {line}" for line in wire.encode({"host": "node2"}, b"x")]
           + [f"1: {line}" for line in wire.encode({"host": "node1"}, b"yy")])
    runs = slurm.runs_from_output(["node1", "node2", "node3"], out, [], 0, 1.0, timed_out=True)
    assert wire.decode(runs["node1"].stdout).archive == b"yy"
    assert wire.decode(runs["node2"].stdout).archive == b"x"
    assert runs["node3"].timed_out and not runs["node1"].timed_out


def test_remote_cleanup_ends_only_the_collector_of_its_tag(tmp_path):
    """Real processes whose command lines look like collectors of two tags: only the named tag is ended."""
    import sys
    import time

    from forensics.fleet import remote

    def fake(tag: str) -> subprocess.Popen:
        return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", "-m", "forensics.fleet.remote",
                                 "--tag", tag],
                                start_new_session=True)

    mine, other = fake("t-mine"), fake("t-other")
    try:
        deadline = time.monotonic() + 10
        while not remote._same_tag(mine.pid, "t-mine") and time.monotonic() < deadline:
            time.sleep(0.05)
        (tmp_path / "x").mkdir()
        assert remote.cleanup("t-mine") == 0
        assert mine.wait(timeout=10) == -9
        assert other.poll() is None
    finally:
        for proc in (mine, other):
            if proc.poll() is None:
                proc.kill()
            proc.wait()


def test_judge_names_each_way_a_host_can_fail(tmp_path):
    import io
    import tarfile

    from forensics.bundle.writer import BundleWriter
    from forensics.fleet.filing import judge
    from forensics.fleet.outcome import HostRun

    slow = judge(HostRun("n1", timed_out=True, seconds=20.0), 20, tmp_path)
    assert slow.status == "timeout" and "n1" in slow.error and "20 s" in slow.error

    refused = judge(HostRun("n2", stderr=["ssh: connect to host n2 port 22: Connection refused"], returncode=255), 20,
                    tmp_path)
    assert refused.status == "unreachable" and "Connection refused" in refused.error
    cut = judge(HostRun("n3", stdout=list(wire.encode({"host": "n3"}, b"x" * 500))[:2], returncode=0), 20, tmp_path)
    assert cut.status == "failed" and "cut short" in cut.error
    empty = judge(HostRun("n4", stdout=list(wire.encode({"status": "no-ranks", "error": "no rank process"}, None)),
                          returncode=0), 20, tmp_path)
    assert empty.status == "no-ranks"
    evil = io.BytesIO()
    with tarfile.open(fileobj=evil, mode="w:gz") as tar:
        info = tarfile.TarInfo("bundle/../../escape")
        info.size = 1
        tar.addfile(info, io.BytesIO(b"x"))
    bad = judge(HostRun("n5", stdout=list(wire.encode({"status": "ok"}, evil.getvalue())), returncode=0), 20, tmp_path)
    assert bad.status == "failed" and "leaves the archive" in bad.error
    assert not (tmp_path.parent / "escape").exists() and not (tmp_path / "hosts" / "n5").exists()
    BundleWriter(tmp_path / "src" / "bundle").save()
    good_tar = io.BytesIO()
    with tarfile.open(fileobj=good_tar, mode="w:gz") as tar:
        tar.add(tmp_path / "src" / "bundle", arcname="bundle")
    good = judge(HostRun("n6", stdout=list(wire.encode({"status": "ok"}, good_tar.getvalue())), returncode=0), 20,
                 tmp_path)
    assert good.status == "ok" and good.placed is not None and (good.bundle / "host-manifest.json").is_file()
    assert good.bundle == tmp_path / "hosts" / "n6"  # filed in place in the job bundle: no second copy


def _hostile(add) -> bytes:
    import io
    import tarfile

    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        add(tar)
    return buffer.getvalue()


def _member(name: str, data: bytes = b"x", **attrs):
    import io
    import tarfile

    def add(tar):
        info = tarfile.TarInfo(name)
        info.size = len(data)
        for key, value in attrs.items():
            setattr(info, key, value)
        tar.addfile(info, io.BytesIO(data) if info.isfile() else None)

    return add


@pytest.mark.parametrize("add, why", [
    (_member("bundle/hosts/h/link", type=b"2", linkname="/etc/passwd", size=0), "links are not allowed"),
    (_member("bundle/hosts/h/hard", type=b"1", linkname="bundle/manifest.json", size=0), "links are not allowed"),
    (_member("elsewhere/x"), "outside the archive's 'bundle/' folder"),
    (_member("/abs/x"), "absolute path"),
    (_member("bundle/fifo", type=b"6", size=0), "special files"),
])
def test_hostile_host_archives_are_refused_and_leave_nothing(tmp_path, add, why):
    """Every hostile archive shape is refused by the one set of archive rules, and the host's folder is gone."""
    from forensics.fleet.filing import judge
    from forensics.fleet.outcome import HostRun

    part = judge(HostRun("h1", stdout=list(wire.encode({"status": "ok"}, _hostile(add))), returncode=0), 20, tmp_path)
    assert part.status == "failed" and why in part.error and part.bundle is None
    assert not (tmp_path / "hosts" / "h1").exists() and not list(tmp_path.parent.glob("passwd"))


def test_archive_bomb_is_refused_at_its_header(tmp_path):
    """A member whose header claims more than the per-host cap is refused before its data is read."""
    import tarfile

    from forensics.bundle.merge import MAX_FILE_BYTES
    from forensics.fleet.filing import judge
    from forensics.fleet.outcome import HostRun

    def add(tar):
        info = tarfile.TarInfo("bundle/hosts/h/huge.log")
        info.size = MAX_FILE_BYTES + 1
        tar.addfile(info)  # the header only: the claim alone must be enough to refuse

    part = judge(HostRun("h1", stdout=list(wire.encode({"status": "ok"}, _hostile(add))), returncode=0), 20, tmp_path)
    assert part.status == "failed" and f"at most {MAX_FILE_BYTES}" in part.error


def test_an_answer_past_its_bound_is_refused(monkeypatch, tmp_path):
    from forensics.fleet import outcome
    from forensics.fleet.filing import judge

    monkeypatch.setattr(outcome, "MAX_ANSWER_CHARS", 1000)
    run = outcome.HostRun("h1", returncode=0)
    for line in wire.encode({"status": "ok"}, b"y" * 5000):
        run.keep(line)
    assert run.dropped > 0 and run.kept <= 1000
    part = judge(run, 20, tmp_path)
    assert part.status == "failed" and "answer refused" in part.error and part.bundle is None


# --- issue 17: forwarding, srun arguments, folded summary -----------------------------------

def test_every_per_rank_option_reaches_the_remote_collector():
    import argparse

    from forensics.cli.collect_fleet import remote_spec
    from forensics.fleet.command import remote_argv
    from forensics.fleet.remote import parse_args

    args = argparse.Namespace(remote_python="python3", timeout=7.0, native=True, gdb=True, gdb_timeout=26.0,
                              job="slurm-42",
                              match_env=["K=V"], host_timeout=60.0)
    argv = remote_argv(remote_spec(args, "t1"))
    parsed = parse_args(argv[3:])  # what the host's `python3 -m forensics.fleet.remote` sees
    assert (parsed.timeout, parsed.native, parsed.gdb, parsed.gdb_timeout,
            parsed.job) == (7.0, True, True, 26.0, "slurm-42")


def test_the_byte_caps_the_user_set_reach_the_remote_collector_and_the_defaults_are_not_sent():
    """--max-mib, --rank-max-mib and --host-max-mib were not forwarded: every host used its defaults. Now the
    caps set away from their defaults are sent, read by the host's collector and held to collect's range."""
    import argparse

    from forensics.cli.collect_fleet import remote_spec
    from forensics.collect.budget import HOST_BYTES, TOTAL_BYTES
    from forensics.fleet.command import remote_argv
    from forensics.fleet.remote import _mib, parse_args

    base = dict(remote_python="python3", timeout=7.0, native=False, gdb=False, gdb_timeout=None, job=None,
                match_env=[], host_timeout=60.0)
    args = argparse.Namespace(**base, max_mib=TOTAL_BYTES >> 20, rank_max_mib=3, host_max_mib=5)
    argv = remote_argv(remote_spec(args, "t1"))
    assert "--max-mib" not in argv and argv[argv.index("--host-max-mib") + 1] == "5"
    parsed = parse_args(argv[3:])
    assert (parsed.max_mib, parsed.rank_max_mib, parsed.host_max_mib) == (TOTAL_BYTES >> 20, 3, 5)
    assert [_mib(v) for v in (parsed.host_max_mib, 0, 1 << 40)] == [5 << 20, 1 << 20, 1 << 50]
    plain = remote_argv(remote_spec(argparse.Namespace(**base), "t2"))  # no cap given (a caller without them)
    assert not any(a.endswith("max-mib") for a in plain)
    assert parse_args(plain[3:]).host_max_mib == HOST_BYTES >> 20
    with pytest.raises(ForensicsError):
        remote_argv(cmd.RemoteSpec(caps_mib={"--evil": 1}))


def test_srun_arguments_are_options_placed_before_the_collector():
    from forensics.errors import ForensicsError
    from forensics.fleet.slurm import srun_argv

    argv = srun_argv("42", ["n1", "n2"], ["python3", "-m", "forensics.fleet.remote"], 20,
                     ["--container-image=img.sqsh", "--container-mounts=/a:/a"])
    assert argv.index("--container-image=img.sqsh") < argv.index("python3")
    with pytest.raises(ForensicsError):
        srun_argv("42", ["n1"], ["python3"], 20, ["touch", "/x"])  # a value, not an option: could become the command


def test_host_summary_folds_like_clush():
    from forensics.bundle.merge import HostPart
    from forensics.fleet.collect import folded_hosts

    parts = [HostPart(host=f"node{i:03d}") for i in range(1, 511)]
    parts += [HostPart(host=h, status="unreachable",
                       error=f"host {h} unreachable: ssh: connect to host {h} port 22: Connection refused")
              for h in ("node511", "node512")]
    rows = folded_hosts(parts)
    assert rows == [{"hosts": "node[001-510]", "count": 510, "result": "ok"},
                    {"hosts": "node[511-512]", "count": 2,
                     "result": "unreachable: ssh: connect to host HOST port 22: Connection refused"}]


def test_a_bundle_folder_that_already_holds_hosts_is_refused_before_any_host_is_asked(tmp_path):
    """Answers are filed into the bundle as they arrive: an earlier collection's hosts/ must not be mixed in."""
    from forensics.fleet.collect import collect_fleet

    (tmp_path / "job" / "hosts" / "node1").mkdir(parents=True)
    asked = []
    with pytest.raises(ForensicsError, match="already holds host evidence"):
        collect_fleet(["node1"], tmp_path / "job", cmd.RemoteSpec(), lambda *a: asked.append(a) or {}, host_timeout=5,
                      quiet=True)
    assert asked == []

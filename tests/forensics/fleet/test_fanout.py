"""Item 7 of issue 31: fan-out arguments, each reproducer of the probe through the real CLI.

- a 590-byte host file of 40 lines named 4,000,000 hosts (the cap was per expression);
- `--srun-arg` checked only its first value: `--overlap /bin/sh -c 'touch M'` reached srun;
- `--ssh-option ProxyCommand=...` passed collect's check; bisect's was not checked at all.

The srun/scontrol/ssh found first on PATH here are recorders: they write their argv to a
file (and the ssh one runs a ProxyCommand it is given, as ssh would), so a value that got
through is seen in what the program received, and the marker file shows a command ran.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import pytest

from forensics import hostset
from forensics.bisect.launchers import LaunchError, SlurmLauncher, SSHLauncher, JobSpec, make_launcher
from forensics.errors import ForensicsError
from forensics.fleet import hosts
from forensics.fleet.options import check_srun_args, check_ssh_option, check_ssh_options
from forensics.fleet.slurm import srun_argv

ROOT = Path(__file__).resolve().parents[3]


def _forty_line_hostfile(path: Path) -> Path:
    """The probe's file: 40 lines, each a legal 100,000-host range (590 bytes)."""
    path.write_text("".join(f"n{i}x[1-100000]\n" for i in range(40)))
    return path


def _forensics(*args: str, cwd: Path, path_dir: Path | None = None) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    if path_dir is not None:
        env["PATH"] = f"{path_dir}:{env['PATH']}"

    def _cap_memory():  # 4,000,000 names took 3.5 GB; the refusal must need a fraction of 1 GB
        resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))

    return subprocess.run([sys.executable, "-m", "forensics", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=120, env=env, preexec_fn=_cap_memory)


def _recorders(tmp_path: Path) -> tuple[Path, Path]:
    """srun, scontrol and ssh stand-ins that record their argv (one line per call)."""
    bin_dir, log = tmp_path / "bin", tmp_path / "calls.log"
    bin_dir.mkdir()
    for name in ("srun", "ssh", "scontrol"):
        script = bin_dir / name
        body = f'printf "%s\\0" {name} "$@" >> {log}; echo >> {log}\n'
        if name == "scontrol":
            body += 'echo "JobId=42 JobState=RUNNING NodeList=n[1-2]"\n'
        if name == "ssh":  # run a ProxyCommand like ssh would: proof that one got through
            body += 'for a in "$@"; do case "$a" in ProxyCommand=*) sh -c "${a#ProxyCommand=}";; esac; done\nexit 255\n'
        script.write_text("#!/bin/sh\n" + body)
        script.chmod(0o755)
    return bin_dir, log


def test_probe_hostfile_is_590_bytes_of_legal_lines(tmp_path):
    path = _forty_line_hostfile(tmp_path / "hosts")
    assert path.stat().st_size == 590 and len(path.read_text().splitlines()) == 40
    for line in path.read_text().splitlines():
        assert hostset.count_hosts(line) == hostset.MAX_HOSTS  # each line alone is within the cap


def test_host_cap_is_on_the_total_not_each_expression(tmp_path):
    path = _forty_line_hostfile(tmp_path / "hosts")
    start = time.monotonic()
    with pytest.raises(ForensicsError, match="40 host lists name more than 100000 hosts in all"):
        hosts.read_hostfile(path)
    with pytest.raises(ForensicsError, match="in all"):
        hosts.gather(["a[1-60000]", "b[1-50000]"])  # two --hosts values
    with pytest.raises(ForensicsError, match="in all"):
        hosts.gather(["a[1-60000]"], _write(tmp_path / "h2", "b[1-50000]\n"))  # --hosts plus --hostfile
    assert time.monotonic() - start < 2.0  # counted, not expanded
    assert len(hosts.gather(["a[1-50000]"], _write(tmp_path / "h3", "b[1-50000]\n"))) == hostset.MAX_HOSTS


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


@pytest.mark.parametrize("how", ["collect", "bisect-simulate", "bisect"])
def test_probe_hostfile_is_refused_by_every_command(tmp_path, how):
    path = _forty_line_hostfile(tmp_path / "hosts")
    argv = {"collect": ["collect", "--hostfile", str(path), "-o", str(tmp_path / "b")],
            "bisect-simulate": ["bisect", "--simulate", "--hostfile", str(path), "--trials", "1"],
            "bisect": ["bisect", "--hostfile", str(path), "--test", "true", "--state", str(tmp_path / "s.json")]}[how]
    done = _forensics(*argv, cwd=tmp_path)
    assert done.returncode == 2, done.stderr[-2000:]
    # wording is the behaviour: the CLI's refusal of a huge host list
    assert "in all (at most 100000)" in done.stderr and "Traceback" not in done.stderr


PROBE_SRUN = ["--overlap", "/bin/sh", "-c", "touch {marker}"]


def test_every_srun_value_is_checked(tmp_path):
    marker = tmp_path / "M"
    probe = [a.format(marker=marker) for a in PROBE_SRUN]
    with pytest.raises(ForensicsError, match="/bin/sh"):
        srun_argv("42", ["n1"], ["python3"], 20, probe)
    with pytest.raises(LaunchError, match="/bin/sh"):
        make_launcher("slurm", srun_args=probe)
    with pytest.raises(LaunchError):  # a launcher built some other way (e.g. from a state file) is checked too
        SlurmLauncher(extra=probe).argv(["true"], JobSpec(["n1"], 1, 1, 1, 10))
    for bad in ("--prolog=/tmp/x", "--task-epilog=/tmp/x", "--output=/etc/passwd", "--bcast=/tmp/x", "-p",
                "--export=ALL,LD_PRELOAD=/tmp/x.so", "--partition", "debug", "--container-image=a\nb"):
        with pytest.raises(ForensicsError):
            check_srun_args(["--container-image=img.sqsh", bad])  # a bad value after a good one
    assert check_srun_args(["--container-image=img.sqsh", "--container-mounts=/a:/a", "--partition=debug",
                            "--overlap", "--gres=gpu:8"]) == ["--container-image=img.sqsh", "--container-mounts=/a:/a",
                                                                 "--partition=debug", "--overlap", "--gres=gpu:8"]


@pytest.mark.parametrize("how", ["collect", "bisect"])
def test_probe_srun_args_never_reach_srun(tmp_path, how):
    bin_dir, log = _recorders(tmp_path)
    marker = tmp_path / "M"
    srun_args = [f"--srun-arg={a.format(marker=marker)}" for a in PROBE_SRUN]
    argv = {"collect": ["collect", "--slurm-job", "42", *srun_args, "-o", str(tmp_path / "b"), "--host-timeout", "5"],
            "bisect": ["bisect", "--hosts", "n[1-4]", "--launcher", "slurm", *srun_args, "--test", "true",
                       "--state", str(tmp_path / "s.json"), "--timeout", "5"]}[how]
    done = _forensics(*argv, cwd=tmp_path, path_dir=bin_dir)
    assert done.returncode == 2, done.stderr[-2000:]
    assert "--srun-arg '/bin/sh'" in done.stderr and "Traceback" not in done.stderr
    assert not marker.exists()
    assert not log.exists() or "srun" not in log.read_text()


SSH_BAD = ["ProxyCommand=touch {marker}", "proxycommand=touch {marker}", "LocalCommand=touch {marker}",
           "PermitLocalCommand=yes", "KnownHostsCommand=/bin/sh", "ProxyJump=evil", "Match=exec", "Include=/tmp/x",
           "PKCS11Provider=/tmp/x.so", "SecurityKeyProvider=/tmp/x.so", "XAuthLocation=/tmp/x", "RemoteCommand=id",
           "LocalForward=1:h:2", "ControlPath=/tmp/s", "Hostname=other", "SetEnv=A=B", "Port=22 -oProxyCommand=x",
           "-oProxyCommand=x", "Port", "Port=22\nx"]


@pytest.mark.parametrize("bad", SSH_BAD)
def test_ssh_options_outside_the_allow_list_are_refused(bad):
    with pytest.raises(ForensicsError):
        check_ssh_option(bad.format(marker="/tmp/never"))
    with pytest.raises(ForensicsError):
        check_ssh_options(["Port=2222", bad.format(marker="/tmp/never")])
    with pytest.raises(LaunchError):
        make_launcher("ssh", ssh_options=["Port=2222", bad])
    with pytest.raises(LaunchError):
        SSHLauncher(options=[bad]).argv(["true"], JobSpec(["n1"], 1, 1, 1, 10))


def test_connection_options_are_allowed():
    good = ["ConnectTimeout=5", "BatchMode=yes", "StrictHostKeyChecking=accept-new", "UserKnownHostsFile=/dev/null",
            "Port=2222", "User=ops", "IdentityFile=/root/.ssh/id_ed25519", "ServerAliveInterval=5", "LogLevel=ERROR",
            "IdentitiesOnly=yes"]
    assert check_ssh_options(good) == good
    argv = make_launcher("ssh", ssh_options=good).argv(["true"], JobSpec(["n1"], 1, 1, 1, 10))
    assert argv[argv.index("Port=2222") - 1] == "-o"


@pytest.mark.parametrize("how", ["collect", "bisect"])
def test_probe_proxycommand_runs_nothing(tmp_path, how):
    bin_dir, log = _recorders(tmp_path)
    marker = tmp_path / "M"
    evil = _write(tmp_path / "evil.sh", f"#!/bin/sh\ntouch {marker}\n")
    evil.chmod(0o755)
    opt = f"--ssh-option=ProxyCommand={evil}"  # no space: passes the Key=value syntax, refused by name
    argv = {"collect": ["collect", "--hosts", "n1", opt, "-o", str(tmp_path / "b"), "--host-timeout", "5"],
            "bisect": ["bisect", "--hosts", "n[1-4]", "--launcher", "ssh", opt, "--test", "true",
                       "--state", str(tmp_path / "s.json"), "--timeout", "5"]}[how]
    done = _forensics(*argv, cwd=tmp_path, path_dir=bin_dir)
    assert done.returncode == 2, done.stderr[-2000:]
    assert "ProxyCommand is not allowed" in done.stderr and "Traceback" not in done.stderr
    assert not marker.exists() and not log.exists()


def test_recorder_ssh_would_show_a_proxycommand(tmp_path):
    """The stand-in is able to fail the test above: given the option directly, it creates the marker."""
    bin_dir, _log = _recorders(tmp_path)
    marker = tmp_path / "M"
    evil = _write(tmp_path / "evil.sh", f"#!/bin/sh\ntouch {marker}\n")
    evil.chmod(0o755)
    subprocess.run([str(bin_dir / "ssh"), "-o", f"ProxyCommand={evil}", "n1", "true"], timeout=10)
    assert marker.exists()

"""The ssh launcher against a real sshd: every 127.0.0.x address is its own "host".

An unprivileged-port sshd with throwaway keys listens on 127.0.0.2-7; each group job
runs on its first host through ssh, and the test records $SSH_CONNECTION to prove
where it ran. Needs root (sshd) and openssh-server; skipped otherwise.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from forensics.cli.main import main

pytestmark = pytest.mark.integration
PORT = 29890
HOSTS = [f"127.0.0.{i}" for i in range(2, 8)]


@pytest.fixture
def sshd(tmp_path):
    if os.geteuid() != 0 or not Path("/usr/sbin/sshd").exists() or not shutil.which("ssh-keygen"):
        pytest.skip("needs root, /usr/sbin/sshd and ssh-keygen")
    for name in ("hostkey", "userkey"):
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp_path / name)], check=True)
    shutil.copy(tmp_path / "userkey.pub", tmp_path / "auth")
    Path("/run/sshd").mkdir(exist_ok=True)
    argv = ["/usr/sbin/sshd", "-D", "-e", "-f", "/dev/null", "-o", f"Port={PORT}",
            *[f"-oListenAddress={h}" for h in HOSTS], "-o", f"HostKey={tmp_path / 'hostkey'}",
            "-o", f"AuthorizedKeysFile={tmp_path / 'auth'}", "-o", f"PidFile={tmp_path / 'pid'}",
            "-o", "StrictModes=no", "-o", "PermitRootLogin=yes"]
    proc = subprocess.Popen(argv, stderr=open(tmp_path / "sshd.log", "w"))
    time.sleep(0.5)
    try:
        yield [f"--ssh-option={o}" for o in (f"Port={PORT}", f"IdentityFile={tmp_path / 'userkey'}",
                                              "StrictHostKeyChecking=no", "UserKnownHostsFile=/dev/null",
                                              "LogLevel=ERROR")]
    finally:
        proc.kill()
        proc.wait()


def test_ssh_launcher_runs_each_group_on_its_first_host(sshd, tmp_path, capsys):
    where = tmp_path / "where.log"
    test = (f"sh -c 'echo \"$0 $SSH_CONNECTION\" >> {where}; "
            "case \",$0,\" in *,127.0.0.5,*) exit 1;; esac; exit 0' {hosts}")
    rc = main(["bisect", "--hosts", "127.0.0.[2-7]", "--launcher", "ssh", *sshd, "--test", test,
               "--state", str(tmp_path / "s.json"), "--flake-rate", "0.001", "--timeout", "30",
               "--json", "--quiet"])
    rep = json.loads(capsys.readouterr().out)
    assert rc == 5, rep  # bad hosts found
    assert [e["unit"] for e in rep["bad"]] == ["127.0.0.5"]
    lines = where.read_text().splitlines()
    assert len(lines) == rep["job_count"]
    for line in lines:
        group, _client, _cport, server, port = line.split()
        assert server == group.split(",")[0] and port == str(PORT)

"""Item 1 of issue 16: host lists never reach ClusterShell's @group upcalls or a shell.

The repro string is run through the real CLI (collect --hosts / --hostfile, bisect
--hostfile) with the installed ClusterShell, whose pip package ships a groups.conf
whose `map:` upcall runs through /bin/sh. Before the fix the marker file appeared.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

import ClusterShell
from forensics import hostset
from forensics.bisect.launchers import LaunchError, expand_hosts
from forensics.errors import ForensicsError
from forensics.fleet import hosts

REPRO = "@a';touch${IFS}%s;'"


def _groups_conf_has_shell_upcall() -> bool:
    venv_conf = Path(sys.prefix) / "etc" / "clustershell" / "groups.conf"
    return venv_conf.is_file() and "map:" in venv_conf.read_text()


def _forensics(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "forensics", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=60)


def test_installed_clustershell_ships_a_shell_upcall():
    """The premise of the repro: the installed package resolves @groups through a shell."""
    assert ClusterShell.__version__
    assert _groups_conf_has_shell_upcall()


@pytest.mark.parametrize("how", ["collect-hosts", "collect-hostfile", "bisect-hostfile", "bisect-hosts"])
def test_repro_string_runs_no_command(tmp_path, how):
    marker = tmp_path / "pwned"
    text = REPRO % marker
    hostfile = tmp_path / "hosts.txt"
    hostfile.write_text(text + "\n")
    argv = {
        "collect-hosts": ["collect", "--hosts", text, "-o", str(tmp_path / "b")],
        "collect-hostfile": ["collect", "--hostfile", str(hostfile), "-o", str(tmp_path / "b")],
        "bisect-hostfile": ["bisect", "--hostfile", str(hostfile), "--test", "true"],
        "bisect-hosts": ["bisect", "--hosts", text, "--test", "true"],
    }[how]
    done = _forensics(*argv, cwd=tmp_path)
    assert not marker.exists(), "a host list ran a shell command"
    assert done.returncode == 2, done.stderr
    assert "not allowed" in done.stderr and "@groups are not supported" in done.stderr


@pytest.mark.parametrize("bad", ["@a", "@a';touch${IFS}/tmp/x;'", "node[1-3]@x", "a b", "a;b", "$(id)",
                                 "-oProxyCommand=x", "a&b", "a!b", "a^b", "x/y", "", "h\nx"])
def test_both_expanders_refuse_the_same_text(bad):
    with pytest.raises(ForensicsError):
        hosts.expand_nodeset(bad)
    with pytest.raises(LaunchError):
        expand_hosts(bad)


def test_both_expanders_agree_on_good_text():
    text = "node[01-03],gpu7,10.0.0.5"
    assert hosts.expand_nodeset(text) == expand_hosts(text) == hostset.expand(text)
    assert "node02" in hostset.expand(text) and "10.0.0.5" in hostset.expand(text)


def test_huge_ranges_are_refused_before_expansion():
    """ClusterShell took 184 s to build n[1-100000000]; the count is taken from the text first."""
    start = time.monotonic()
    for text in ("n[1-100000000]", "a[1-1000]b[1-1000]", ",".join(f"h[1-{hostset.MAX_HOSTS}]" for _ in range(2))):
        with pytest.raises(hostset.HostSetError, match="at most"):
            hostset.expand(text)
    assert time.monotonic() - start < 1.0
    assert len(hostset.expand(f"n[1-{hostset.MAX_HOSTS}]")) == hostset.MAX_HOSTS


def test_fold_refuses_unchecked_names():
    assert hostset.fold(["n1", "n2", "n3"]) == "n[1-3]"
    with pytest.raises(hostset.HostSetError):
        hostset.fold(["@a"])

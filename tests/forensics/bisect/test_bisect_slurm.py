"""The Slurm launcher against a real (throwaway) Slurm cluster of four nodes.

One slurmctld and four slurmd daemons (nodes b1..b4, all on this machine, on ports
from this project's range) with a private munge key and socket, so nothing touches a
system Slurm. Each group job is `srun --nodelist=...`; the test command fails on the
node whose SLURMD_NODENAME is b3, i.e. the verdict rests on where Slurm ran it.
Needs root and slurm-wlm + munge; skipped otherwise.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from forensics.cli.main import main
from proc_stat import state_letter

pytestmark = pytest.mark.integration
NODES = ["b1", "b2", "b3", "b4"]

CONF = """ClusterName=bisecttest
SlurmctldHost={host}(127.0.0.1)
SlurmctldPort=29893
SlurmdPort=29894
AuthType=auth/munge
AuthInfo=socket={d}/munge/sock
CredType=cred/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SlurmUser=root
SlurmdUser=root
StateSaveLocation={d}/state
SlurmdSpoolDir={d}/spool/%n
SlurmctldPidFile={d}/ctld.pid
SlurmdPidFile={d}/d.%n.pid
SlurmctldLogFile={d}/ctld.log
SlurmdLogFile={d}/d.%n.log
MpiDefault=none
ReturnToService=2
NodeName=b[1-4] NodeHostname={host} NodeAddr=127.0.0.1 Port=29895-29898 CPUs=2 RealMemory=1000 State=UNKNOWN
PartitionName=debug Nodes=b[1-4] Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
"""


def _pids(d: Path) -> list[int]:
    """Daemons of this throwaway cluster: from their pid files and any process naming its conf."""
    out = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                if str(d).encode() in (proc / "cmdline").read_bytes():
                    out.append(int(proc.name))
            except OSError:
                pass
    for f in [d / "munge" / "pid", d / "ctld.pid", *[d / f"d.{n}.pid" for n in NODES]]:
        try:
            out.append(int(f.read_text().split()[0]))
        except (OSError, ValueError, IndexError):
            pass
    return out


def _alive(pid: int) -> bool:
    """False for zombies: they are gone, only not yet reaped."""
    return state_letter(pid) not in (None, "Z")


@pytest.fixture
def slurm(tmp_path):
    need = ["/usr/sbin/munged", "/usr/sbin/slurmctld", "/usr/sbin/slurmd"]
    if os.geteuid() != 0 or not all(Path(p).exists() for p in need) or not shutil.which("srun"):
        pytest.skip("needs root, munge and slurm-wlm")
    # munged runs as user munge, which cannot enter pytest's private tmp tree
    d = Path(tempfile.mkdtemp(prefix="bisect-slurm-", dir="/tmp"))
    os.chmod(d, 0o755)
    (d / "munge").mkdir(parents=True)
    (d / "state").mkdir()
    (d / "spool").mkdir()
    (d / "munge" / "key").write_bytes(os.urandom(128))
    shutil.chown(d / "munge", "munge", "munge")
    shutil.chown(d / "munge" / "key", "munge", "munge")
    os.chmod(d / "munge", 0o700)
    os.chmod(d / "munge" / "key", 0o400)
    m = d / "munge"
    subprocess.run(["su", "-s", "/bin/sh", "munge", "-c",
                    f"/usr/sbin/munged --key-file={m}/key --socket={m}/sock --pid-file={m}/pid "
                    f"--seed-file={m}/seed --log-file={m}/log --force"], check=True)
    conf = d / "slurm.conf"
    conf.write_text(CONF.format(host=os.uname().nodename.split(".")[0], d=d))
    env = {**os.environ, "SLURM_CONF": str(conf)}
    try:
        subprocess.run(["/usr/sbin/slurmctld", "-f", str(conf)], check=True, env=env)
        for n in NODES:
            subprocess.run(["/usr/sbin/slurmd", "-f", str(conf), "-N", n], check=True, env=env)
        for _ in range(40):
            out = subprocess.run(["sinfo", "-h", "-o", "%t %D"], capture_output=True, text=True, env=env).stdout
            if out.strip() == "idle 4":
                break
            time.sleep(0.5)
        else:
            pytest.skip(f"throwaway Slurm did not come up: {out!r}")
        yield env
    finally:
        time.sleep(0.5)  # let daemons that are still starting write their pid files
        pids = set(_pids(d))
        for sig in (signal.SIGTERM, signal.SIGKILL):
            for pid in pids:
                try:
                    os.kill(pid, sig)
                except ProcessLookupError:
                    pass
            for _ in range(20):  # slurmctld takes a few seconds to shut down
                pids = {p for p in pids if Path(f"/proc/{p}").exists() and _alive(p)}
                if not pids:
                    break
                time.sleep(0.5)
        shutil.rmtree(d, ignore_errors=True)


def test_srun_launcher_finds_the_bad_node(slurm, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("SLURM_CONF", slurm["SLURM_CONF"])
    test = "sh -c 'test \"$SLURMD_NODENAME\" = b3 && exit 1; exit 0'"
    rc = main(["bisect", "--hosts", "b[1-4]", "--launcher", "slurm", "--test", test, "--timeout", "60",
               "--state", str(tmp_path / "s.json"), "--flake-rate", "0.001", "--json", "--quiet"])
    rep = json.loads(capsys.readouterr().out)
    assert rc == 5, rep  # bad hosts found
    assert [e["unit"] for e in rep["bad"]] == ["b3"]
    # the state keeps results, not commands: each job's argv heads its log
    argvs = [shlex.split(Path(j["log"]).read_text().splitlines()[0].split(": ", 1)[1]) for j in rep["jobs"]]
    assert argvs and all(a[0] == "srun" and any(x.startswith("--nodelist=") for x in a) for a in argvs)

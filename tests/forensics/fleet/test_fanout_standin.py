"""The fleet orchestrator at width, with the benchmark's stand-in ssh (benchmarks/standin_ssh).

The stand-in waits a set latency and prints a real host answer: a bundle the real remote
collector made of a rank-like process here. ClusterShell, judging, extraction and merging
run as in production; flat, and in tree mode through ClusterShell's real gateway (run
here by the stand-in, as sshd would on a gateway host). Behaviour only, no timings.
"""

from __future__ import annotations

import shutil
import socket
import sys
from pathlib import Path

import pytest

from benchmarks.fleet_fanout import STANDIN, make_answer
from forensics.fleet import command as cmd
from forensics.fleet import wire
from forensics.fleet.collect import collect_fleet, new_tag, ssh_runner

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def answers(tmp_path_factory) -> Path:
    """A folder of answers: 'default' is a real host answer; tests add per-host ones."""
    folder = tmp_path_factory.mktemp("answers")
    make_answer(folder / "default")
    return folder


def _collect(tmp_path: Path, answers: Path, hosts: list[str], monkeypatch, topology: Path | None = None,
             fanout: int = 8,
             workers: int | None = None):
    monkeypatch.setenv("FORENSICS_STANDIN_LATENCY", "0.2")
    monkeypatch.setenv("FORENSICS_STANDIN_ANSWER", str(answers))
    monkeypatch.setenv("CLUSTERSHELL_GW_PYTHON_EXECUTABLE", sys.executable)
    monkeypatch.setenv("CLUSTERSHELL_GW_LOG_DIR", str(tmp_path))  # gateways log here, not in /tmp
    monkeypatch.setenv("CLUSTERSHELL_GW_LOG_LEVEL", "DEBUG")
    spec = cmd.RemoteSpec(python=sys.executable, tag=new_tag(), timeout=10)
    runner = ssh_runner([], fanout, ssh_path=str(STANDIN), topology=topology)
    return collect_fleet(hosts, tmp_path / "job", spec, runner, host_timeout=60, quiet=True, cleanup=False,
                         workers=workers)


def _assert_all_filed(result, hosts: list[str]) -> None:
    assert [p.host for p in result.parts] == hosts
    assert all(p.status == "ok" for p in result.parts), [p.error for p in result.parts if p.status != "ok"]
    assert len(result.manifest.ranks) == len(hosts)
    assert sorted(r.host for r in result.manifest.ranks) == sorted(hosts)
    for host in hosts:  # extracted once, in place: the host's own manifest and its rank's files
        folder = result.out / "hosts" / host
        assert (folder / "host-manifest.json").is_file()
        rank = next(r for r in result.manifest.ranks if r.host == host)
        assert rank.dir.startswith(f"hosts/{host}/") and (result.out / rank.dir / "environ.json").is_file()
    assert not list(Path("/tmp").glob("forensics-fleet-merge-*")), "no temporary second copy"


# None: as collect_fleet picks (a thread for 60 hosts)
@pytest.mark.parametrize("workers, two_loops", [(None, False), (2, True)])
def test_many_standin_hosts_all_arrive_in_the_bundle(tmp_path, answers, monkeypatch, workers, two_loops):
    """Filed on a thread with one event loop, and in two filing processes with two event loops (as at 4,096 hosts)."""
    from forensics.fleet import transport

    if two_loops:
        monkeypatch.setattr(transport, "LOOPS_FROM_HOSTS", 16)
    assert transport.event_loops(60, 8, None) == (2 if two_loops else 1)
    hosts = [f"node{i:03d}" for i in range(60)]
    result = _collect(tmp_path, answers, hosts, monkeypatch, workers=workers)
    _assert_all_filed(result, hosts)
    assert set(result.phases) == {"answers", "filed", "merged"}


@pytest.mark.parametrize("workers", [0, 2])
def test_a_hostile_archive_among_many_is_refused_and_the_others_kept(tmp_path, answers, monkeypatch, workers):
    import io
    import tarfile

    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        link = tarfile.TarInfo("bundle/hosts/x/escape")
        link.type, link.linkname = tarfile.SYMTYPE, "/etc"
        tar.addfile(link)
    folder = tmp_path / "answers"
    shutil.copytree(answers, folder)
    (folder / "node007").write_text("".join(line + "\n" for line in wire.encode({"status": "ok"}, buffer.getvalue())))
    hosts = [f"node{i:03d}" for i in range(20)]
    result = _collect(tmp_path, folder, hosts, monkeypatch, workers=workers)
    bad = [p for p in result.parts if p.status != "ok"]
    # wording is the behaviour: the host's error as the manifest records it
    assert [(p.host, p.status) for p in bad] == [("node007", "failed")] and "links are not allowed" in bad[0].error
    assert not (result.out / "hosts" / "node007").exists()
    assert len(result.manifest.ranks) == 19


def test_tree_mode_through_clustershell_gateways(tmp_path, answers, monkeypatch):
    pytest.importorskip("ClusterShell.Gateway")
    hosts = [f"node{i:03d}" for i in range(24)]
    root = socket.gethostname().split(".", 1)[0]
    topology = tmp_path / "topology.conf"
    topology.write_text(f"[routes]\n{root}: gw[0-1]\ngw[0-1]: node[000-023]\n")
    result = _collect(tmp_path, answers, hosts, monkeypatch, topology=topology, fanout=4)
    _assert_all_filed(result, hosts)
    logged = "".join(log.read_text() for log in tmp_path.glob("*.gw.log"))
    assert "gateway node name gw0" in logged and "gateway node name gw1" in logged  # both gateways carried hosts

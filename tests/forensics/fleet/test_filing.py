"""Filing answers in worker processes (forensics.fleet.filing): the same parts as on a thread,
hostile archives refused there too, and a worker that dies loses neither the host nor the run.

Real worker processes (python -m forensics.fleet.filing), real archives, real files."""

from __future__ import annotations

import io
import os
import signal
import tarfile

from forensics.bundle.writer import BundleWriter
from forensics.fleet import wire
from forensics.fleet.filing import Filing
from forensics.fleet.outcome import HostRun


def _good_answer(tmp_path) -> list[str]:
    """A host answer: a real (small) bundle written by BundleWriter, archived as the remote collector does."""
    src = tmp_path / "src" / "bundle"
    writer = BundleWriter(src)
    (src / "hosts" / "vm").mkdir(parents=True)
    (src / "hosts" / "vm" / "memory.json").write_text('{"MemTotal": 1}\n')
    writer.save()
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        tar.add(src, arcname="bundle")
    return list(wire.encode({"status": "ok"}, buffer.getvalue()))


def _link_answer() -> list[str]:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        link = tarfile.TarInfo("bundle/hosts/x/escape")
        link.type, link.linkname = tarfile.SYMTYPE, "/etc"
        tar.addfile(link)
    return list(wire.encode({"status": "ok"}, buffer.getvalue()))


def _file_all(out, workers: int, runs: list[HostRun]):
    out.mkdir(parents=True)
    filing = Filing(20, out, workers)
    assert filing.workers == workers
    for run in runs:
        filing.give(run)
    return filing, filing.finish()


def _runs(good: list[str]) -> list[HostRun]:
    runs = [HostRun(f"n{i}", stdout=list(good), returncode=0, seconds=1.0) for i in range(6)]
    runs.append(HostRun("evil", stdout=_link_answer(), returncode=0))
    runs.append(HostRun("late", timed_out=True, seconds=20.0))
    runs.append(HostRun("down", stderr=["ssh: connect to host down port 22: Connection refused"], returncode=255))
    return runs


def test_worker_processes_file_what_a_thread_files(tmp_path):
    good = _good_answer(tmp_path)
    _, here = _file_all(tmp_path / "thread", 0, _runs(good))
    filing, there = _file_all(tmp_path / "procs", 2, _runs(good))
    assert sorted(there) == sorted(here)
    for host, part in here.items():
        other = there[host]
        assert (other.status, other.seconds) == (part.status, part.seconds), host
        assert (other.error or "").replace(str(tmp_path / "procs"),
                                           "X") == (part.error or "").replace(str(tmp_path / "thread"), "X")
        placed = part.placed.to_dict() if part.placed else None
        assert (other.placed.to_dict() if other.placed else None) == placed, host
        assert (other.bundle is None) == (part.bundle is None)
    for i in range(6):
        assert (tmp_path / "procs" / "hosts" / f"n{i}" / "host-manifest.json").is_file()
        assert (tmp_path / "procs" / "hosts" / f"n{i}" / "memory.json").read_text() == '{"MemTotal": 1}\n'
    # wording is the behaviour: the host's error as the manifest records it
    assert there["evil"].status == "failed" and "links are not allowed" in there["evil"].error
    assert not (tmp_path / "procs" / "hosts" / "evil").exists()
    assert (there["late"].status, there["down"].status) == ("timeout", "unreachable")
    assert filing.cpu_s > 0 and filing.peak_rss_kb > 0  # the workers ended and were accounted for
    for worker in filing.started:
        assert worker.proc.returncode == 0


def test_a_worker_that_dies_is_replaced_and_its_host_filed(tmp_path):
    out = tmp_path / "job"
    out.mkdir()
    good = _good_answer(tmp_path)
    filing = Filing(20, out, 1)
    first = filing.started[0].proc
    os.kill(first.pid, signal.SIGKILL)  # dead before its first host: the hand-over fails, a fresh worker files it
    for i in range(3):
        filing.give(HostRun(f"n{i}", stdout=list(good), returncode=0))
    parts = filing.finish()
    assert [parts[f"n{i}"].status for i in range(3)] == ["ok"] * 3, [p.error for p in parts.values()]
    assert all((out / "hosts" / f"n{i}" / "host-manifest.json").is_file() for i in range(3))
    assert first.returncode == -signal.SIGKILL


def test_a_host_reported_twice_is_filed_once(tmp_path):
    out = tmp_path / "job"
    out.mkdir()
    good = _good_answer(tmp_path)
    filing = Filing(20, out, 1)
    filing.give(HostRun("n0", stdout=list(good), returncode=0))
    filing.give(HostRun("n0", stdout=list(good), returncode=0))
    parts = filing.finish()
    assert list(parts) == ["n0"] and parts["n0"].status == "ok"

"""Host collectors run for real on this machine: what they copy, and how they fail softly."""

from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from parsers.model.manifest import Status
from forensics.collectors.base import CollectOptions, HostTarget, timed
from forensics.collectors.host import HOST_COLLECTORS, host_collectors
from forensics.collectors.host_cpufreq import CpuFreqCollector
from forensics.collectors.host_infiniband import InfinibandCollector
from forensics.collectors.host_kernel_log import KernelLogCollector
from forensics.collectors.host_nvidia_smi import NvidiaSmiCollector
from hostinfo_helpers import REPO

pytestmark = pytest.mark.integration


@pytest.fixture
def target(tmp_path):
    (tmp_path / "hosts" / "here").mkdir(parents=True)
    return HostTarget(host="here", bundle_root=tmp_path, rel_dir="hosts/here")


def test_every_host_collector_runs_here_and_reports_a_status(target):
    assert len(HOST_COLLECTORS) == 7
    for collector in host_collectors():
        record = timed(collector.name, lambda c=collector: collector.collect(target, CollectOptions(timeout=20)))
        assert record.status in Status.ALL, record
        assert record.status != Status.FAILED, record  # nothing here is broken: absent tools are 'unavailable'
        for rel in record.files:
            assert (target.bundle_root / rel).is_file()
        if record.status in (Status.UNAVAILABLE, Status.DENIED, Status.SKIPPED):
            assert record.error, f"{record.name}: a soft failure must say why"


_DMESG_T = re.compile(r"^\[\w{3} \w{3} [ \d]\d \d\d:\d\d:\d\d \d{4}\] ")


def test_kernel_log_as_root_copies_the_ring_buffer(target):
    if os.geteuid() != 0:
        pytest.skip("needs root where kernel.dmesg_restrict=1")
    record = KernelLogCollector().collect(target, CollectOptions())
    assert record.status == Status.OK
    text = (target.bundle_root / record.files[0]).read_text()
    # the ring buffer's own lines, whatever has rotated out of it by now (its first 'Linux version' line
    # goes once the machine has logged enough): the copy holds them, with dmesg -T's wall-clock stamps
    ring = subprocess.run(["dmesg"], capture_output=True, text=True, timeout=30).stdout.splitlines()
    lines = text.splitlines()
    assert lines and sum(bool(_DMESG_T.match(ln)) for ln in lines) >= 0.9 * len(lines)
    assert len(lines) >= 0.9 * len(ring) or record.details["truncated"]
    assert record.details["source"] == "dmesg -T"


def _nobody_can_run_here() -> bool:
    python = shutil.which("python3", path="/usr/bin:/bin")
    if os.geteuid() != 0 or not shutil.which("setpriv") or not python:
        return False
    probe = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "test", "-r",
                            str(REPO / "forensics" / "__init__.py")], check=False)
    return probe.returncode == 0


@pytest.mark.skipif(not _nobody_can_run_here(),
                    reason="needs root, setpriv, /usr/bin/python3 and a repo readable by 'nobody'")
def test_kernel_log_as_unprivileged_user_is_denied_with_the_reason(tmp_path):
    tmp_path.chmod(0o777)
    code = (
        "import json; from pathlib import Path;"
        "from forensics.collectors.host_kernel_log import KernelLogCollector;"
        "from forensics.collectors.base import HostTarget, CollectOptions;"
        f"r = KernelLogCollector().collect(HostTarget('h', Path({str(tmp_path)!r}), 'h'), CollectOptions());"
        "print(json.dumps({'status': r.status, 'error': r.error}))"
    )
    restrict = Path("/proc/sys/kernel/dmesg_restrict").read_text().strip()
    out = subprocess.run(
        ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "env", f"PYTHONPATH={REPO}", "/usr/bin/python3",
         "-c", code],
        capture_output=True, text=True, timeout=60, check=True,
    )
    import json

    result = json.loads(out.stdout)
    if restrict == "1":
        assert result["status"] == Status.DENIED
        assert "CAP_SYSLOG" in result["error"] and "Operation not permitted" in result["error"]
    else:
        assert result["status"] == Status.OK


def _fake_tool(bin_dir: Path, name: str, body: str) -> None:
    path = bin_dir / name
    path.write_text("#!/bin/sh\n" + body + "\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


def test_hung_nvidia_smi_is_killed_and_recorded_as_timeout(target, tmp_path, monkeypatch):
    """A real process that never answers stands in for nvidia-smi on a GPU whose driver is stuck."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    nap = f"sleep 60.{os.getpid()}"  # unique, so the check below sees only our child
    _fake_tool(bin_dir, "nvidia-smi", nap)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    record = NvidiaSmiCollector().collect(target, CollectOptions(timeout=1))
    assert record.status == Status.TIMEOUT
    assert "GPU or driver hung" in record.error
    assert len(record.details["runs"]) == 1  # it did not spend a timeout on each command
    for pattern in (nap, str(bin_dir / "nvidia-smi")):
        out = subprocess.run(["pgrep", "-f", pattern], capture_output=True, text=True, check=False)
        assert out.stdout.strip() == "", f"the hung tool's process group must be gone ({pattern})"


def test_failing_nvidia_smi_keeps_its_message(target, tmp_path, monkeypatch):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    message = ("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
               "Make sure that the latest NVIDIA driver is installed and running.")
    _fake_tool(bin_dir, "nvidia-smi", f"echo \"{message}\"; exit 9")
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    record = NvidiaSmiCollector().collect(target, CollectOptions(timeout=10))
    assert record.status == Status.FAILED
    # verbatim input: nvidia-smi's own message
    assert "couldn't communicate with the NVIDIA driver" in record.error
    assert (target.bundle_root / record.files[0]).read_text().startswith("NVIDIA-SMI has failed")


def test_infiniband_and_cpufreq_read_a_sysfs_shaped_tree(target, tmp_path):
    """Neither exists on this VM: the collectors read the same layout from a directory tree."""
    sysfs = tmp_path / "sys"
    port = sysfs / "class" / "infiniband" / "mlx5_0" / "ports" / "1"
    (port / "counters").mkdir(parents=True)
    (port / "hw_counters").mkdir()
    for name, value in {"state": "4: ACTIVE", "phys_state": "5: LinkUp", "rate": "400 Gb/sec (4X NDR)",
                        "link_layer": "InfiniBand"}.items():
        (port / name).write_text(value + "\n")
    (port / "counters" / "link_downed").write_text("1\n")
    cpu = sysfs / "devices" / "system" / "cpu" / "cpu0" / "cpufreq"
    cpu.mkdir(parents=True)
    (cpu / "scaling_governor").write_text("powersave\n")
    (cpu / "scaling_max_freq").write_text("1200000\n")
    (cpu / "cpuinfo_max_freq").write_text("3600000\n")
    (sysfs / "devices" / "system" / "cpu" / "cpufreq").mkdir()  # not a cpuN folder: ignored
    ib = InfinibandCollector(sysfs=sysfs).collect(target, CollectOptions())
    freq = CpuFreqCollector(sysfs=sysfs, procfs=tmp_path / "noproc").collect(target, CollectOptions())
    assert ib.status == Status.OK and freq.status == Status.OK
    import json

    data = json.loads((target.bundle_root / ib.files[0]).read_text())
    assert data["devices"]["mlx5_0"]["ports"]["1"]["counters"] == {"link_downed": "1"}
    cpufreq = json.loads((target.bundle_root / freq.files[0]).read_text())["cpufreq"]
    assert cpufreq["cpu0"]["scaling_governor"] == "powersave"
    assert InfinibandCollector(sysfs=tmp_path / "none").collect(target, CollectOptions()).status == Status.SKIPPED
    from parsers import knowledge
    from parsers.readers.host_ib import parse_ib_json
    from parsers.readers.host_system import parse_cpufreq_json

    kb = knowledge.load(use_env=False)
    cpu_facts = parse_cpufreq_json((target.bundle_root / freq.files[0]).read_text())
    assert {f.entry.id for f in kb.match_facts("cpu", cpu_facts)} == {"cpu-governor-powersave", "cpu-frequency-capped"}
    ib_facts = parse_ib_json((target.bundle_root / ib.files[0]).read_text())["ib mlx5_0/1"]
    assert {f.entry.id for f in kb.match_facts("ib mlx5_0/1", ib_facts)} == {"ib-link-downed"}


def _memory_cgroup() -> Path | None:
    base = Path("/sys/fs/cgroup/memory")
    if os.geteuid() == 0 and (base / "memory.limit_in_bytes").exists() and os.access(base, os.W_OK):
        return base
    return None


@pytest.mark.skipif(_memory_cgroup() is None, reason="needs root and a cgroup-v1 memory controller")
def test_a_real_cgroup_oom_kill_is_collected_and_recognised(tmp_path):
    """Provoke a real OOM kill in a 64 MiB cgroup, collect the kernel log, and find it by pid."""
    from parsers.gather.evidence import load_path
    from forensics.bundle.writer import BundleWriter
    from hostinfo_helpers import collect_here
    from parsers import knowledge
    from parsers.judges.hosts import host_reports

    cgroup = _memory_cgroup() / f"hf_test_oom_{os.getpid()}"
    cgroup.mkdir()
    try:
        (cgroup / "memory.limit_in_bytes").write_text(str(64 << 20))
        hog = "x = []\nwhile True: x.append(bytearray(8 << 20))"
        proc = subprocess.Popen([sys.executable, "-c", hog],
                                preexec_fn=lambda: (cgroup / "cgroup.procs").write_text(str(os.getpid())))
        assert proc.wait(timeout=60) == -9
    finally:
        cgroup.rmdir()
    writer = BundleWriter(tmp_path / "bundle")
    collect_here(writer, "here")
    writer.save()
    reports = host_reports(load_path(writer.root), knowledge.load(use_env=False))
    ooms = [g for g in reports[0].groups
            if g.entry.id == "oom-killer-cgroup" and g.last.groups.get("pid") == str(proc.pid)]
    assert ooms, "the OOM kill of our process is in the collected kernel log"
    assert reports[0].status == "healthy"  # a cgroup OOM is the job's fault, not the host's


def test_nvml_child_without_pynvml_or_driver_is_skipped_with_the_reason(target):
    """Runs the real child process: here either pynvml is absent or it finds no driver library."""
    from forensics.collectors.host_nvml import NvmlCollector

    record = NvmlCollector().collect(target, CollectOptions(timeout=30))
    try:
        import pynvml  # noqa: F401
    except ImportError:
        # wording is the behaviour: the skip reason the manifest records
        assert record.status == Status.SKIPPED and "pynvml is not installed" in record.error
        return
    if Path("/dev/nvidiactl").exists():
        pytest.skip("a real NVIDIA driver is present: see scripts/device/host_snapshot.sh")
    assert record.status == Status.SKIPPED and "NVMLError_LibraryNotFound" in record.error

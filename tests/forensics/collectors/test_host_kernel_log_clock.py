"""This machine's real kernel log, collected from dmesg -T and from /dev/kmsg: each line's time comes out as a Unix
time in [boot, collection], and one record gets one time from both sources."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from forensics.collectors.base import CollectOptions, HostTarget
from forensics.collectors.host_kernel_log import KMSG, KernelLogCollector
from parsers.model.kernel_time import MARGIN_S, KernelClock, epoch_of
from parsers.readers.host_kernel import read_kernel_log

pytestmark = pytest.mark.skipif(
    subprocess.run(["dmesg"], capture_output=True, check=False).returncode != 0 or not os.access(KMSG, os.R_OK),
    reason="this machine's kernel log is not readable here (kernel.dmesg_restrict=1 needs root or CAP_SYSLOG)")


def _collect(tmp_path: Path, name: str) -> tuple[dict, list]:
    record = KernelLogCollector().collect(HostTarget("here", tmp_path / name, "hosts/here"), CollectOptions())
    assert record.status == "ok", record.error
    text = (tmp_path / name / record.files[0]).read_text()
    return record.details, read_kernel_log(text)


def _btime() -> float:
    line = next(ln for ln in Path("/proc/stat").read_text().splitlines() if ln.startswith("btime "))
    return float(line.split()[1])


def _times(details: dict, lines: list) -> dict[str, float]:
    """message -> its Unix time (the last record of each message)."""
    clock = KernelClock.from_details(details)
    return {ln.message: at for ln in lines if (at := epoch_of(ln.when, clock)) is not None}


def test_dmesg_T_is_collected_in_utc_and_every_line_falls_between_boot_and_now(tmp_path):
    details, lines = _collect(tmp_path, "dmesg")
    assert details["source"] == "dmesg -T" and details["stamp_clock"] == "UTC"
    # boot time by two roads: the collector's (wall less monotonic) and the kernel's btime (wall less boot time);
    # they differ by the time the machine slept, which the collector records
    assert abs(details["boot_epoch"] - _btime()) <= 2 + details["suspended_s"]
    times = _times(details, lines)
    assert len(times) >= 0.5 * len({ln.message for ln in lines})
    assert all(details["boot_epoch"] - MARGIN_S <= at <= details["collected_at_epoch"] + MARGIN_S
               for at in times.values())
    # the VM's own OOM records (tests' memory cgroups), where the ring buffer still holds them, are in the past
    for message, at in times.items():
        if "Killed process" in message:
            assert at <= time.time()


def test_kmsg_and_dmesg_give_each_real_record_one_time(tmp_path, monkeypatch):
    """dmesg and journalctl pointed at nothing: the collector falls back to /dev/kmsg (microseconds since boot),
    whose times, through the recorded boot time, agree with dmesg -T's for the same messages."""
    dmesg_details, dmesg_lines = _collect(tmp_path, "dmesg")
    monkeypatch.setenv("FORENSICS_DMESG", str(tmp_path / "absent"))
    monkeypatch.setenv("FORENSICS_JOURNALCTL", str(tmp_path / "absent"))
    kmsg_details, kmsg_lines = _collect(tmp_path, "kmsg")
    assert kmsg_details["source"] == KMSG and kmsg_details["stamp_clock"] == "since boot"
    records = [ln for ln in kmsg_lines if not ln.raw[:1].isspace()]  # ' SUBSYSTEM=acpi': a record's dictionary
    assert records and all(ln.when is not None and ln.when.kind == "boot" for ln in records)
    by_dmesg, by_kmsg = _times(dmesg_details, dmesg_lines), _times(kmsg_details, kmsg_lines)
    shared = [m for m in by_kmsg if m in by_dmesg and sum(ln.message == m for ln in kmsg_lines) == 1]
    assert len(shared) >= 10
    # dmesg -T prints whole seconds (truncated), and the two collections read the clocks a moment apart
    assert all(abs(by_kmsg[m] - by_dmesg[m]) <= 2.0 for m in shared), [
        (m, by_kmsg[m] - by_dmesg[m]) for m in shared if abs(by_kmsg[m] - by_dmesg[m]) > 2.0][:3]


def test_an_older_bundles_record_names_no_clock_and_its_times_stay_unknown(tmp_path):
    """A record as the collector wrote it before it said its clock (dmesg -T in the local zone): not compared."""
    details, lines = _collect(tmp_path, "dmesg")
    older = {k: v for k, v in details.items() if k not in ("stamp_clock", "boot_epoch", "suspended_s")}
    assert _times(older, lines) == {}
    assert "not recorded" in KernelClock.from_details(older).says

"""Kernel stamps decoded to times: real kernel-log lines of this project's fixtures, in every printed form."""

from __future__ import annotations

import re
from datetime import datetime, timezone
from pathlib import Path

import pytest

from parsers.gather.registry import ReadInput, kind
from parsers.model.events import ErrorKind, Origin
from parsers.model.kernel_time import (BOOT, DRIFT_PPM, MARGIN_S, WALL, ZONED, KernelClock, KernelEntry, epoch_of,
                                       parse_stamp, utc_clock_time)
from parsers.readers import pasted_host
from parsers.readers.host_kernel import read_kernel_log

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
KERNEL = FIXTURES / "host" / "kernel"
#: syslog's and journalctl short's stamp: no year, no zone (a time of some year in some zone)
_NO_YEAR = re.compile(r"[A-Z][a-z]{2} [ \d]?\d \d\d:\d\d:\d\d(?:\.\d+)?")


def _utc(text: str) -> float:
    return datetime.fromisoformat(text).replace(tzinfo=timezone.utc).timestamp()


def test_dmesg_T_and_raw_dmesg_of_one_boot_differ_by_one_boot_time():
    """The development machine's one boot captured as `dmesg -T` and as `dmesg` (real, 425 lines each): every
    line decodes in both forms, and wall time less seconds since boot is the same boot time within dmesg -T's
    whole second (the machine never slept)."""
    walls = read_kernel_log((KERNEL / "dev-vm-dmesg-T.log").read_text())
    boots = read_kernel_log((KERNEL / "dev-vm-dmesg-raw.log").read_text())
    pairs = [(w.when, b.when) for w, b in zip(walls, boots) if w.message == b.message and w.when and b.when]
    assert len(pairs) >= 420
    assert {w.kind for w, _b in pairs} == {WALL} and {b.kind for _w, b in pairs} == {BOOT}
    boot_times = [w.value - b.value for w, b in pairs]
    assert max(boot_times) - min(boot_times) <= 1.0
    # the first line is the kernel's first message: 'Sun Nov 29 08:08:28 2026' at 0.000000 s
    assert pairs[0][0].value == _utc("2026-11-29T08:08:28") and pairs[0][1].value == 0.0


def test_the_cgroup_oom_kill_keeps_its_time_in_both_forms():
    walls = [ln for ln in read_kernel_log((KERNEL / "dev-vm-dmesg-T.log").read_text())
             if "Killed process" in ln.message]
    boots = [ln for ln in read_kernel_log((KERNEL / "dev-vm-dmesg-raw.log").read_text())
             if "Killed process" in ln.message]
    assert walls and len(walls) == len(boots)
    assert walls[0].stamp == "Sun Nov 29 08:56:12 2026" and walls[0].when.value == _utc("2026-11-29T08:56:12")
    assert boots[0].stamp == "2864.955654" and boots[0].when.value == 2864.955654


def test_zoned_stamps_are_absolute_and_syslog_stamps_name_no_year():
    """public-host-faults.log: `dmesg --time-format iso` of equinor/ert#7797 carries +02:00; syslog's
    'Oct 11 06:07:26 glustern1 kernel:' has no year and no zone, so no time."""
    lines = read_kernel_log((KERNEL / "public-host-faults.log").read_text())
    iso = next(ln for ln in lines if ln.message.startswith("Out of memory") and ln.stamp.startswith("2024"))
    assert iso.when.kind == ZONED and iso.when.value == _utc("2024-04-29T12:55:41.679700")
    assert epoch_of(iso.when, KernelClock()) == iso.when.value  # no clock recorded: still absolute
    syslog = next(ln for ln in lines if "glusterfsd" in ln.message)
    assert syslog.stamp == "Oct 11 06:07:26" and syslog.when is None


def test_a_clock_is_needed_for_wall_and_boot_stamps():
    wall, boot = parse_stamp("Mon Dec  7 17:32:58 2026"), parse_stamp("2864.955654")
    unknown = KernelClock.from_details({"source": "dmesg -T", "uptime_s": 5.0})  # an older bundle: no stamp_clock
    assert epoch_of(wall, unknown) is None and epoch_of(boot, unknown) is None
    utc = KernelClock.from_details({"source": "dmesg -T", "stamp_clock": "UTC", "boot_epoch": 1796600000.0,
                                    "suspended_s": 0.0})
    assert epoch_of(wall, utc) == _utc("2026-12-07T17:32:58")
    assert epoch_of(boot, utc) == 1796600000.0 + 2864.955654
    slept = KernelClock.from_details({"stamp_clock": "UTC", "boot_epoch": 1796600000.0, "suspended_s": 3600.0})
    assert epoch_of(wall, slept) is None and "suspended 3600 s" in slept.says


def test_a_kmsg_record_header_is_microseconds_since_boot():
    assert parse_stamp("6,1234,2864955654,-").value == 2864.955654
    assert parse_stamp("6,1234,2864955654,-").kind == BOOT


def test_hostile_stamps_decode_to_nothing():
    for text in ("Mon Foo 29 08:56:12 2026", "Sun Feb 30 08:56:12 2026", "2026-13-01T00:00:00Z", "", None,
                 "9" * 40 + ".5", "1," * 10000):
        assert parse_stamp(text) is None


def test_a_loose_kernel_log_keeps_each_stamp_beside_its_message():
    """The registry's kernel-log reader (what a bundle's and a loose kernel.log go through)."""
    path = KERNEL / "dev-vm-oom.log"
    data = path.read_bytes()
    parsed = kind("kernel-log").read(ReadInput(path, data, len(data), Origin(file=path.name)))
    notes = dict(parsed.notes)
    killed = next(n for n, text in notes.items() if "Killed process" in text)
    # verbatim input: the kernel's own message, its stamp taken off
    assert notes[killed].startswith("Memory cgroup out of memory: Killed process")
    assert parsed.kernel_stamps[killed] == "Sun Nov 29 08:56:12 2026"
    assert parse_stamp(parsed.kernel_stamps[killed]).value == _utc("2026-11-29T08:56:12")
    assert all(n in notes for n in parsed.kernel_stamps)


def test_pasted_kernel_lines_keep_their_stamp_in_both_forms():
    """A dmesg line pasted under a job's output, in `dmesg -T` form and in seconds since boot (real Xid lines of
    public-gpu-faults.log, re-stamped in the other form): the event keeps the stamp, which decodes by its kind."""
    line = next(ln for ln in (KERNEL / "public-gpu-faults.log").read_text().splitlines() if "NVRM: Xid" in ln)
    message = line[line.index("NVRM: Xid"):]
    for stamp, form in (("Mon Dec  7 17:32:58 2026", WALL), ("12345.678901", BOOT)):
        events = pasted_host.match_line(f"[{stamp}] {message}", Origin(file="job.log", line=3))
        assert events and events[0].kind == ErrorKind.XID and events[0].timestamp == stamp
        assert parse_stamp(events[0].timestamp).kind == form


def test_a_time_is_said_with_its_day_when_the_day_differs():
    job = _utc("2026-12-07T18:02:10")
    assert utc_clock_time(_utc("2026-12-07T15:55:01"), job) == "15:55:01 UTC"
    assert utc_clock_time(_utc("2026-12-05T15:55:01"), job) == "Dec 05 15:55:01 UTC"


def test_every_stamped_fault_line_of_the_fixtures_decodes():
    """Every OOM, oom-kill and Xid line of the real kernel logs kept in tests/fixtures (the H200's provoked Xid, the
    development VM's cgroup OOM, public posts, the identity forms of journalctl and clush) whose stamp names a
    year decodes to a time; only syslog's year-less stamps do not."""
    files = [*(FIXTURES / "host").rglob("*.log"), *(FIXTURES / "host").rglob("*.txt"),
             *(FIXTURES / "realworld").glob("*.log")]
    decoded = 0
    for path in files:
        for ln in read_kernel_log(path.read_text(errors="replace")):
            if ln.stamp and any(k in ln.message for k in ("Out of memory", "oom-kill", "Xid")):
                assert ln.when is not None or _NO_YEAR.fullmatch(ln.stamp), (path.name, ln.stamp)
                decoded += ln.when is not None
    assert decoded >= 30
    verbose = read_kernel_log((FIXTURES / "host" / "identity" / "journalctl-verbose.txt").read_text())
    xid = next(ln for ln in verbose if "Xid" in ln.message)
    assert xid.when.kind == ZONED and xid.when.value == _utc("2026-12-06T21:04:35.944324")


def test_a_printk_stamp_is_doubted_by_its_drift_over_the_uptime_at_the_event():
    """printk's clock is not steered by NTP: a stamp 100 days after boot may be off by minutes; journald's zoned
    stamps are wall time when written."""
    clock = KernelClock.from_details({"stamp_clock": "UTC", "boot_epoch": 1796600000.0, "suspended_s": 0.0})
    day = 86400.0
    early = KernelEntry("k", 1, "m", "843.072392", clock)
    late = KernelEntry("k", 2, "m", f"{100 * day:.6f}", clock)
    wall = KernelEntry("k", 3, "m", datetime.fromtimestamp(1796600000.0 + 100 * day, timezone.utc)
                       .strftime("%a %b %d %H:%M:%S %Y"), clock)
    zoned = KernelEntry("k", 4, "m", "2024-04-29T14:55:41,679700+02:00", clock)
    assert early.doubt == pytest.approx(MARGIN_S + DRIFT_PPM * 1e-6 * 843.072392)
    assert late.doubt == pytest.approx(MARGIN_S + DRIFT_PPM * 1e-6 * 100 * day) and late.doubt > 400
    assert wall.at == late.at == 1796600000.0 + 100 * day and wall.doubt == pytest.approx(late.doubt)
    assert zoned.doubt == MARGIN_S and zoned.at == _utc("2024-04-29T12:55:41.679700")

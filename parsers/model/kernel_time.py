"""When a kernel-log line was written, as a Unix time, where its stamp and the collection's clock say so.

Why: a kernel event from before the job's processes started (an OOM kill of an unrelated process hours earlier)
is no fault of the job; only a line's own time tells it apart. Stamps come in three kinds:

- 'wall': `dmesg -T`'s `[Mon Dec  7 17:32:58 2026]` (and an ISO stamp with no zone), printed in the printing
  machine's time zone. Comparable only when the collection says which zone: the collector runs dmesg with TZ=UTC
  and records `stamp_clock: "UTC"`. A pasted or an older bundle's dmesg -T names no zone: its time stays unknown.
- 'boot': `[12345.678901]` and /dev/kmsg's microseconds, seconds since boot. Comparable when the collection
  recorded when the machine booted (`boot_epoch`).
- 'zoned': journalctl's and `dmesg --time-format iso`'s stamps with an offset (`2026-12-07T15:55:01+0000`):
  absolute wherever they are read.

Precision: printk stamps use a clock that stops while the machine is suspended, so after a suspend `dmesg -T`
prints times earlier than the truth by the time spent suspended; the collector records that time and a clock
that lost more than SUSPEND_TRUST_S is not trusted. printk's clock (sched_clock) is not steered by NTP as wall
time is: a stamp turned into wall time is off by the clock's frequency error times the uptime at the event
(DRIFT_PPM allows for 50 ppm: 4 s a day of uptime). Then dmesg -T's whole seconds and /proc/stat's
whole-second btime: MARGIN_S. All of that doubt goes in the event's favour (within it, it counts).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, NamedTuple

#: an event this close before the job's start still counts (stamp and start each carry ~1 s of rounding)
MARGIN_S = 10.0
#: a machine suspended longer than this since boot: its printk stamps lag wall time too much to compare
SUSPEND_TRUST_S = 5.0
#: printk's clock against wall time, parts per million of the uptime at the event (a generous crystal error)
DRIFT_PPM = 50.0

WALL, BOOT, ZONED = "wall", "boot", "zoned"

_DMESG_T = re.compile(r"(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun) (?P<mon>[A-Z][a-z]{2}) {1,2}(?P<day>\d{1,2}) "
                      r"(?P<hms>\d\d:\d\d:\d\d) (?P<year>\d{4})")
_SECONDS = re.compile(r"\d{1,12}\.\d{1,9}")
_KMSG = re.compile(r"\d{1,3},\d{1,20},(?P<usec>\d{1,20}),[-+c]")  # pri,seq,usec,flags (kmsg ABI)
_ISO = re.compile(r"(?P<date>\d{4}-\d\d-\d\d)[T ](?P<hms>\d\d:\d\d:\d\d)(?:[.,](?P<frac>\d{1,9}))?"
                  r"(?P<zone>Z|[+-]\d\d:?\d\d)?")
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


@dataclass(frozen=True)
class KernelStamp:
    """A kernel line's stamp as printed, its kind, and its number: seconds since boot ('boot'), a Unix time
    ('zoned'), or a Unix time read as if the printed wall clock were UTC ('wall': right only in UTC)."""

    text: str
    kind: str
    value: float


@dataclass(frozen=True)
class KernelClock:
    """What a collection says of its kernel log's stamps: the zone dmesg -T printed in, when the machine booted,
    and a sentence for the report. The default knows neither (a loose file, a paste, an older bundle)."""

    wall_zone: str | None = None
    boot_epoch: float | None = None
    collected_at: float | None = None  #: when the log was copied: no job start after it is believed
    says: str = "the kernel log's clock is not recorded (a pasted or older log): its times are not compared"

    @classmethod
    def from_details(cls, details: dict[str, Any] | None) -> "KernelClock":
        """The clock a kernel_log collector record describes (forensics.collectors.host_kernel_log)."""
        details = details or {}
        clock = details.get("stamp_clock")
        boot = details.get("boot_epoch")
        suspended = details.get("suspended_s")
        if not isinstance(clock, str):
            return cls()
        if isinstance(suspended, (int, float)) and suspended > SUSPEND_TRUST_S:
            return cls(says=f"the machine was suspended {suspended:.0f} s since boot: its kernel stamps lag wall "
                            "time, so their times are not compared")
        boot_epoch = float(boot) if isinstance(boot, (int, float)) and boot > 0 else None
        taken = details.get("collected_at_epoch")
        return cls(wall_zone="UTC" if clock == "UTC" else None, boot_epoch=boot_epoch,
                   collected_at=float(taken) if isinstance(taken, (int, float)) else None,
                   says=f"kernel stamps read as {clock} ({details.get('source', 'kernel log')})")


class KernelEntry(NamedTuple):
    """One kernel line as a host's evidence holds it: where it was read, its message, its stamp as printed and
    the clock of its collection. The time is decoded when asked (`at`): a judge asks only of the few lines a
    finding is on, and a kernel log of many thousand lines is read at the speed it was read before."""

    file: str
    line: int
    text: str
    stamp: str | None = None
    clock: KernelClock = KernelClock()

    @property
    def when(self) -> KernelStamp | None:
        """The stamp decoded, None if it has none or it does not read."""
        return parse_stamp(self.stamp)

    @property
    def at(self) -> float | None:
        """The line's Unix time, None where stamp or clock do not give one (then it counts as any line did)."""
        return epoch_of(self.when, self.clock)

    @property
    def doubt(self) -> float:
        """Seconds by which `at` may be early: MARGIN_S, and for a printk clock its drift over the uptime at the
        event (journald's zoned stamps are wall time when written: no drift)."""
        when = self.when
        if when is None or when.kind == ZONED or self.clock.boot_epoch is None:
            return MARGIN_S
        since_boot = when.value if when.kind == BOOT else max(0.0, when.value - self.clock.boot_epoch)
        return MARGIN_S + DRIFT_PPM * 1e-6 * since_boot


def parse_stamp(text: str | None) -> KernelStamp | None:
    """The stamp a kernel reader split off (parsers.readers.host_kernel), decoded; None when unreadable."""
    if not text:
        return None
    text = text.strip()
    m = _DMESG_T.fullmatch(text)
    if m:
        if m.group("mon") not in _MONTHS:
            return None
        try:
            hour, minute, second = (int(p) for p in m.group("hms").split(":"))
            when = datetime(int(m.group("year")), _MONTHS.index(m.group("mon")) + 1, int(m.group("day")), hour,
                            minute, second, tzinfo=timezone.utc)
        except ValueError:
            return None
        return KernelStamp(text, WALL, when.timestamp())
    if _SECONDS.fullmatch(text):
        return KernelStamp(text, BOOT, float(text))
    m = _KMSG.match(text)
    if m:
        return KernelStamp(text, BOOT, int(m.group("usec")) / 1e6)
    zone_word = text.endswith((" UTC", " GMT"))  # journalctl -o verbose's head: '2026-12-06 21:04:35.944324 UTC'
    m = _ISO.fullmatch(text[:-4] if zone_word else text)
    if m is None or (zone_word and m.group("zone")):
        return None
    stamp = _iso(text, m)
    return KernelStamp(text, ZONED, stamp.value) if stamp is not None and zone_word else stamp


def _iso(text: str, m: re.Match) -> KernelStamp | None:
    zone = m.group("zone")
    frac = float("0." + m.group("frac")) if m.group("frac") else 0.0
    try:
        when = datetime.fromisoformat(f"{m.group('date')}T{m.group('hms')}")
    except ValueError:
        return None
    if zone is None:
        return KernelStamp(text, WALL, when.replace(tzinfo=timezone.utc).timestamp() + frac)
    offset = 0 if zone == "Z" else (1 if zone[0] == "+" else -1) * (int(zone[1:3]) * 3600 + int(zone[-2:]) * 60)
    return KernelStamp(text, ZONED, when.replace(tzinfo=timezone.utc).timestamp() - offset + frac)


def epoch_of(stamp: KernelStamp | None, clock: KernelClock) -> float | None:
    """The stamp's Unix time under `clock`, or None where the clock does not say enough."""
    if stamp is None:
        return None
    if stamp.kind == ZONED:
        return stamp.value
    if stamp.kind == WALL:
        return stamp.value if clock.wall_zone == "UTC" else None
    return clock.boot_epoch + stamp.value if clock.boot_epoch is not None else None


def utc_clock_time(epoch: float, beside: float | None = None) -> str:
    """'15:55:01 UTC'; 'Dec 05 15:55:01 UTC' when `beside` (the time it is said next to) is another day."""
    when = datetime.fromtimestamp(epoch, timezone.utc)
    other_day = beside is not None and datetime.fromtimestamp(beside, timezone.utc).date() != when.date()
    return when.strftime("%b %d %H:%M:%S UTC" if other_day else "%H:%M:%S UTC")

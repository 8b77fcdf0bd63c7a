"""Log timestamps in their several forms, made comparable: which error came first.

Why: the readers keep each line's stamp as it was printed, and one job's output mixes forms:
c10d's glog-style `318 08:49:08.965796097` (month without its leading zero, then the day),
NCCL's and loggers' ISO `2026-12-01 16:52:12`, torchelastic's `2026-12-01_16:47:00`, vLLM's
`02-22 08:52:08`. Compared as strings, `1201 ...` sorts before `318 ...` and every glog stamp
before every ISO one. A key of (month, day, seconds into the day) orders them all; glog has no
year, so none is used (a job that runs over New Year's night is ordered wrongly there).
"""

from __future__ import annotations

import re

_GLOG = re.compile(r"^(?P<m>\d{1,2})(?P<d>\d\d) (?P<t>\d\d:\d\d:\d\d(?:\.\d{1,9})?)$")
_ISO = re.compile(r"^\d{4}-(?P<m>\d\d)-(?P<d>\d\d)[ T_](?P<t>\d\d:\d\d(?::\d\d(?:[.,]\d{1,9})?)?)")
_MONTH_DAY = re.compile(r"^(?P<m>\d\d)-(?P<d>\d\d) (?P<t>\d\d:\d\d:\d\d(?:[.,]\d{1,9})?)")


def _parts(stamp: str) -> tuple[int, int, str] | None:
    m = _GLOG.match(stamp) or _ISO.match(stamp) or _MONTH_DAY.match(stamp)
    if m is None:
        return None
    month, day = int(m.group("m")), int(m.group("d"))
    if not (1 <= month <= 12 and 1 <= day <= 31):
        return None
    return month, day, m.group("t").replace(",", ".")


def key(stamp: str | None) -> tuple[int, int, float] | None:
    """(month, day, seconds into the day) of a stamp in any form above; None for any other text."""
    parts = _parts(stamp or "")
    if parts is None:
        return None
    month, day, clock = parts
    fields = clock.split(":")
    seconds = int(fields[0]) * 3600 + int(fields[1]) * 60 + (float(fields[2]) if len(fields) > 2 else 0.0)
    return month, day, seconds


def close(a: tuple | None, b: tuple | None, within_s: float) -> bool:
    """Two keys at most `within_s` apart on one day; True where either is unknown (nothing says otherwise)."""
    return a is None or b is None or (a[:2] == b[:2] and abs(a[2] - b[2]) <= within_s)


def shown(stamp: str) -> str:
    """A stamp as a person reads it: `03-18 08:49:08.965` (to the millisecond); other text as it is."""
    parts = _parts(stamp)
    if parts is None:
        return stamp
    month, day, clock = parts
    head, _, frac = clock.partition(".")
    return f"{month:02d}-{day:02d} {head}" + (f".{frac[:3]}" if frac else "")

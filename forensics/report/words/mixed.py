"""Inputs from another job, in words (parsers/judges/mixed.py finds them): one line per file, said under the
VERDICT in every output, so evidence of two jobs is never merged in silence."""

from __future__ import annotations

import time
from typing import Any

_WHAT = {"world-size": "world size {f}, the bundle's {b}", "pid": "pid {f}, no process of the bundle",
         "host": "host {f}, not a host of the bundle", "rank": "rank {f}, outside the bundle's {b} ranks",
         "job-id": "job id {f}, the bundle's {b}"}


def _value(v: Any) -> str:
    return ",".join(map(str, v)) if isinstance(v, list) else str(v)


def _clock(t: Any) -> str:
    """'11-24 09:12:01' (UTC, month-day as most logs print it), or the value as it is where it is no time."""
    try:
        return time.strftime("%m-%d %H:%M:%S", time.gmtime(float(t)))
    except (TypeError, ValueError, OverflowError, OSError):
        return str(t)


def _span(pair: Any) -> str:
    """'11-24 09:12:01 to 09:13:40' or one time where both ends are the same second."""
    if not isinstance(pair, list) or len(pair) != 2:
        return _clock(pair)
    first, last = _clock(pair[0]), _clock(pair[1])
    return first if first == last else f"{first} to {last[6:] if first[:5] == last[:5] else last}"


def _reason(r: dict[str, Any]) -> str:
    """One reason a file is another job's, in words."""
    if r["what"] == "time":
        f, b = r["file_says"], r["bundle_says"]
        try:
            days = min(abs(float(f[1]) - float(b[0])), abs(float(f[0]) - float(b[1]))) / 86400
        except (TypeError, ValueError, IndexError):
            return f"its lines dated {_span(f)}, the bundle's {_span(b)}"
        side = "before" if _before(r) else "after"
        return (f"its lines dated {_span(f)}, {days:.0f} day{'s' if round(days) != 1 else ''} {side} the bundle's "
                f"{_span(b)}")
    return _WHAT.get(r["what"], r["what"] + " {f}").format(f=_value(r["file_says"]), b=_value(r["bundle_says"]))


def said(item: dict[str, Any]) -> str:
    """'nccl.node05.483.log is from another job (world size 8, the bundle's 4; ...): ...; analyze it on its own'.
    Where only its dates say so and they lie before the bundle, the one other reading is said too: a job that
    hangs for days with its watchdog off prints nothing after its own last lines."""
    reasons = item.get("reasons", [])
    why = "; ".join(_reason(r) for r in reasons)
    whats = {r.get("what") for r in reasons}
    quiet = ""
    if whats <= {"time", "host"} and any(r.get("what") == "time" and _before(r) for r in reasons):
        quiet = ", or this job has printed nothing since"
    return (f"{item['file']} is from another job{quiet} ({why}): this verdict mixes its lines with the bundle's; "
            "analyze it on its own")


def _before(r: dict[str, Any]) -> bool:
    """Whether a time reason's file lies before the bundle's time."""
    try:
        return float(r["file_says"][1]) < float(r["bundle_says"][0])
    except (TypeError, ValueError, IndexError, KeyError):
        return False


def lines(mixed: list[dict[str, Any]]) -> list[str]:
    return [said(m) for m in mixed]

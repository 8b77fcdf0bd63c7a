"""Decodes infiniband.json (sysfs copy) into per-port facts.

Sysfs prints states as '4: ACTIVE' and 'phys_state' as '5: LinkUp'; rates as
'400 Gb/sec (4X NDR)'. Counters are plain integers. Facts per port subject
'ib <device>/<port>': ib.state, ib.phys_state, ib.rate_gbps, ib.link_layer,
ib.counter.<name> and ib.hw_counter.<name>.
"""

from __future__ import annotations

import json
import re
from typing import Any
from parsers.input import bounded_json
from parsers.input.errors import FileFormatError
from parsers.input.ints import as_int

Facts = dict[str, Any]


class IbDataError(FileFormatError):
    """infiniband.json is not what the collector writes."""


def _state(text: str | None) -> str | None:
    """'4: ACTIVE' -> 'ACTIVE'."""
    if not text:
        return None
    return text.split(":", 1)[-1].strip() or None


def _int(text: Any) -> int | None:
    """A sysfs counter (its digits as text, or a number), else None."""
    return as_int(text, text=True)


def port_facts(port: dict[str, Any]) -> Facts:
    facts: Facts = {}
    for key in ("state", "phys_state"):
        value = _state(port.get(key))
        if value:
            facts[f"ib.{key}"] = value
    if port.get("link_layer"):
        facts["ib.link_layer"] = port["link_layer"]
    m = re.match(r"([\d.]+)\s*Gb/sec", port.get("rate") or "")
    if m:
        facts["ib.rate_gbps"] = float(m.group(1))
    for folder, prefix in (("counters", "ib.counter."), ("hw_counters", "ib.hw_counter.")):
        for name, value in (port.get(folder) or {}).items():
            number = _int(value)
            if number is not None:
                facts[prefix + name] = number
    return facts


def parse_ib_json(text: str) -> dict[str, Facts]:
    """Facts per 'ib <device>/<port>' subject."""
    try:
        data = bounded_json.loads(text)
    except json.JSONDecodeError as err:
        raise IbDataError(f"infiniband.json is not JSON: {err}") from err
    devices = data.get("devices") if isinstance(data, dict) else None
    if not isinstance(devices, dict):
        raise IbDataError("infiniband.json: expected an object with 'devices'")
    out: dict[str, Facts] = {}
    for dev, info in devices.items():
        for port, values in ((info or {}).get("ports") or {}).items():
            if isinstance(values, dict):
                out[f"ib {dev}/{port}"] = port_facts(values)
    return out

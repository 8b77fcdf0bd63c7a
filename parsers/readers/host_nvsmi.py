"""Decodes `nvidia-smi -q` text and `nvidia-smi -q -x` XML into per-GPU facts.

Both forms carry the same counters; which one a bundle has depends on the driver
and on what worked at collection time. The fact names are shared with NVML data
(host_nvml.py) and are what the knowledge base's value entries test:
ecc.<volatile|aggregate>.<memory>.<correctable|uncorrectable>, retired_pages.*,
remapped_rows.*, throttle.*, temperature.*, pcie.gen.*, pcie.width.*.
Temperature thresholds printed relative to T.Limit (newer drivers) get their own
names (temperature.tlimit_*), never the absolute temperature.gpu_slowdown.
Unsupported fields ('N/A', 'Not Supported') are left out, never guessed.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from typing import Any
from parsers.input.errors import FileFormatError

Facts = dict[str, Any]

_UNKNOWN = {"n/a", "[n/a]", "not supported", "[not supported]", "unknown",
            "requested functionality has been deprecated", ""}
_NUMBER = re.compile(r"^-?\d+(?:\.\d+)?")
_GPU_HEADER = re.compile(r"^GPU ([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f])\s*$")
#: the key ends at its last non-blank before ':' (greedy, then one step back): a lazy key before `\s*` was
#: quadratic on a line of blanks and words without a colon
_LINE = re.compile(r"^(?P<indent> *+)(?P<key>[^:]*[^:\s])\s*+(?::\s*(?P<value>.*))?$")


class NvsmiError(FileFormatError):
    """The text is not nvidia-smi output at all."""


def _value(text: str) -> Any:
    """'16x' -> 16, '34 C' -> 34, 'Yes' -> True, 'Active' -> True, 'N/A' -> None."""
    text = text.strip()
    low = text.lower()
    if low in _UNKNOWN:
        return None
    if low in ("yes", "active", "enabled"):
        return True if low != "enabled" else "Enabled"
    if low in ("no", "not active", "disabled"):
        return False if low != "disabled" else "Disabled"
    m = _NUMBER.match(text)
    if m:
        num = m.group(0)
        return float(num) if "." in num else int(num)
    return text


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", text.lower()).strip("_")


def _ecc_fact(scope: str, path: list[str]) -> str | None:
    """Fact name for one ECC counter path under 'ECC Errors/<scope>'."""
    names = [p.lower() for p in path]
    leaf = names[-1]
    if "single bit" in names or "single_bit" in names:
        return f"ecc.{scope}.{_slug(leaf)}.correctable"
    if "double bit" in names or "double_bit" in names:
        return f"ecc.{scope}.{_slug(leaf)}.uncorrectable"
    words = _slug(leaf).replace("sec_ded", "secded").split("_")  # text 'SEC-DED', XML 'secded'
    for kind in ("uncorrectable", "correctable"):
        if kind in words:
            memory = "_".join(w for w in words if w != kind) or "total"
            return f"ecc.{scope}.{memory}.{kind}"
    return None


#: Text labels whose slug differs from the XML tag and NVML name of the same reason
#: (seen on driver 580: text 'Idle', 'Display Clock Setting'; XML/NVML '..._display_clocks_setting').
_THROTTLE_ALIASES = {"idle": "gpu_idle", "display_clock_setting": "display_clocks_setting"}


def _throttle_fact(leaf: str) -> str:
    name = _slug(leaf)
    name = re.sub(r"^clocks_(?:throttle|event)_reasons?_", "", name)
    return "throttle." + _THROTTLE_ALIASES.get(name, name)


_TEXT_MAP = {
    ("utilization", "gpu"): "utilization.gpu",
    ("ecc mode", "current"): "ecc.mode.current",
    ("retired pages", "single bit ecc"): "retired_pages.single_bit",
    ("retired pages", "double bit ecc"): "retired_pages.double_bit",
    ("retired pages", "pending page blacklist"): "retired_pages.pending",
    ("retired pages", "pending page retirement"): "retired_pages.pending",
    ("remapped rows", "correctable error"): "remapped_rows.correctable",
    ("remapped rows", "uncorrectable error"): "remapped_rows.uncorrectable",
    ("remapped rows", "pending"): "remapped_rows.pending",
    ("remapped rows", "remapping failure occurred"): "remapped_rows.failure",
    ("pcie generation", "max"): "pcie.gen.max",
    ("pcie generation", "current"): "pcie.gen.current",
    ("link width", "max"): "pcie.width.max",
    ("link width", "current"): "pcie.width.current",
    ("temperature", "gpu current temp"): "temperature.gpu",
    ("temperature", "gpu slowdown temp"): "temperature.gpu_slowdown",
    ("temperature", "gpu shutdown temp"): "temperature.gpu_shutdown",
    ("temperature", "memory current temp"): "temperature.memory",
    # Since driver ~550 (Hopper and later) the thresholds are printed relative to T.Limit, not as
    # absolute degrees: 'GPU T.Limit Temp' is the live margin, the others are offsets from T.Limit.
    ("temperature", "gpu t.limit temp"): "temperature.tlimit_margin",
    ("temperature", "gpu slowdown t.limit temp"): "temperature.tlimit_slowdown",
    ("temperature", "gpu shutdown t.limit temp"): "temperature.tlimit_shutdown",
}
#: sections of `nvidia-smi -q` nest 3-4 deep; a line deeper than this is read as no fact (a file whose every line
#: indents further made a path of thousands of names a line: 2.6 MB took 3.7 s)
MAX_DEPTH = 16
#: the longest field or section name of `nvidia-smi -q` is about 40 characters
MAX_KEY_CHARS = 128
_IDENTITY = {"product name": "name", "gpu uuid": "uuid", "serial number": "serial"}


def _text_fact(path: list[str]) -> str | None:
    names = [p.lower() for p in path]
    if len(names) == 1 and names[0] in _IDENTITY:
        return _IDENTITY[names[0]]
    if names[0] == "ecc errors" and len(names) >= 3 and names[1] in ("volatile", "aggregate"):
        return _ecc_fact(names[1], path[2:])
    if names[0] in ("clocks event reasons", "clocks throttle reasons") and len(names) >= 2:
        return _throttle_fact(path[-1])
    if len(names) >= 2:
        return _TEXT_MAP.get((names[-2], names[-1]))
    return None


def parse_text(text: str) -> dict[str, Facts]:
    """Facts per GPU bus id from `nvidia-smi -q`; lines it does not know are skipped."""
    gpus: dict[str, Facts] = {}
    current: Facts | None = None
    stack: list[tuple[int, str]] = []  # (indent, section name) above the current line
    seen_header = False
    for raw in text.splitlines():
        if "NVSMI LOG" in raw:
            seen_header = True
        header = _GPU_HEADER.match(raw.strip()) if not raw.startswith(" ") else None
        if header:
            current = gpus.setdefault(header.group(1).upper(), {})
            stack = []
            continue
        if current is None or not raw.strip() or raw.strip().startswith("["):
            continue
        m = _LINE.match(raw.rstrip())
        if not m:
            continue
        indent = len(m.group("indent"))
        key = m.group("key").strip()[:MAX_KEY_CHARS]  # no field name is longer; a 280 KB one was lowered every line
        while stack and stack[-1][0] >= indent:
            stack.pop()
        if m.group("value") is None:
            stack.append((indent, key))
            continue
        if len(stack) > MAX_DEPTH:  # no fact sits this deep; building the path would cost the depth a line
            continue
        path = [name for _, name in stack]
        name = _text_fact(path + [key])
        value = m.group("value").strip() if name in _IDENTITY.values() else _value(m.group("value"))
        if name and value is not None:
            current[name] = value
    if not gpus and not seen_header:
        raise NvsmiError("not nvidia-smi -q output (no 'NVSMI LOG' header and no 'GPU <bus id>' section)")
    return gpus


_XML_MAP = {
    ("utilization", "gpu_util"): "utilization.gpu",
    ("ecc_mode", "current_ecc"): "ecc.mode.current",
    ("multiple_single_bit_retirement", "retired_count"): "retired_pages.single_bit",
    ("double_bit_retirement", "retired_count"): "retired_pages.double_bit",
    ("retired_pages", "pending_blacklist"): "retired_pages.pending",
    ("retired_pages", "pending_retirement"): "retired_pages.pending",
    ("remapped_rows", "remapped_row_corr"): "remapped_rows.correctable",
    ("remapped_rows", "remapped_row_unc"): "remapped_rows.uncorrectable",
    ("remapped_rows", "remapped_row_pending"): "remapped_rows.pending",
    ("remapped_rows", "remapped_row_failure"): "remapped_rows.failure",
    ("pcie_gen", "max_link_gen"): "pcie.gen.max",
    ("pcie_gen", "current_link_gen"): "pcie.gen.current",
    ("link_widths", "max_link_width"): "pcie.width.max",
    ("link_widths", "current_link_width"): "pcie.width.current",
    ("temperature", "gpu_temp"): "temperature.gpu",
    ("temperature", "gpu_temp_slow_threshold"): "temperature.gpu_slowdown",
    ("temperature", "gpu_temp_max_threshold"): "temperature.gpu_shutdown",
    ("temperature", "memory_temp"): "temperature.memory",
    ("temperature", "gpu_temp_tlimit"): "temperature.tlimit_margin",
    ("temperature", "gpu_temp_slow_tlimit_threshold"): "temperature.tlimit_slowdown",
    ("temperature", "gpu_temp_max_tlimit_threshold"): "temperature.tlimit_shutdown",
    ("gpu", "product_name"): "name",
    ("gpu", "uuid"): "uuid",
    ("gpu", "serial"): "serial",
}


def _xml_fact(path: list[str]) -> str | None:
    if len(path) >= 3 and path[0] == "ecc_errors" and path[1] in ("volatile", "aggregate"):
        return _ecc_fact(path[1], path[2:])
    if len(path) >= 2 and path[0] in ("clocks_event_reasons", "clocks_throttle_reasons"):
        return _throttle_fact(path[-1])
    return _XML_MAP.get(tuple((["gpu"] + path)[-2:]))


def parse_xml(text: str) -> dict[str, Facts]:
    """Facts per GPU bus id from `nvidia-smi -q -x` (the stdlib parser refuses external entities)."""
    try:
        root = ET.fromstring(text)
    except ET.ParseError as err:
        raise NvsmiError(f"not valid nvidia-smi XML: {err}") from err
    if root.tag != "nvidia_smi_log":
        raise NvsmiError(f"not nvidia-smi XML (root element <{root.tag}>)")
    gpus: dict[str, Facts] = {}
    for index, gpu in enumerate(root.findall("gpu")):
        bus = (gpu.get("id") or f"gpu{index}").upper()
        facts: Facts = {}
        _walk(gpu, [], facts)
        gpus[bus] = facts
    return gpus


def _walk(node: ET.Element, path: list[str], facts: Facts) -> None:
    for child in node:
        sub = path + [child.tag]
        if len(child):
            _walk(child, sub, facts)
            continue
        name = _xml_fact(sub)
        value = (child.text or "").strip() if name in _IDENTITY.values() else _value(child.text or "")
        if name and value is not None:
            facts[name] = value


def parse_any(text: str) -> dict[str, Facts]:
    """XML or text, whichever `text` is."""
    return parse_xml(text) if text.lstrip().startswith("<") else parse_text(text)

"""Inputs from another job, in words (parsers/judges/mixed.py finds them): one line per file, said under the
VERDICT in every output, so evidence of two jobs is never merged in silence."""

from __future__ import annotations

from typing import Any

_WHAT = {"world-size": "world size {f}, the bundle's {b}", "pid": "pid {f}, no process of the bundle",
         "host": "host {f}, not a host of the bundle", "rank": "rank {f}, outside the bundle's {b} ranks",
         "job-id": "job id {f}, the bundle's {b}"}


def _value(v: Any) -> str:
    return ",".join(map(str, v)) if isinstance(v, list) else str(v)


def said(item: dict[str, Any]) -> str:
    """'nccl.node05.483.log is from another job (world size 8, the bundle's 4; ...): ...; analyze it on its own'."""
    why = "; ".join(_WHAT.get(r["what"], r["what"] + " {f}").format(f=_value(r["file_says"]), b=_value(r["bundle_says"]))
                    for r in item.get("reasons", []))
    return (f"{item['file']} is from another job ({why}): this verdict mixes its lines with the bundle's; analyze "
            "it on its own")


def lines(mixed: list[dict[str, Any]]) -> list[str]:
    return [said(m) for m in mixed]

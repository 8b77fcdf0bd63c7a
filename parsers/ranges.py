"""Compact rank lists: [0,1,2,3,5,7,8] -> '0-3,5,7-8', as cluster tools print them."""

from __future__ import annotations

from typing import Iterable


def fold(ranks: Iterable[int]) -> str:
    values = sorted(set(ranks))
    if not values:
        return "none"
    parts, start, prev = [], values[0], values[0]
    for value in values[1:] + [None]:  # type: ignore[list-item]
        if value is not None and value == prev + 1:
            prev = value
            continue
        parts.append(str(start) if start == prev else f"{start}-{prev}")
        if value is not None:
            start = prev = value
    return ",".join(parts)

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


#: most ranks one folded list may expand to: the text is hostile ('0-999999999' must not allocate a billion ints)
MAX_UNFOLD = 65536


def unfold(text: str) -> list[int] | None:
    """'8-13,15' -> [8, 9, 10, 11, 12, 13, 15], the inverse of fold; None when `text` is no such list or would
    expand past MAX_UNFOLD values."""
    out: set[int] = set()
    for part in text.strip().split(",", MAX_UNFOLD)[:MAX_UNFOLD]:
        lo, sep, hi = part.strip().partition("-")
        if not lo.isdigit() or len(lo) > 9 or (sep and (not hi.isdigit() or len(hi) > 9)):
            return None
        a, b = int(lo), int(hi) if sep else int(lo)
        if b < a or len(out) + (b - a + 1) > MAX_UNFOLD:
            return None
        out.update(range(a, b + 1))
    return sorted(out)


def missing(world: int, present: Iterable[int], most: int) -> list[int] | None:
    """The ranks below `world` that `present` lacks, or None when more than `most` are lacking.

    Why counted before listed: `world` is read from data (one rank's WORLD_SIZE=1048576, one NCCL
    'nranks' line), so it only sets the range a rank may be missing from. The count costs what
    `present` costs; the list is made only when at most `most` are lacking, so that
    `world <= len(present) + most` and listing them costs what the evidence costs too."""
    have = {r for r in present if 0 <= r < world}
    if world - len(have) > most:
        return None
    return [r for r in range(world) if r not in have]


def listable(world: int | None, seen: int) -> range:
    """The ranks 0..world-1 where listing them costs what the evidence costs (`world` at most 4 * `seen` + 16),
    else none: a declared size sets the range a rank may be missing from, never a loop per declared rank."""
    return range(world) if world and 0 < world <= 4 * seen + 16 else range(0)


def fold_missing(world: int, present: Iterable[int]) -> str:
    """The ranks below `world` that `present` lacks, folded ('5,8-1048575'), from `present` alone: the gaps
    between its sorted ranks, whatever `world` says."""
    parts, nxt = [], 0
    for r in sorted({r for r in present if 0 <= r < world}):
        if r > nxt:
            parts.append(str(nxt) if r - 1 == nxt else f"{nxt}-{r - 1}")
        nxt = r + 1
    if nxt < world:
        parts.append(str(nxt) if world - 1 == nxt else f"{nxt}-{world - 1}")
    return ",".join(parts)

"""Helpers of the knowledge-base tests: fixture paths and the '# expect:' block format of log fixtures."""

from __future__ import annotations

from pathlib import Path

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "host"


def blocks(path: Path) -> list[tuple[str, set[str], list[tuple[int, str]]]]:
    """(source, expected ids, numbered lines) per '# source:' block of a fixture file."""
    out: list[tuple[str, set[str], list[tuple[int, str]]]] = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if line.startswith("# source:"):
            out.append((line[9:].strip(), set(), []))
        elif line.startswith("# expect:"):
            out[-1][1].update(line[9:].split())
        elif line.startswith("#") or not out:
            continue
        else:
            out[-1][2].append((number, line))
    return out

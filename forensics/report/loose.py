"""A PostMortem from a folder of loose artifacts (logs, dumps, RAS answers; no manifest).

The lead's pipeline (parsers.analyze.analyze_directory) does the reading and the
judging; this only wraps its verdict so that `forensics report` and notebooks can
draw it. Registered with forensics.postmortem.register_loose_loader.
"""

from __future__ import annotations

from pathlib import Path

from forensics.errors import ForensicsError
from forensics.postmortem.session import PostMortem
from parsers.analyze import analyze_directory


def loose_postmortem(path: Path) -> PostMortem:
    """Analyse a folder of loose artifacts; ForensicsError when it holds nothing readable."""
    verdict = analyze_directory(path)
    if not verdict.sections.get("logs", {}).get("artifacts") and not verdict.suspects:
        raise ForensicsError(f"{path}: not a bundle, and no logs or dumps in it")
    return PostMortem(verdict, source=str(path), graph=verdict.graph)

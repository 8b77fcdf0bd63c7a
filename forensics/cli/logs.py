"""-v/--verbose: one loguru sink on stderr, so stdout stays the command's output.

Without -v only warnings are logged; -v adds what the command does (which bundle,
which hosts, how long), -vv debug detail. Colour only when stderr is a terminal.
"""

from __future__ import annotations

import sys

from loguru import logger

LEVELS = {0: "WARNING", 1: "INFO"}


def setup_logging(verbose: int) -> None:
    """Replace loguru's default sink with one at the level `verbose` asks for."""
    logger.remove()
    level = LEVELS.get(verbose, "DEBUG")
    fmt = "<dim>{time:HH:mm:ss.SSS}</dim> <level>{level: <7}</level> {message}"
    logger.add(sys.stderr, level=level, format=fmt, colorize=is_terminal(sys.stderr), backtrace=False, diagnose=False)


def is_terminal(stream: object) -> bool:
    """True when `stream` is a terminal (colour and live progress lines only then)."""
    try:
        return bool(stream.isatty())  # type: ignore[attr-defined]
    except (AttributeError, ValueError):
        return False


def log_reads(evidence) -> None:
    """-v: which reader took each file, and why each file left out was left out (one line each)."""
    for art in evidence.artifacts:
        note = f" ({art.error})" if art.error else ""
        logger.info("read {} as {}{}", art.rel or art.path, art.kind, note)
    for rel, why in evidence.skipped:
        logger.info("skipped {}: {}", rel, why)

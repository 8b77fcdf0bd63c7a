"""The state letter of a process from /proc/PID/stat, for tests that watch real ranks stop, die or linger.

One helper for the conftest's `proc_state` fixture and for module-level helpers that cannot take a fixture.
"""

from __future__ import annotations

from pathlib import Path


def state_letter(pid: int) -> str | None:
    """R, S, T, Z, ... of a pid, or None when it is gone. The letter follows the last ')' (a comm may hold one)."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text[text.rfind(")") + 2]

"""Reads a launcher record: per rank, its pid and how and when it exited.

Written by `forensics demo` (and by any launcher that wants to hand us the same
facts). Exit order matters: in a collapsing job the first to die is usually the
culprit, while the launcher's own 'root cause' names the first it noticed.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path


@dataclass
class RankExit:
    rank: int
    pid: int
    host: str | None
    returncode: int | None  #: negative: killed by that signal; None: still running
    exited_at: float | None

    @property
    def how(self) -> str:
        import signal as _signal

        if self.returncode is None:
            return "still running"
        if self.returncode < 0:
            try:
                return f"killed by {_signal.Signals(-self.returncode).name}"
            except ValueError:
                return f"killed by signal {-self.returncode}"
        return f"exited with code {self.returncode}"


def read_launcher_json(path: Path) -> list[RankExit]:
    return parse_launcher_data(json.loads(Path(path).read_text(errors="replace")))


def parse_launcher_data(data: object) -> list[RankExit]:
    """Exits from a decoded launcher record; ValueError when it is not one."""
    if not isinstance(data, dict) or not isinstance(data.get("ranks"), list):
        raise ValueError("not a launcher record")
    return [
        RankExit(
            rank=int(r["rank"]),
            pid=int(r["pid"]),
            host=r.get("host"),
            returncode=r.get("returncode"),
            exited_at=r.get("exited_at"),
        )
        for r in data["ranks"]
    ]

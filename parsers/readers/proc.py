"""Reads the process_state collector's proc.json."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def read_proc_json(path: Path) -> dict[str, Any]:
    data = json.loads(Path(path).read_text(errors="replace"))
    if not isinstance(data, dict) or "state" not in data:
        raise ValueError(f"{path}: not a process_state file")
    return data

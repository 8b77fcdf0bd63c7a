"""The resumable state file of a bisection: plans, job outcomes, settings, as JSON.

Written atomically (temp file, fsync, rename) after every job, so a bisection killed
at any moment resumes from its last finished job and replans nothing it had planned.
"""

from __future__ import annotations

import json
import os
import tempfile
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

FORMAT = "hang-forensics-bisect-state"
VERSION = 1


class StateError(ValueError):
    """The state file is not ours, not readable, or from a newer version."""


def now() -> str:
    """UTC timestamp for the state file."""
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def new_state(config: dict[str, Any]) -> dict[str, Any]:
    """A fresh state with its settings and no rounds."""
    return {"format": FORMAT, "version": VERSION, "created": now(), "updated": now(),
            "config": config, "rounds": [], "jobs_started": 0}


def save(state: dict[str, Any], path: str | os.PathLike[str]) -> None:
    """Replace `path` with `state` atomically; a crash leaves the old or the new file, never half."""
    target = Path(path)
    state["updated"] = now()
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=target.name + ".", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "w") as fh:
            json.dump(state, fh, indent=1)
            fh.write("\n")
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def load(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read and check a state file; raises StateError with the reason."""
    try:
        data = json.loads(Path(path).read_text())
    except OSError as err:
        raise StateError(f"cannot read state file {path}: {err.strerror or err}") from err
    except json.JSONDecodeError as err:
        raise StateError(f"state file {path} is not valid JSON: {err}") from err
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise StateError(f"{path} is not a bisect state file (format {FORMAT!r} expected)")
    if not isinstance(data.get("version"), int) or data["version"] > VERSION:
        raise StateError(f"{path}: state version {data.get('version')!r} is newer than this tool ({VERSION})")
    if not isinstance(data.get("config"), dict) or not isinstance(data.get("rounds"), list):
        raise StateError(f"{path}: state file lacks config or rounds")
    return data

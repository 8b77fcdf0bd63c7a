"""Arming from FORENSICS_* environment variables, without arming on import.

Why apart from forensics.trigger.auto: that module arms as it is imported (its whole purpose, for jobs whose
code cannot be edited); `forensics.trigger.autoarm` must answer --help first and arm after, so it imports this
module at the top and calls `arm_from_env()` itself (arm() is idempotent: a later `import
forensics.trigger.auto` returns the same Trigger). The variables are listed in forensics.trigger.auto.
"""


from __future__ import annotations

import os
import shlex

from forensics.trigger.watch import Trigger, arm
from parsers.input.errors import UsageError

TRUE = ("1", "true", "yes", "on")


def _float(name: str) -> float | None:
    value = os.environ.get(name)
    if value in (None, ""):
        return None
    try:
        return float(value)
    except ValueError as err:
        raise UsageError(f"{name}={value!r}: expected a number of seconds") from err


def arm_from_env(env: dict[str, str] | None = None) -> Trigger | None:
    """Arm when FORENSICS_ARM is true; the settings come from FORENSICS_* variables."""
    env = dict(os.environ if env is None else env)
    if env.get("FORENSICS_ARM", "").strip().lower() not in TRUE:
        return None
    gc_every = env.get("FORENSICS_GC_EVERY")
    return arm(
        stall_after=_float("FORENSICS_STALL_AFTER"),
        pg_timeout=_float("FORENSICS_PG_TIMEOUT"),
        slow_factor=_float("FORENSICS_SLOW_FACTOR") or 4.0,
        straggler_ms=50.0 if _float("FORENSICS_STRAGGLER_MS") is None else _float("FORENSICS_STRAGGLER_MS"),
        out=env.get("FORENSICS_OUT") or None,
        gc=int(gc_every) if gc_every else None,
        collect_args=shlex.split(env.get("FORENSICS_COLLECT_ARGS", "")),
        optimizer_steps=True,
    )


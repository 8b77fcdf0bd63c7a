"""Arming from the environment, for jobs whose code you cannot edit.

    FORENSICS_ARM=1 torchrun ... -m forensics.trigger.autoarm train.py --its-args
    FORENSICS_ARM=1 python -c 'import forensics.trigger.auto' ...  (or import it in a launcher hook)

Importing this module arms the process when FORENSICS_ARM=1 (nothing otherwise). Steps are
counted from optimizer.step() calls, collectives from the torch.distributed functions.
Settings (all optional):
  FORENSICS_STALL_AFTER   seconds without progress before collecting (default 60)
  FORENSICS_PG_TIMEOUT    the job's process group timeout, to keep the stall limit under it
  FORENSICS_SLOW_FACTOR   slow step = this many times the recent median (default 4)
  FORENSICS_STRAGGLER_MS  straggler = one rank enters each step's first collective this many ms late (default 50; 0 off)
  FORENSICS_OUT           folder for stacks, step times and bundles (shared storage is best)
  FORENSICS_GC_EVERY      N: automatic GC off, gc.collect() every N steps
  FORENSICS_COLLECT_ARGS  extra `forensics collect` arguments, shell-quoted
"""

from __future__ import annotations

import os
import shlex

from forensics.trigger.watch import Trigger, arm
from parsers.errors import UsageError

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


TRIGGER = arm_from_env()

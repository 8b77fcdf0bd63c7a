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

from forensics.trigger.from_env import arm_from_env

__all__ = ["TRIGGER", "arm_from_env"]

TRIGGER = arm_from_env()

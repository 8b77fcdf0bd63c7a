"""The in-process trigger: notice a stall or a slow step inside the job and collect it while it lives."""

from forensics.trigger.watch import Trigger, arm, disarm

__all__ = ["Trigger", "arm", "disarm"]

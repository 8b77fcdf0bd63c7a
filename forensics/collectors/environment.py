"""The rank's environment, with secrets redacted.

The environment tells how NCCL and PyTorch were configured (debug files, timeouts,
Flight Recorder), which later readers need; tokens and passwords must not leak
into a bundle that gets attached to tickets.
"""

from __future__ import annotations

import json

from forensics import safefs
from parsers.model.manifest import CollectorRecord, Status
from parsers.gather.registry import collector_file
from forensics.collectors.base import AlwaysEnabled, CollectOptions, RankTarget
from forensics.discover import procfs
from forensics.bundle.redact import REDACTED, redact_env  # noqa: F401 - REDACTED re-exported


def redact(env: dict[str, str]) -> dict[str, str]:
    """Copy of env with secrets hidden by the one rule set (forensics.bundle.redact)."""
    return redact_env(env)


class EnvironmentCollector(AlwaysEnabled):
    name = "environment"

    def collect(self, target: RankTarget, options: CollectOptions) -> CollectorRecord:
        env = target.environ
        if not env:
            try:
                env = procfs.read_environ(target.pid)
            except procfs.ProcessGone:
                return CollectorRecord(self.name, Status.GONE, error=f"pid {target.pid} no longer exists")
            except PermissionError as err:
                return CollectorRecord(self.name, Status.DENIED, error=f"cannot read environment: {err}")
        path, rel = target.out(collector_file(self.name, "environment"))
        text = json.dumps(redact(env), indent=1, sort_keys=True) + "\n"
        target.budget.settle(target.budget.reserve(len(text)), len(text))  # always written; counted for the tools after
        safefs.write_new(path, text)  # new, 0600, no link followed
        return CollectorRecord(self.name, Status.OK, files=[rel])

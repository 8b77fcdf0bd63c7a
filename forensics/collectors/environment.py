"""The rank's environment, with secrets redacted.

The environment tells how NCCL and PyTorch were configured (debug files, timeouts,
Flight Recorder), which later readers need; tokens and passwords must not leak
into a bundle that gets attached to tickets.
"""

from __future__ import annotations

import json
import re

from parsers.model.manifest import CollectorRecord, Status
from forensics.collectors.base import CollectOptions, RankTarget
from forensics.discover import procfs

SECRET_NAME = re.compile(r"(TOKEN|SECRET|PASSW|PASSWD|PWD$|API_?KEY|ACCESS_?KEY|PRIVATE|CREDENTIAL|AUTH|COOKIE|SESSION)", re.I)
SECRET_VALUE = re.compile(r"(://[^/\s:@]+:)[^@\s]+@")  # user:password@ inside URLs
REDACTED = "<redacted>"


def redact(env: dict[str, str]) -> dict[str, str]:
    """Copy of env with secret-looking values replaced; URLs keep host but lose passwords."""
    clean = {}
    for key, value in env.items():
        if SECRET_NAME.search(key) and key not in ("PWD", "OLDPWD"):
            clean[key] = REDACTED
        else:
            clean[key] = SECRET_VALUE.sub(rf"\1{REDACTED}@", value)
    return clean


class EnvironmentCollector:
    name = "environment"
    uses_ptrace = False

    def enabled(self, options: CollectOptions) -> bool:
        return True

    def collect(self, target: RankTarget, options: CollectOptions) -> CollectorRecord:
        env = target.environ
        if not env:
            try:
                env = procfs.read_environ(target.pid)
            except procfs.ProcessGone:
                return CollectorRecord(self.name, Status.GONE, error=f"pid {target.pid} no longer exists")
            except PermissionError as err:
                return CollectorRecord(self.name, Status.DENIED, error=f"cannot read environment: {err}")
        path, rel = target.out("environ.json")
        path.write_text(json.dumps(redact(env), indent=1, sort_keys=True) + "\n")
        return CollectorRecord(self.name, Status.OK, files=[rel])

"""The raw result of running one command on one host, whatever carried it (ssh, srun, a loop)."""

from __future__ import annotations

from dataclasses import dataclass, field

UNREACHABLE = "unreachable"  #: ssh could not connect or log in
TIMEOUT = "timeout"  #: connected (or not) but gave no complete answer in time
FAILED = "failed"  #: answered, but the collector failed or the answer was damaged
EMPTY = "no-ranks"  #: answered: no rank of the job runs there (itself evidence)
OK = "ok"


@dataclass
class HostRun:
    """stdout/stderr lines, exit code and wall time of the command on `host`."""

    host: str
    stdout: list[str] = field(default_factory=list)
    stderr: list[str] = field(default_factory=list)
    returncode: int | None = None
    seconds: float = 0.0
    timed_out: bool = False

    def stderr_tail(self, lines: int = 3) -> str:
        return " | ".join(line.strip() for line in self.stderr[-lines:] if line.strip())

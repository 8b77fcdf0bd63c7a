"""The raw result of running one command on one host, whatever carried it (ssh, srun, a loop)."""

from __future__ import annotations

from dataclasses import dataclass, field

UNREACHABLE = "unreachable"  #: ssh could not connect or log in
TIMEOUT = "timeout"  #: connected (or not) but gave no complete answer in time
FAILED = "failed"  #: answered, but the collector failed or the answer was damaged
EMPTY = "no-ranks"  #: answered: no rank of the job runs there (itself evidence)
OK = "ok"

#: characters of stdout kept from one host: a bundle archive is far smaller (collectors cap their files);
#: a host that sends more is refused rather than allowed to fill the orchestrator's memory
MAX_ANSWER_CHARS = 1 << 30


@dataclass
class HostRun:
    """stdout/stderr lines, exit code and wall time of the command on `host`."""

    host: str
    stdout: list[str] = field(default_factory=list)
    stderr: list[str] = field(default_factory=list)
    kept: int = 0  #: stdout characters kept
    returncode: int | None = None
    seconds: float = 0.0
    timed_out: bool = False
    dropped: int = 0  #: stdout characters not kept, past MAX_ANSWER_CHARS

    def keep(self, text: str) -> None:
        """Add one stdout line, unless the answer is already past its bound (then only count it)."""
        if self.dropped or self.kept + len(text) > MAX_ANSWER_CHARS:
            self.dropped += len(text)
            return
        self.kept += len(text)
        self.stdout.append(text)

    def stderr_tail(self, lines: int = 3) -> str:
        return " | ".join(line.strip() for line in self.stderr[-lines:] if line.strip())

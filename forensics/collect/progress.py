"""Progress lines on stderr for long collections; silent when asked to be. Every line goes through `escape`
(the text outputs' one escape): a line may quote a target's data (a path, an error)."""

from __future__ import annotations

import sys
import threading
import time

from forensics.escape import escape


class ProgressReporter:
    """Thread-safe 'done N of M' reporter. Writes to stderr so stdout stays machine-readable."""

    def __init__(self, total: int, what: str, quiet: bool = False) -> None:
        self.total = total
        self.what = what
        self.quiet = quiet
        self.done = 0
        self.start = time.monotonic()
        self._lock = threading.Lock()

    def step(self, line: str) -> None:
        with self._lock:
            self.done += 1
            if not self.quiet:
                elapsed = time.monotonic() - self.start
                print(escape(f"[{self.done}/{self.total} {self.what}, {elapsed:5.1f}s] {line}"), file=sys.stderr,
                      flush=True)

    def say(self, line: str) -> None:
        if not self.quiet:
            print(escape(line), file=sys.stderr, flush=True)

"""Measure, from outside, how long each target process is stopped while a tool reads it.

Why outside: a tool's own idea of its pause leaves out what it does not count (attach,
detach, waiting for a lock). A separate sampler process reads the state letter of each
target's main thread (/proc/PID/task/PID/stat, kept open, pread) in a loop with a short
sleep; 't' (tracing stop) or 'T' is a stopped sample. Stopped samples in a row make an
episode; per target the longest episode and the total are reported (milliseconds,
resolution = one sweep, printed). The main thread is the one every tool here stops for
longest (libdw keeps it stopped for the whole walk; gdb and pystack stop all threads).

    python benchmarks/pause_sampler.py PID...   # runs until stdin closes, then prints JSON
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time


def _state(fd: int) -> bytes:
    data = os.pread(fd, 512, 0)
    i = data.rfind(b")")
    return data[i + 2:i + 3] if i >= 0 else b"?"


def sample(pids: list[int], interval: float = 0.0002) -> dict:
    fds = {p: os.open(f"/proc/{p}/task/{p}/stat", os.O_RDONLY) for p in pids}
    episodes: dict[int, list[float]] = {p: [] for p in pids}
    since: dict[int, float | None] = {p: None for p in pids}
    sweeps, t0 = 0, time.monotonic()
    while True:
        now = time.monotonic()
        for p, fd in fds.items():
            try:
                stopped = _state(fd) in (b"t", b"T")
            except OSError:
                stopped = False
            if stopped and since[p] is None:
                since[p] = now
            elif not stopped and since[p] is not None:
                episodes[p].append(now - since[p])
                since[p] = None
        sweeps += 1
        if select.select([sys.stdin], [], [], interval)[0]:
            break
    end = time.monotonic()
    for p in pids:
        if since[p] is not None:
            episodes[p].append(end - since[p])
    sweep_ms = (end - t0) / max(1, sweeps) * 1e3
    return {"sweep_ms": round(sweep_ms, 3),
            "targets": {str(p): {"max_ms": round(max(e, default=0) * 1e3, 1), "total_ms": round(sum(e) * 1e3, 1),
                                 "episodes": len(e)} for p, e in episodes.items()}}


class PauseSampler:
    """`with PauseSampler(pids) as s: run the tool`; then s.result (see module doc)."""

    def __init__(self, pids: list[int]) -> None:
        self.pids = pids
        self.result: dict = {}

    def __enter__(self) -> "PauseSampler":
        self.proc = subprocess.Popen([sys.executable, "-I", __file__, *map(str, self.pids)], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True)
        time.sleep(0.2)  # let it start sampling before the tool does
        return self

    def __exit__(self, *exc) -> None:
        out, _ = self.proc.communicate("", timeout=30)
        self.result = json.loads(out)


if __name__ == "__main__":
    print(json.dumps(sample([int(a) for a in sys.argv[1:]])))

"""N Python stack samples of a rank over a few seconds (`forensics collect --samples N`).

Why: a job that runs slowly is not hung; one dump shows one instant of a moving rank.
N dumps spread over seconds show where its main thread spends its time between
collectives (the straggler's slow data step, its share of time waiting in all_reduce).

Safe by construction: every dump is `py-spy dump --nonblocking` (it reads the target's
memory without pausing it, ~15 ms), so a target is never stopped, not even for a
moment; the target's run state is still compared before and after (StateGuard).
Bounded: N is capped at MAX_SAMPLES, the whole run at MAX_SECONDS (and at the
collector time limit), each dump at DUMP_TIMEOUT_S; sampling ends early when the
target is gone or collect is interrupted. Intervals are jittered by +-JITTER so the
samples do not lock onto a periodic training loop and over-count one phase of it.
The collector only records what py-spy said (locals and process info dropped); the
reader (parsers/readers/pyspy_samples.py) turns it into shares.
"""

from __future__ import annotations

import json
import random
import time

from forensics import safefs
from forensics.collect import tool as tools
from forensics.collect.budget import cap_threads, fit_doc, tool_read_cap
from forensics.collect.guard import StateGuard
from forensics.collect.tool import run_tool
from forensics.collectors.base import CollectOptions, RankTarget, ptrace_denied
from forensics.collectors.pyspy import DENIED_MARKS
from forensics.discover import procfs
from parsers.model.manifest import CollectorRecord, Status
from parsers.readers.pyspy_samples import FORMAT, VERSION
from parsers.gather.registry import collector_file

#: the most samples one collection takes per rank
MAX_SAMPLES = 200
#: the longest a sampling run lasts per rank, seconds
MAX_SECONDS = 30.0
#: one dump's time limit (a nonblocking dump takes ~15 ms)
DUMP_TIMEOUT_S = 5.0
#: interval jitter, as a fraction of the interval
JITTER = 0.3
#: errors kept in the file
MAX_ERRORS = 20
FILE_NAME = collector_file("py-spy-samples", "pyspy-samples")


class PySpySamplesCollector:
    name = "py-spy-samples"
    uses_ptrace = True  # py-spy reads the target's memory (ptrace access), so it runs in the rank's tool sequence

    def enabled(self, options: CollectOptions) -> bool:
        return options.samples > 0

    def collect(self, target: RankTarget, options: CollectOptions) -> CollectorRecord:
        if not procfs.pid_exists(target.pid):
            return CollectorRecord(self.name, Status.GONE, error=f"pid {target.pid} no longer exists")
        count, interval, budget = plan(options)
        cap = tool_read_cap(target.budget)
        if cap <= 0:  # nothing could be written: py-spy is not run for it
            error = f"pid {target.pid} py-spy samples: not taken ({target.budget.which()} reached)"
            target.budget.note(error)
            return CollectorRecord(self.name, Status.SKIPPED, error=error)
        with StateGuard(target.pid) as guard:
            doc, last = sample(target.pid, count, interval, budget, cap)
        details: dict = {"requested": count, "taken": len(doc["samples"]), "failed": len(doc["failures"]),
                         "interval_s": interval, "budget_s": budget,
                         "state_before": guard.outcome.before, "state_after": guard.outcome.after}
        if guard.outcome.action:
            details["guard"] = guard.outcome.action
        if last is not None and last.missing:
            return CollectorRecord(self.name, Status.UNAVAILABLE, error="py-spy is not installed (pip install py-spy)",
                                   details=details)
        # the first samples that fit
        text, cut = fit_doc(target.budget, doc, "samples", f"pid {target.pid} {FILE_NAME}")
        if cut:
            details["cut"] = cut
        path, rel = target.out(FILE_NAME)
        safefs.write_new(path, text)
        if doc["samples"]:
            return CollectorRecord(self.name, Status.OK, files=[rel], details=details)
        error = doc["failures"][0]["error"] if doc["failures"] else "no sample taken"
        status = Status.GONE if procfs.exited(target.pid) else Status.FAILED
        if status != Status.GONE and any(mark in error for mark in DENIED_MARKS):  # py-spy's own words, as
            status, error = Status.DENIED, ptrace_denied(error)  # its one-dump collector reads them
        return CollectorRecord(self.name, status, error=error, files=[rel], details=details)


def plan(options: CollectOptions) -> tuple[int, float, float]:
    """(samples, interval, time budget): N capped, the interval shrunk so N fit in the budget."""
    count = max(1, min(int(options.samples), MAX_SAMPLES))
    budget = max(1.0, min(MAX_SECONDS, options.timeout))
    interval = max(0.0, float(options.sample_interval))
    if count > 1 and interval * (count - 1) > budget * 0.8:
        interval = budget * 0.8 / (count - 1)
    return count, round(interval, 4), budget


def sample(pid: int, count: int, interval: float, budget: float, cap: int = tools.TOOL_STDOUT_BYTES):
    """Take up to `count` nonblocking dumps `interval` apart within `budget` seconds."""
    doc: dict = {"format": FORMAT, "version": VERSION, "tool": "py-spy", "mode": "nonblocking", "pid": pid,
                 "requested": count, "interval_s": interval, "samples": [], "failures": []}
    deadline = time.monotonic() + budget
    argv = ["py-spy", "dump", "--pid", str(pid), "--json", "--nonblocking"]
    last = None
    for i in range(count):
        if tools.INTERRUPTED.is_set() or time.monotonic() >= deadline:
            break
        stamp = time.time()
        # nonblocking: no ptrace stop, so no supervisor is needed to resume the target; the tool still dies with collect
        last = run_tool(argv, timeout=min(DUMP_TIMEOUT_S, max(0.5, deadline - time.monotonic())), max_stdout=cap)
        if last.missing or last.interrupted:
            break
        threads = _threads(last.stdout) if last.ok else None
        if threads is not None:
            doc["samples"].append({"t": round(stamp, 4), "threads": cap_threads(threads)[0]})
        elif len(doc["failures"]) < MAX_ERRORS and last.cut:
            doc["failures"].append({"t": round(stamp, 4), "error": f"py-spy's output passed {cap} bytes: stopped"})
        elif len(doc["failures"]) < MAX_ERRORS:
            text = (last.stderr.strip() or last.stdout.strip() or f"exit {last.returncode}").splitlines()[:2]
            said = " / ".join(text)[:300] + (" (timed out)" if last.timed_out else "")
            doc["failures"].append({"t": round(stamp, 4), "error": said})
        if not procfs.pid_exists(pid):
            break
        if i + 1 < count:
            pause = interval * random.uniform(1 - JITTER, 1 + JITTER) - last.seconds
            time.sleep(max(0.0, min(pause, deadline - time.monotonic())))
    return doc, last


def _threads(text: str) -> list | None:
    """py-spy's threads without locals and process info (not needed, and they may hold data)."""
    try:
        data = json.loads(text)
    except ValueError:
        return None
    if not isinstance(data, list):
        return None
    out = []
    for th in data:
        if not isinstance(th, dict):
            continue
        th = {k: v for k, v in th.items() if k != "process_info"}
        th["frames"] = [{k: v for k, v in f.items() if k != "locals"}
                        for f in th.get("frames") or [] if isinstance(f, dict)]
        out.append(th)
    return out

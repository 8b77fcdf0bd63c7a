"""Python stacks of every thread of a rank, as py-spy's JSON.

A stopped or already-traced process cannot be suspended by py-spy, so for those
the non-blocking mode is used directly (it reads memory without pausing); if a
blocking dump fails to suspend, it is retried non-blocking.
"""

from __future__ import annotations

import json
from typing import Any

from parsers.model.manifest import CollectorRecord, Status
from parsers.gather.registry import collector_file
from forensics.collect.budget import cap_threads, fit_prefix, leading_items, tool_room, write_whole, write_within
from forensics.collect.guard import StateGuard
from forensics.collect.tool import ToolResult, run_tool
from forensics.collectors.base import AlwaysEnabled, CollectOptions, RankTarget, ptrace_denied
from forensics.collectors.native_stack import native_tool
from forensics.collectors.pyspy_peers import attach_peers, p2p_locals
from forensics.discover import procfs
from parsers.model.states import letter_rule

DENIED_MARKS = ("Permission Denied", "Operation not permitted", "permission denied")
GONE_MARKS = ("No such process", "Failed to open process", "os error 3")
ERROR_TEXT_BYTES = 64 << 10  #: of a failed run's output kept in its tool-error file
SUSPEND_MARKS = ("Failed to suspend", "unexpected waitpid", "Failed to get stack traces")


class PySpyCollector(AlwaysEnabled):
    name = "py-spy"
    uses_ptrace = True

    def collect(self, target: RankTarget, options: CollectOptions) -> CollectorRecord:
        try:
            nonblocking = letter_rule(procfs.read_state(target.pid)) == "stopped" or bool(procfs.tracer_pid(target.pid))
        except (procfs.ProcessGone, OSError):
            return CollectorRecord(self.name, Status.GONE, error=f"pid {target.pid} no longer exists")
        details: dict = {"nonblocking": nonblocking, "native": options.native}
        cap, not_run = tool_room(target.budget, f"pid {target.pid} py-spy")
        if not_run:  # nothing could be written: the target is not paused for it
            return CollectorRecord(self.name, Status.SKIPPED, error=not_run, details=details)
        with StateGuard(target.pid) as guard:  # resumes a target left stopped, by a tool's fault or our cut
            result = self._dump(target.pid, options, nonblocking, cap)
            if not result.ok and not result.cut and not nonblocking and _has(result, SUSPEND_MARKS):
                details["retried_nonblocking"] = True
                details["nonblocking"] = True
                result = self._dump(target.pid, options, True, cap)
            peers = p2p_locals(target, options, result, details)
        details.update(state_before=guard.outcome.before, state_after=guard.outcome.after)
        if guard.outcome.action:
            details["guard"] = guard.outcome.action
        return self._record(target, result, details, peers)

    def _dump(self, pid: int, options: CollectOptions, nonblocking: bool, cap: int) -> ToolResult:
        argv = ["py-spy", "dump", "--pid", str(pid), "--json"]
        # py-spy refuses --native with --nonblocking; with libdw present the native frames come from
        # the native-stack collector (pause of ms, every thread) and py-spy stays Python-only (12 ms)
        if options.native and not nonblocking and native_tool(options) == "py-spy":
            argv.append("--native")
        if nonblocking:
            argv.append("--nonblocking")
        return run_tool(argv, timeout=options.timeout, target_pid=pid, max_stdout=cap)

    def _record(self, target: RankTarget, result: ToolResult, details: dict, peers: dict) -> CollectorRecord:
        details["argv"] = result.argv
        if result.interrupted:
            return CollectorRecord(self.name, Status.SKIPPED, error="collection interrupted", details=details)
        if result.missing:
            return CollectorRecord(self.name, Status.UNAVAILABLE, error="py-spy is not installed (pip install py-spy)",
                                   details=details)
        if result.timed_out:
            return CollectorRecord(self.name, Status.TIMEOUT, error=f"py-spy did not answer in {result.seconds:.1f} s",
                                   details=details)
        if result.cut:  # stopped at the byte cap: the whole threads it printed first are kept, the cut said
            doc = leading_items(result.stdout)
            details["output_cut"] = (f"py-spy stopped after {len(result.stdout.encode())} bytes of output "
                                     f"({target.budget.which()} or the tool cap); {len(doc)} whole threads read")
            target.budget.note(f"pid {target.pid} py-spy: {details['output_cut']}")
            if doc:
                return _save(self.name, target, doc, details)
            return CollectorRecord(self.name, Status.SKIPPED, error=details["output_cut"], details=details)
        doc = _json(result.stdout) if result.ok else None
        if doc is not None:
            attach_peers(doc, peers)
            return _save(self.name, target, doc, details)
        message = (result.stderr.strip() or result.stdout.strip()).splitlines()[:3]
        error = " / ".join(message) or f"py-spy exited with {result.returncode}"
        if procfs.exited(target.pid) or _has(result, GONE_MARKS):  # before 'denied': ptrace on a zombie is EPERM
            status = Status.GONE
        elif _has(result, DENIED_MARKS):
            status, error = Status.DENIED, ptrace_denied(error)
        else:
            status = Status.FAILED
        return CollectorRecord(self.name, status, error=error, files=_save_error(target, result, details),
                               details=details)


def _save(collector: str, target: RankTarget, doc: Any, details: dict) -> CollectorRecord:
    """py-spy's threads capped (threads, frames a thread), then counted against the rank's and the collection's
    byte budget: the leading threads that fit are written, the rest left out; what was cut is said in the record
    and the manifest's note (forensics.collect.budget)."""
    kept, cut = cap_threads(doc)
    text = json.dumps(kept)
    name = collector_file(collector, "pyspy-json")
    if cut:
        details["cut"] = cut
        target.budget.note(f"pid {target.pid} {name}: {cut}")
    room = target.budget.left
    if room < len(text) and isinstance(kept, list):
        fit = fit_prefix([len(json.dumps(t)) for t in kept], room)
        if fit:
            text = json.dumps(kept[:fit])
            details["budget_cut"] = (f"pid {target.pid} {name}: {len(kept) - fit} of {len(kept)} threads left out "
                                     f"({target.budget.which()} reached)")
            target.budget.note(details["budget_cut"])
    path, rel = target.out(name)
    error = write_whole(target.budget, path, text, f"pid {target.pid} {name}")
    if error:
        return CollectorRecord(collector, Status.SKIPPED, error=error, details=details)
    return CollectorRecord(collector, Status.OK, files=[rel], details=details)


def _save_error(target: RankTarget, result: ToolResult, details: dict) -> list[str]:
    """Why the run failed, its first ERROR_TEXT_BYTES of output, in its tool-error file, counted against the rank's
    and the collection's byte budget like every other file (cut to the bytes left, or left out, and said)."""
    name = collector_file(PySpyCollector.name, "tool-error")
    path, rel = target.out(name)
    data = (result.stderr + result.stdout).encode("utf-8", "replace")[:ERROR_TEXT_BYTES]
    written, cut = write_within(target.budget, path, data, f"pid {target.pid} {name}")
    if cut:
        details["budget_cut"] = cut
    return [rel] if written else []


def _has(result: ToolResult, marks: tuple[str, ...]) -> bool:
    text = result.stderr + result.stdout
    return any(m in text for m in marks)


def _json(text: str) -> Any:
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return None

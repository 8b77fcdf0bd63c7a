"""What a suspect itself is doing now, or how it ended: typed citations of its own evidence.

Why: 'the others wait on rank 5' says where to look; 'rank 5 runs preprocess_shard (train.py:44),
state R' or 'it raised torch.OutOfMemoryError ...' says what to fix. The arbiter puts these first
under the culprit. One explanation link lives here too: a main thread blocked acquiring a lock (a
futex wait in /proc) is explained by another thread of the same process that runs (py-spy lists
every thread with its name).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from parsers.judges.exceptions import last_exceptions
from parsers.model.events import own_error
from parsers.model.findings import Citation, ReasonClass, Suspect, cite
from parsers.readers.last_error import KIND as LAST_ERROR, own_reason
from parsers.stacks.classify import is_library

if TYPE_CHECKING:  # an annotation: the merge of digests imports this module (through the stacks judge), reading no file
    from parsers.gather.evidence import Evidence

_STATES = {"R": "busy on a CPU", "S": "sleeping", "D": "in uninterruptible sleep", "T": "stopped",
           "t": "stopped by a tracer", "Z": "a zombie (exited, not reaped)"}
#: frames of a thread that waits to acquire a lock (threading's acquire, CPython's PyThread_acquire_lock_timed)
_LOCK_FRAMES = ("acquire", "_acquire_restore", "PyThread_acquire_lock")  #: matched inside the function name


#: the files a main-thread stack is read from, in the order a citation names one
STACK_KINDS = ("pyspy-json", "gdb-json", "native-stack", "pyspy-samples", "pyspy-text", "gdb-text", "faulthandler-text")

#: frames that mean "the main thread waits for a DataLoader worker"
_LOADER_FRAMES = ("_MultiProcessingDataLoaderIter", "torch/utils/data/dataloader.py")


def data_wait(r: Any) -> tuple[str, list[str]] | None:
    """(reason, evidence) when the main thread waits for data from its DataLoader workers, with what they do."""
    stack = r.main_stack
    if stack is None or not any(any(m in f.label for m in _LOADER_FRAMES) for f in stack.frames[:12]):
        return None
    workers = [c for c in r.children if c.main_stack is not None]
    if not workers:
        return "waits for data from its DataLoader workers (no worker stack was collected)", []
    w = workers[0]
    what = w.activity.where or "an unknown place"
    state = w.proc.state if w.proc else "?"
    evidence: list[str] = [cite(f"DataLoader worker pid {c.pid}: state {c.proc.state if c.proc else '?'}"
                                + (f", wchan {c.proc.wchan}" if c.proc and c.proc.wchan else "")
                                + f", main thread at {c.activity.where}", tool="/proc") for c in workers[:4]]
    return f"waits for its DataLoader worker pid {w.pid}, which is at {what} (state {state})", evidence


def file_of(r: Any, *kinds: str) -> str | None:
    """The file (as cited) of the first of a rank's artifacts of one of `kinds`, for a citation's `file`."""
    return next((a.cite for a in getattr(r, "files", ()) if a.kind in kinds), None)


def own_state(ev: Evidence, s: Suspect) -> list[Citation]:
    """What the suspect itself shows: its state, its main thread (and, where it waits on a lock, the
    thread that runs meanwhile: also set as `s.why`), its GPU at collection, how it ended, its last exception."""
    lines: list[Citation] = []
    proc = next((r for r in ev.ranks if s.rank is not None and r.rank == s.rank
                 and (s.pid is None or r.record.pid == s.pid)), None)
    if proc is not None and proc.state:
        wchan = proc.proc.wchan if proc.proc and proc.proc.wchan else None
        what = _STATES.get(proc.state, "")
        lines.append(cite(f"now: state {proc.state}" + (f" ({what})" if what else "")
                          + (f", wchan {wchan}" if wchan else "") + " [/proc]", tool="/proc",
                          file=file_of(proc, "process-state"), tagged=True))
    if proc is not None and proc.main_stack is not None:
        act = proc.activity
        src = proc.main_stack.source or "stack"
        loader = data_wait(proc)
        if loader is not None:
            lines.append(cite(f"main thread {loader[0]} [{src}]", tool=src, file=file_of(proc, *STACK_KINDS),
                              tagged=True))
        else:
            lines.append(cite(f"main thread: {act.text} [{src}]" if act.waiting
                              else f"main thread at {act.where} [{src}]",
                              tool=src, file=file_of(proc, *STACK_KINDS), tagged=True))
        holder = lock_holder(proc)
        if holder:
            lines.append(holder)
            s.why = holder.why
    if s.reason_class == ReasonClass.GPU_QUEUED:
        host = ev.hosts.get(proc.record.host if proc is not None else (s.host or ""))
        utils = sorted({f["utilization.gpu"] for f in (host.facts.values() if host else ())
                        if isinstance(f, dict) and isinstance(f.get("utilization.gpu"), (int, float))})
        if utils:
            shown = ", ".join(f"{u:g}%" for u in utils)
            lines.append(cite(f"its host's GPU utilisation at collection: {shown} [nvidia-smi]", tool="nvidia-smi",
                              tagged=True))
    exit_rec = next((e for e in ev.exits if e.rank == s.rank), None)
    if exit_rec is not None and exit_rec.returncode is not None:
        launcher = next((a.cite for a in ev.artifacts if a.kind == "launcher"), None)
        lines.append(cite(f"ended: {exit_rec.how} [launcher record]", tool="launcher record", file=launcher,
                          tagged=True))
    exc = last_exceptions(ev).get(s.rank) if s.rank is not None else None
    if exc is not None:
        e, art = exc
        lines.append(cite(f"last exception: {e.headline()} [{art.cite}" + (f":{e.line}]" if e.line else "]"),
                          tool="exception", file=art.cite, line=e.line, tagged=True))
    cause = first_cause(ev, proc, s, exc)
    if cause is not None:
        lines.insert(0, cause)
        s.why = s.why or cause.why
    return lines


#: findings about a rank that ended, raised or left nothing: the exit is a consequence, its own first error the why
_ENDED = {ReasonClass.EXITED, ReasonClass.RAISED, ReasonClass.EXITED_FIRST, ReasonClass.MISSING, ReasonClass.NO_DUMP,
          ReasonClass.ABSENT, ReasonClass.NO_RECORDER_STATE, ReasonClass.MISSING_LINE, ReasonClass.FROZEN}


def first_cause(ev: Evidence, proc: Any, s: Suspect, exc: tuple | None) -> _Why | None:
    """'cause: its own NCCL log says ...' for a rank that exited, raised or left nothing: the first error of its
    own that is no wait on a peer, from its NCCL log's WARN lines and NCCL's reason under its exception's
    'Last error:' (a truncated message, a duplicate GPU, no network interface). The exit, the abort and
    'invalid usage' are what followed; they stay listed under it."""
    if s.reason_class not in _ENDED or s.rank is None:
        return None
    files = list(getattr(proc, "files", ()) or ()) or [a for a in ev.artifacts if a.rank == s.rank]
    found = []
    for art in files:
        for e in (art.parsed.events if art.parsed else ()):
            if own_error(e) and (e.source == "nccl-log" or e.kind == LAST_ERROR) and own_reason(e.message):
                found.append((e.source != "nccl-log", e.origin.line or 0, e, art))  # NCCL's own log says it first
                break  # the first of each file
    if found:
        *_, e, art = min(found, key=lambda f: f[:2])
        where = f"{art.cite}:{e.origin.line}" if e.origin.line else art.cite
        said = "its own NCCL log says" if e.source == "nccl-log" else "NCCL's last error under its exception says"
        return _Why(f"{said}: {e.message[:200]}", f"cause: {said}: {e.message[:300]} [{where}]",
                    tool=e.source or "logs", file=art.cite)
    reason = exc[0].details.get("last_error") if exc is not None else None
    if exc is not None and reason is not None and own_reason(reason):
        _, art = exc
        return _Why(f"NCCL's last error under its exception says: {reason[:200]}",
                    f"cause: NCCL's last error under its exception says: {reason[:300]} [{art.cite}]", tool="exception",
                    file=art.cite)
    return None


class _Why(Citation):
    """A citation that also says, in one clause, why the suspect does what it does."""

    why: str

    def __new__(cls, why: str, text: str, tool: str | None = None, file: str | None = None) -> "_Why":
        obj = Citation.__new__(cls, text, tool=tool, file=file, tagged=True)  # its words end in '[py-spy]'
        obj.why = why
        return obj

    def __reduce__(self) -> tuple[type, tuple[object, ...]]:  # copy and pickle make it again with its fields
        return type(self), (self.why, str(self), self.tool, self.file)


def _thread_at(t: Any, wchans: dict[int, str], short: bool = False) -> str:
    """"'ckpt-writer' at write_shard_to_storage (w.py:250) inside clock_nanosleep": the thread's first frame of
    the user's code, and what it waits in: its innermost frame where that is another (a sleep, a read, a lock:
    py-spy --native), else the kernel function /proc says the thread sleeps in (`wchans`, by thread id).
    `short` (for the why, which a summary of several culprits must fit): "'ckpt-writer' at write_shard_to_storage"."""
    user = next((f for f in t.frames if not is_library(f)), t.frames[0])
    inner = t.frames[0] if t.frames else None
    name = f"{t.name or f'thread {t.thread_id}'!r}"
    waits = _waits_in(t, wchans)
    if short:
        return f"{name} at {user.function}"
    seen = "" if waits is None or waits != wchans.get(t.thread_id) or inner is not user else " (its wchan in /proc)"
    return f"{name} at {user.label}" + (f" inside {waits}{seen}" if waits else "")


def _waits_in(t: Any, wchans: dict[int, str]) -> str | None:
    """What a thread waits in: its innermost frame where that is no frame of the user's code, else its /proc wchan."""
    user = next((f for f in t.frames if not is_library(f)), None)
    inner = t.frames[0] if t.frames else None
    if inner is not None and inner is not user and inner.function:
        return inner.function
    return wchans.get(t.thread_id)


def _wchans(proc: Any) -> dict[int, str]:
    """Thread id -> the kernel function it sleeps in, from /proc's task list (a running thread has none)."""
    out = {}
    for t in (proc.proc.threads if proc.proc is not None else ()):
        tid, wchan = (t.get("tid"), t.get("wchan")) if isinstance(t, dict) else (t[0], t[3] if len(t) > 3 else None)
        if isinstance(tid, int) and isinstance(wchan, str) and wchan not in ("", "0"):
            out[tid] = wchan
    return out


def lock_holder(proc: Any, limit: int = 3) -> _Why | None:
    """'why: its main thread waits to acquire a lock (futex wait in /proc) while its other threads run the
    user's code: 'ckpt-writer' at write_shard_to_storage (...)': the why of a main thread blocked on a lock,
    from the process's other threads (py-spy JSON names every thread).

    Said only when the main thread's innermost frames acquire a lock (a Python `acquire`, or CPython's
    PyThread_acquire_lock* in native frames: py-spy --native's, or the main thread's in gdb/libdw stacks,
    where a `with lock:` shows no Python frame of its own). py-spy does not say who holds a lock, so every other thread
    that runs the user's code is named as a candidate, the one py-spy says is active first."""
    main = proc.main_stack
    native = next((t for t in (getattr(proc, "gdb", None) or ()) if t.is_main), None)  # libdw/gdb: C frames
    if main is None or not any(any(m in f.function for m in _LOCK_FRAMES) for t in (main, native) if t is not None
                               for f in t.frames[:6]):
        return None
    others = [t for t in (proc.pyspy or ()) if not t.is_main and any(not is_library(f) for f in t.frames)]
    if not others:
        return None
    others.sort(key=lambda t: not t.active)
    wchan = proc.proc.wchan if proc.proc and proc.proc.wchan else None
    futex = f" ({wchan} in /proc)" if wchan and "futex" in wchan else ""
    wchans = _wchans(proc)
    said = ", ".join(_thread_at(t, wchans) for t in others[:limit])
    # the only other thread that runs the user's code is the only one that can hold a lock the user's code took
    holder = "that thread holds it" if len(others) == 1 else "one of them likely holds it"
    brief = ", ".join(_thread_at(t, wchans, short=True) for t in others[:limit])
    waits = _waits_in(others[0], wchans) if len(others) == 1 else None
    why = (f"its main thread waits to acquire a lock that its thread {brief} holds"
           + (f" (inside {waits})" if waits else "") if len(others) == 1 else
           f"its main thread waits to acquire a lock that one of its threads ({brief}) likely holds")
    return _Why(why, f"why: its main thread waits to acquire a lock{futex} while its other "
                f"thread{'s' if len(others) > 1 else ''} run{'' if len(others) > 1 else 's'} the user's code: {said}; "
                f"{holder} [py-spy]", tool="py-spy",
                file=file_of(proc, "pyspy-json"))

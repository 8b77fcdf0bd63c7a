"""Judge how ranks ended from their own output: a cause raised, or a rendezvous a rank never joined.

Why a judge of its own: a rank that dies of `torch.OutOfMemoryError` leaves no Flight
Recorder dump and no NCCL log tail, so the log correlation can only say it is silent;
its traceback says why. The ranks that wait on it print exceptions too (NCCL or gloo
errors, timeouts, ChildFailedError): those are symptoms, never a cause. And when the
store reports 'x/y clients joined', the ranks that reported no store error are the
ones that never came, as far as the files cover the job.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterable, Sequence, cast

from parsers.model.events import INFO_KINDS, WAIT_ERRORS, ErrorEvent, ErrorKind, WorkerReport
from parsers.model.findings import Findings, JudgeContext, ReasonClass, Suspect, cite
from parsers.model.ranges import fold

if TYPE_CHECKING:  # an annotation: the host digest's module imports this one (a gateway, which reads no file)
    from parsers.gather.evidence import Evidence


#: exception categories (parsers.readers.exception.categorize) that waiting ranks print
SYMPTOMS = {"nccl", "gloo", "timeout", "child-failed", "store-timeout", "mismatch", "barrier-absent", "barrier-wait"}


def last_exceptions(ev: Evidence) -> dict[int, tuple[Any, Any]]:
    """rank -> (last exception of its own output, the artifact it was read from)."""
    return exceptions_by_rank(ev.artifacts)


def exceptions_by_rank(artifacts: Iterable[Any]) -> dict[int, tuple[Any, Any]]:
    """rank -> (the last exception filed under it, the artifact it was read from), over `artifacts` in their order:
    each exception of a rank's output under the rank `exception_rank` gives it, whichever file holds it.

    Why apart from `last_exceptions`: a host's digest says each rank's last exception from that host's files only
    (`parsers.scale.digest.summaries_of`); it filed one under the rank whose file held it, so a rank-0 log with
    rank 5's `[rank5]:` traceback said rank 0 raised where this judge names rank 5. Both now ask this."""
    out: dict[int, tuple[Any, Any]] = {}
    for art in artifacts:
        if art.kind != "rank-log" or not art.parsed or not art.parsed.exceptions:
            continue
        for exc in art.parsed.exceptions:
            rank = exception_rank(exc, art)
            if rank is not None:
                out[rank] = (exc, art)
    return out


def kept_exceptions(exceptions: Sequence[Any], last: int, ranks: int) -> list[Any]:
    """Of one output's exceptions (in file order), those a bounded copy of it keeps, in that order: the `last`
    latest, the last of each rank its lines name (unprefixed ones: its file's, one more key) for the `ranks` ranks
    named latest, and the earliest (by line: `died_first` asks whether any came before a launcher's exit line).

    Why here: a host's digest kept the last 8 of a file, so a console with the tracebacks of nine ranks lost the
    first one's in the digest path while `exceptions_by_rank` filed it under its rank in the plain read. Kept this
    way, this judge reads the copy as it reads the whole, for every rank the copy still names."""
    latest: dict[int | None, int] = {}
    for i, x in enumerate(exceptions):
        latest.pop(x.rank, None)  # ordered by each rank's last exception
        latest[x.rank] = i
    keep = set(range(max(0, len(exceptions) - last), len(exceptions))) | set(list(latest.values())[-ranks:])
    if exceptions:
        keep.add(min(range(len(exceptions)), key=lambda i: (exceptions[i].line is not None, exceptions[i].line or 0)))
    return [exceptions[i] for i in sorted(keep)]


def exception_rank(exc: Any, art: Any) -> int | None:
    """The rank an exception is of: the rank its line names (`[rank3]:`), else the rank of the file it was read
    from. Why one place: the scale path reads raw the rank a job-level file's exception names
    (`parsers.scale.named_faults`), and must mean the rank this judge then names."""
    rank = exc.rank if exc.rank is not None else art.rank
    return int(rank) if rank is not None else None


def spawn_raised(art: Any, local_rank: int | None) -> Any | None:
    """The exception mp.spawn printed for its process `local_rank` (the traceback under its '-- Process N terminated
    with the following error:'), in the output `art` it was read from; None if that output holds none.

    Why here, and not by `exception_rank`: mp.spawn names a process by the index it passed it, no rank (the job's
    rank is that index only where the caller made it so), and its traceback carries no rank prefix, so the
    exceptions judge files it under the file's own rank. This is which exception the launcher's exit line speaks
    of, asked of the one module that reads a rank's exceptions (the summary's first error says it beside the exit)."""
    if art is None or not art.parsed:
        return None
    return next((x for x in art.parsed.exceptions if x.details.get("launcher") == "mp.spawn"
                 and x.local_rank == local_rank), None)


def judge(ev: Evidence, ctx: JudgeContext | None = None) -> Findings:
    """The exceptions judge (the one protocol): a rank's own exception that is a cause, a rendezvous some ranks
    never joined, a worker that died first."""
    return Findings("exceptions", judge_exceptions(ev), judge="exceptions")


def judge_exceptions(ev: Evidence) -> list[Suspect]:
    """Suspects from exceptions that are causes, and from a rendezvous some ranks never joined."""
    found = last_exceptions(ev)
    suspects = []
    hosts = {r.rank: r for r in ev.ranks if r.rank is not None}
    for rank, (exc, art) in sorted(found.items()):
        if exc.category in SYMPTOMS:
            continue
        proc = hosts.get(rank)
        where = f"{art.cite}:{exc.line}" if exc.line else art.cite
        suspects.append(Suspect(
            rank=rank, host=proc.record.host if proc else (art.hints.host or art.host),
            pid=proc.record.pid if proc else art.pid, reason_class=ReasonClass.RAISED,
            reason=f"raised {exc.headline()}", confidence=ReasonClass.RAISED.default_confidence,
            evidence=[cite(f"its own output ({where}): {exc.headline()}", tool="traceback", file=art.cite,
                           line=exc.line)]))
    suspects += _never_joined(ev, found)
    suspects += died_first(ev)
    return suspects


def died_first(ev: Evidence) -> list[Suspect]:
    """A worker its launcher saw die (non-zero exit) before any rank of the same output reported an error,
    followed by other processes that time out or lose their peer: the first failure is the cause.

    Why file order: a launcher's console is one stream, written as things happen, so the death
    printed before the first timeout happened before it. A process that still prints after the
    death is not the one that died (unless it has the same pid). A death after the first error
    proves nothing (the watchdog aborts its own process, exit -6, once it times out), nor does a
    death with no waiting process after it.
    """
    out = []
    for art in ev.artifacts:
        if art.kind != "rank-log" or not art.parsed:
            continue
        dead: ErrorEvent | None = None
        for e in art.parsed.events:
            if type(e) is not ErrorEvent or e.kind in INFO_KINDS or e.kind in (ErrorKind.LAUNCHER_SIGNAL,
                                                                               ErrorKind.PYTHON_FRAME):
                continue
            if dead is None:
                if e.kind != ErrorKind.LAUNCHER_EXIT or not _report(e).exitcode or _raised_before(art, e):
                    break  # something else failed first: the death, if any, may be its consequence
                dead = e
                continue
            if e.kind in WAIT_ERRORS and _another_process(dead, e):
                if not _own_watchdog_abort(dead, art.parsed.events):
                    out.append(_died_first_suspect(art, dead, e))
                break
    return out


#: the exit code of a process that SIGABRT killed: what ProcessGroupNCCL's watchdog does to its own process
SIGABRT_EXIT = -6


def _own_watchdog_abort(dead: ErrorEvent, events: list) -> bool:
    """The death is the dead process's own watchdog abort, as far as the lines tell: it exited by SIGABRT and a
    watchdog timeout of the rank its local rank names (no pid to tell them apart) is among the waiters' lines.

    Why: a reporter often pastes the launcher's 'failed (exitcode: -6) local_rank: 0' above the log it explains;
    the order of the paste is then no order in time, and rank 0 timing out with the others is why it aborted.
    """
    said = _report(dead)
    if said.exitcode != SIGABRT_EXIT or said.local_rank is None:
        return False
    pid = said.pid or dead.origin.pid
    return any(type(e) is ErrorEvent and e.kind == ErrorKind.WATCHDOG_TIMEOUT
               and e.origin.rank == said.local_rank
               and e.origin.pid in (None, pid) for e in events)


def _report(e: ErrorEvent) -> WorkerReport:
    """What the launcher said of the worker of a launcher-exit event (its data, typed by the model)."""
    return cast(WorkerReport, e.data)


def _raised_before(art: Any, e: ErrorEvent) -> bool:
    """An exception (Python or C++ `Exception raised from ...`) was read from the lines above `e`."""
    line = e.origin.line
    return line is None or any(x.line is None or x.line < line for x in art.parsed.exceptions)


def _another_process(dead: ErrorEvent, e: ErrorEvent) -> bool:
    pid = _report(dead).pid or dead.origin.pid
    return not (pid is not None and e.origin.pid == pid)


def _died_first_suspect(art: Any, dead: ErrorEvent, waiter: ErrorEvent) -> Suspect:
    said = _report(dead)
    pid, local = said.pid or dead.origin.pid, said.local_rank
    who = f"rank {waiter.origin.rank}" if waiter.origin.rank is not None else (
        f"pid {waiter.origin.pid}" if waiter.origin.pid is not None else "a process")
    what = f" in {waiter.op.upper()}" if waiter.op else ""
    what += f" SeqNum {waiter.seq}" if waiter.seq is not None else ""
    return Suspect(
        rank=None, host=dead.origin.host, pid=pid, reason_class=ReasonClass.EXITED_FIRST,
        reason=(f"died first (exit code {said.exitcode}" + (f", local rank {local}" if local is not None else "")
                + f") before any rank reported an error; then {who} failed waiting ({waiter.kind}{what})"),
        confidence=ReasonClass.EXITED_FIRST.default_confidence,
        evidence=[cite(f"{art.cite}:{e.origin.line}: {e.message[:200]}", tool="launcher", file=art.cite,
                       line=e.origin.line) for e in (dead, waiter)])


def _never_joined(ev: Evidence, found: dict[int, tuple[Any, Any]]) -> list[Suspect]:
    joined = [(exc, art) for exc, art in found.values() if exc.category == "store-timeout"
              and isinstance(exc.details.get("clients_expected"), int)
              and isinstance(exc.details.get("clients_joined"), int)]
    if not joined:
        return []
    exc, art = joined[0]
    expected, came = exc.details["clients_expected"], exc.details["clients_joined"]
    if not 0 < expected <= (1 << 20) or came >= expected:
        return []
    reported = {r for r, (e, _) in found.items() if e.category in SYMPTOMS}  # alive, and failing to set up
    known = set(ev.coverage.reporting) | {r.rank for r in ev.ranks if r.rank is not None}
    quiet = sorted(r for r in known - reported if r < expected)
    unaccounted = sorted(set(range(expected)) - known)
    if not quiet and len(unaccounted) == expected - came:
        quiet = unaccounted  # the store's own count: exactly these ranks are neither seen nor among the joined
    if not quiet or len(quiet) > expected - came:
        return []
    procs = {r.rank: r for r in ev.ranks if r.rank is not None}
    out = []
    for rank in quiet:
        proc = procs.get(rank)
        evidence: list[str] = [cite(f"{art.cite}: {exc.type}: {exc.message[:160]}", tool="traceback", file=art.cite,
                                    line=exc.line),
                               cite(f"ranks {fold(sorted(reported))} failed waiting in the set-up; rank {rank} "
                                    "reported no error", tool="tracebacks")]
        if proc is not None and proc.main_stack is not None:
            evidence.append(cite(f"meanwhile its main thread is at {proc.activity.where}", tool=proc.main_stack.source))
        out.append(Suspect(rank=rank, host=proc.record.host if proc else None, pid=proc.record.pid if proc else None,
                           reason_class=ReasonClass.NEVER_JOINED,
                           reason=f"never joined the rendezvous: {came}/{expected} clients joined",
                           confidence=ReasonClass.NEVER_JOINED.default_confidence, evidence=evidence))
    return out

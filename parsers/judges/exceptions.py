"""Judge how ranks ended from their own output: a cause raised, or a rendezvous a rank never joined.

Why a judge of its own: a rank that dies of `torch.OutOfMemoryError` leaves no Flight
Recorder dump and no NCCL log tail, so the log correlation can only say it is silent;
its traceback says why. The ranks that wait on it print exceptions too (NCCL or gloo
errors, timeouts, ChildFailedError): those are symptoms, never a cause. And when the
store reports 'x/y clients joined', the ranks that reported no store error are the
ones that never came, as far as the files cover the job.
"""

from __future__ import annotations

from typing import Any

from parsers.model.findings import ReasonClass, Suspect
from parsers.ranges import fold

#: exception categories (parsers.readers.exception.categorize) that waiting ranks print
SYMPTOMS = {"nccl", "gloo", "timeout", "child-failed", "store-timeout"}


def last_exceptions(ev: Any) -> dict[int, tuple[Any, Any]]:
    """rank -> (last exception of its own output, the artifact it was read from)."""
    out: dict[int, tuple[Any, Any]] = {}
    for art in ev.artifacts:
        if art.kind != "rank-log" or not art.parsed or not art.parsed.exceptions:
            continue
        for exc in art.parsed.exceptions:
            rank = exc.rank if exc.rank is not None else art.rank
            if rank is not None:
                out[int(rank)] = (exc, art)
    return out


def judge_exceptions(ev: Any) -> list[Suspect]:
    """Suspects from exceptions that are causes, and from a rendezvous some ranks never joined."""
    found = last_exceptions(ev)
    suspects = []
    hosts = {r.rank: r for r in ev.ranks if r.rank is not None}
    for rank, (exc, art) in sorted(found.items()):
        if exc.category in SYMPTOMS:
            continue
        proc = hosts.get(rank)
        cite = f"{art.cite}:{exc.line}" if exc.line else art.cite
        suspects.append(Suspect(
            rank=rank, host=proc.record.host if proc else (art.hints.host or art.host),
            pid=proc.record.pid if proc else art.pid, reason_class=ReasonClass.RAISED,
            reason=f"raised {exc.headline()}", confidence=ReasonClass.RAISED.default_confidence,
            evidence=[f"its own output ({cite}): {exc.headline()}"]))
    suspects += _never_joined(ev, found)
    return suspects


def _never_joined(ev: Any, found: dict[int, tuple[Any, Any]]) -> list[Suspect]:
    joined = [(exc, art) for exc, art in found.values() if exc.category == "store-timeout"
              and isinstance(exc.details.get("clients_expected"), int) and isinstance(exc.details.get("clients_joined"), int)]
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
        evidence = [f"{art.cite}: {exc.type}: {exc.message[:160]}",
                    f"ranks {fold(sorted(reported))} failed waiting in the set-up; rank {rank} reported no error"]
        if proc is not None and proc.main_stack is not None:
            evidence.append(f"meanwhile its main thread is at {proc.activity.where}")
        out.append(Suspect(rank=rank, host=proc.record.host if proc else None, pid=proc.record.pid if proc else None,
                           reason_class=ReasonClass.NEVER_JOINED,
                           reason=f"never joined the rendezvous: {came}/{expected} clients joined",
                           confidence=ReasonClass.NEVER_JOINED.default_confidence, evidence=evidence))
    return out

"""Kernel findings from before the job started on a host: seen, said, and not counted against it.

Why: a machine's kernel log keeps what happened since boot. An OOM kill of another program at 15:55 says nothing
of a job whose processes started at 18:02, yet matched line by line it made that host a suspect and blamed every
rank on it (a straggler's job read 'host-fault', a healthy machine 'suspect'). Each kernel line's own time
(parsers.model.kernel_time) is compared with the earliest start of the job's processes on its host, its doubt
(MARGIN_S and printk's drift) in the event's favour. A line whose time or whose job start is unknown counts as
before, and the report says why it was not compared. An event that names one of the job's own processes (an OOM
kill of a rank, a rank's hung task, an Xid of its pid) counts whatever its stamp: its time must be wrong, not the
blame. The rule (_before_start) is stated once; the host judge applies it to the knowledge base's findings
(split_by_start) and to the kernel lines read as error events (lines_before_start), and the summary's first
error reads its decision (HostReport.not_counted): an Xid from before the job is not 'the first error' either.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Collection, Iterable, NamedTuple

from parsers.gather.evidence import HostEvidence, RankEvidence
from parsers.knowledge import Finding
from parsers.model.events import ProcessState
from parsers.model.kernel_time import MARGIN_S, utc_clock_time


@dataclass(frozen=True)
class JobStart:
    """When the first of the job's processes on one host started (Unix time), and the pids of them all."""

    at: float
    pids: frozenset[int]


def process_start(proc: ProcessState | None) -> float | None:
    """A process's start as a Unix time, from its proc.json (start_time, else btime + start_ticks/clock_ticks)."""
    if proc is None:
        return None
    start = _number(proc.raw.get("start_time"))
    if start is not None and start > 0:
        return start
    boot, ticks, hz = (_number(proc.raw.get(k)) for k in ("boot_time", "start_ticks", "clock_ticks"))
    if boot is None or ticks is None or not hz:
        return None
    return boot + ticks / hz


def _number(value: object) -> float | None:
    """A proc.json number (never a bool, which JSON's true would be), else None."""
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def job_starts(ranks: Iterable[RankEvidence]) -> dict[str, JobStart]:
    """Per host, the job's earliest process start there; a host one of whose processes has no known start has
    none (that process may have started first)."""
    starts: dict[str, list[float | None]] = {}
    pids: dict[str, set[int]] = {}
    for rank in ranks:
        host = rank.record.host
        starts.setdefault(host, []).append(process_start(rank.proc))
        pids.setdefault(host, set()).update([rank.record.pid] + [c.pid for c in rank.children])
    return {host: JobStart(min(s for s in found if s is not None), frozenset(pids[host]))
            for host, found in starts.items() if found and None not in found}


def line_times(host: HostEvidence, wanted: Collection[tuple[str, int | None]]
               ) -> dict[tuple[str, int], tuple[float | None, float]]:
    """(file, line) -> (Unix time, seconds it may be early) of each kernel line of `wanted` (time None: unknown);
    only those lines are decoded."""
    return {(e.file, e.line): (e.at, e.doubt) for e in host.kernel_lines if (e.file, e.line) in wanted}


def _finding_pid(finding: Finding) -> int | None:
    """The pid a kernel finding's line names (its knowledge-base entry's `pid` group), None if none."""
    pid = finding.groups.get("pid", "")
    return int(pid) if pid.isdigit() else None


def _not_compared(host: HostEvidence, job: JobStart | None) -> str | None:
    """Why no kernel line of `host` is compared with the job's start there (None: they are compared)."""
    if job is None:
        return ("kernel: the job's start on this host is not known (no process start time): kernel findings "
                "counted whatever their time")
    taken = max((e.clock.collected_at for e in host.kernel_lines if e.clock.collected_at is not None), default=None)
    if taken is not None and job.at > taken + MARGIN_S:  # a start after the copy was made: a clock or a file lies
        return (f"kernel: the job's start ({utc_clock_time(job.at, taken)}) is after the kernel log was copied "
                f"({utc_clock_time(taken, job.at)}): kernel findings counted whatever their time")
    return None


def _before_start(time: tuple[float | None, float], pid: int | None, job: JobStart) -> bool:
    """The rule, stated once: a kernel line counts against the job unless its time (unknown: it counts), its
    doubt added, is before the job's start on its host and it names none of the job's processes (then its stamp
    is wrong, not the blame)."""
    at, doubt = time
    return at is not None and at + doubt < job.at and pid not in job.pids


class KernelEventLine(NamedTuple):
    """A kernel line read as something that may count against the job: where it is, what it was read as (a
    knowledge-base entry's id, or an error event's kind: an Xid, a GPU off the bus, a PCIe error), the pid it
    names (None: none) and its time once decoded."""

    file: str
    line: int
    kind: str
    pid: int | None = None
    at: float | None = None


def split_by_start(findings: list[Finding], host: HostEvidence,
                   job: JobStart | None) -> tuple[list[Finding], list[str]]:
    """(the kernel findings that count, sentences on those left out or not compared) for one host."""
    if not findings:
        return findings, []
    why = _not_compared(host, job)
    if why is not None or job is None:  # (job None always has a why)
        return findings, [why] if why else []
    times = line_times(host, {(f.source, f.line_no) for f in findings})
    counted, earlier = [], []
    for f in findings:
        at, doubt = times.get((f.source, f.line_no or 0), (None, MARGIN_S))
        if at is not None and _before_start((at, doubt), _finding_pid(f), job):
            earlier.append(KernelEventLine(f.source, f.line_no or 0, f.entry.id, at=at))
        else:
            counted.append(f)
    notes = _earlier_notes(earlier, job)
    if any(times.get((f.source, f.line_no or 0), (None, 0.0))[0] is None for f in counted):
        notes.append(f"kernel: findings without a comparable time counted whatever their time: "
                     f"{host.kernel_clock.says}")
    return counted, notes


def lines_before_start(lines: Iterable[KernelEventLine], host: HostEvidence,
                       job: JobStart | None) -> tuple[frozenset[tuple[str, int]], list[str]]:
    """((file, line) of those of `lines` in `host`'s kernel log from before the job started there, a sentence per
    kind of them): split_by_start's rule for the lines other judges read as error events (an Xid from before the
    job must not be its first error, whether or not the knowledge base has an entry for it)."""
    lines = list(lines)
    if not lines or _not_compared(host, job) is not None or job is None:
        return frozenset(), []
    times = line_times(host, {(k.file, k.line) for k in lines})
    earlier = [k._replace(at=times[(k.file, k.line)][0]) for k in lines
               if (k.file, k.line) in times and _before_start(times[(k.file, k.line)], k.pid, job)]
    return frozenset((k.file, k.line) for k in earlier), _earlier_notes(earlier, job)


def _earlier_notes(earlier: list[KernelEventLine], job: JobStart) -> list[str]:
    """One sentence per kind left out (a knowledge-base entry, an error event's kind): its first time, how many,
    and where."""
    by_kind: dict[str, list[tuple[float, KernelEventLine]]] = {}
    for k in earlier:
        by_kind.setdefault(k.kind, []).append((k.at if k.at is not None else job.at, k))
    out = []
    for kind, seen in by_kind.items():
        at, first = min(seen, key=lambda pair: pair[0])
        last = max(a for a, _k in seen)
        more = f" ({len(seen)}x, the last at {utc_clock_time(last, job.at)})" if len(seen) > 1 else ""
        out.append(f"kernel: {kind} at {utc_clock_time(at, job.at)}{more}, before the job started at "
                   f"{utc_clock_time(job.at)}: not counted [{first.file}:{first.line}]")
    return out

"""Kernel findings from before the job started on a host: seen, said, and not counted against it.

Why: a machine's kernel log keeps what happened since boot. An OOM kill of another program at 15:55 says nothing
of a job whose processes started at 18:02, yet matched line by line it made that host a suspect and blamed every
rank on it (a straggler's job read 'host-fault', a healthy machine 'suspect'). Each kernel line's own time
(parsers.model.kernel_time) is compared with the earliest start of the job's processes on its host, its doubt
(MARGIN_S and printk's drift) in the event's favour. A line whose time or whose job start is unknown counts as
before, and the report says why it was not compared. An event that names one of the job's own processes (an OOM
kill of a rank, a rank's hung task, an Xid of its pid) counts whatever its stamp: its time must be wrong, not the
blame.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

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


def line_times(host: HostEvidence, findings: list[Finding]) -> dict[tuple[str, int], tuple[float | None, float]]:
    """(file, line) -> (Unix time, seconds it may be early) of each kernel line a finding is on (time None:
    unknown); only those lines are decoded."""
    wanted = {(f.source, f.line_no) for f in findings if f.line_no is not None}
    return {(e.file, e.line): (e.at, e.doubt) for e in host.kernel_lines if (e.file, e.line) in wanted}


def _names_job_process(finding: Finding, job: JobStart) -> bool:
    pid = finding.groups.get("pid", "")
    return pid.isdigit() and int(pid) in job.pids


def split_by_start(findings: list[Finding], host: HostEvidence,
                   job: JobStart | None) -> tuple[list[Finding], list[str]]:
    """(the kernel findings that count, sentences on those left out or not compared) for one host."""
    if not findings:
        return findings, []
    times = line_times(host, findings)
    if job is None:
        return findings, ["kernel: the job's start on this host is not known (no process start time): kernel "
                          "findings counted whatever their time"]
    taken = max((e.clock.collected_at for e in host.kernel_lines if e.clock.collected_at is not None), default=None)
    if taken is not None and job.at > taken + MARGIN_S:  # a start after the copy was made: a clock or a file lies
        return findings, [f"kernel: the job's start ({utc_clock_time(job.at, taken)}) is after the kernel log was "
                          f"copied ({utc_clock_time(taken, job.at)}): kernel findings counted whatever their time"]
    counted, earlier = [], []
    for f in findings:
        at, doubt = times.get((f.source, f.line_no or 0), (None, MARGIN_S))
        if at is not None and at + doubt < job.at and not _names_job_process(f, job):
            earlier.append((f, at))
        else:
            counted.append(f)
    notes = _earlier_notes(earlier, job)
    if any(times.get((f.source, f.line_no or 0), (None, 0.0))[0] is None for f in counted):
        notes.append(f"kernel: findings without a comparable time counted whatever their time: "
                     f"{host.kernel_clock.says}")
    return counted, notes


def _earlier_notes(earlier: list[tuple[Finding, float]], job: JobStart) -> list[str]:
    """One sentence per knowledge-base entry left out: its first time, how many, and where."""
    by_entry: dict[str, list[tuple[Finding, float]]] = {}
    for f, at in earlier:
        by_entry.setdefault(f.entry.id, []).append((f, at))
    out = []
    for entry_id, seen in by_entry.items():
        first, at = min(seen, key=lambda pair: pair[1])
        last = max(a for _f, a in seen)
        more = f" ({len(seen)}x, the last at {utc_clock_time(last, job.at)})" if len(seen) > 1 else ""
        out.append(f"kernel: {entry_id} at {utc_clock_time(at, job.at)}{more}, before the job started at "
                   f"{utc_clock_time(job.at)}: not counted [{first.source}:{first.line_no}]")
    return out

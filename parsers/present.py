"""The words of typed observations: what 'the evidence shows' says, worded here from typed facts.

Why a module of its own: a judge says what it found as data (parsers/model/findings.py: a host the host
judge would exclude and the line that says why, a traceback's innermost frame, what a RAS view says of a
communicator, stacks and dumps with no rank, where timed-out collectives were called from); how that
reads to an on-call engineer is presentation's, and nothing reads these words back.
"""

from __future__ import annotations

from parsers.model.events import describe_status
from parsers.model.findings import (CallSite, DumpFact, ErrorFact, ErrorsFact, HostFact, Observation, RasFact, StackFact,
                                    TracebackFact)
from parsers.ranges import fold

#: how many of a kind's places or sites one line names
LIMIT = 3


def observed(o: Observation) -> str:
    """One observation in words: typed facts worded here, else the words its judge wrote."""
    f = o.facts
    if isinstance(f, HostFact):
        return host(f)
    if isinstance(f, ErrorsFact):
        return errors(f)
    if isinstance(f, TracebackFact):
        return traceback(f)
    if isinstance(f, RasFact):
        return ras(f)
    if isinstance(f, StackFact):
        return stack(f)
    if isinstance(f, DumpFact):
        return dump(f)
    if isinstance(f, tuple) and f and isinstance(f[0], CallSite):
        return call_sites(f)
    return o.text


def host(f: HostFact) -> str:
    """'host gpu-b7 is to exclude: GPU has fallen off the bus [hosts/gpu-b7/kernel.log:12]'."""
    who = "the host of these lines (none names it)" if f.host is None else f"host {f.host}"
    status = "to exclude" if f.status == "exclude" else "suspect"  # 'host X is exclude' read as a typo
    c = f.citation
    return f"{who} is {status}: {f.title}" + (f" [{c.file}:{c.line}]" if c is not None and c.line else "")


def errors(f: ErrorsFact) -> str:
    """'first error: nccl-timeout at rank 3 (12-01 05:31:43.444)', 'one error: ...', 'why the job ended: ...'."""
    if f.role == "tied":
        return f"first errors at one time ({f.at}), from ranks {fold(f.ranks)}: their times do not say which came first"
    e = f.error
    if f.role == "first-timed":
        return f"first error: {f'{e.kind} at rank {e.rank}' if e.rank is not None else error(e)} ({f.at})"
    lead = {"first": "first error", "one": "one error", "ended": "why the job ended"}[f.role]
    return f"{lead}: {error(e)}"


def error(e: ErrorFact) -> str:
    """'nccl-warn (pid 687 on ce1a, device 0): Could not find ...': an error with who said it."""
    if e.raised:
        return f"mp.spawn's process {e.local_rank} raised {e.raised}" + (
            f" ({e.witness}: mp.spawn named a witness, not the cause)" if e.witness else "")
    if e.exit_status is not None:
        return f"launcher-exit: local_rank {e.local_rank} {describe_status(e.exit_status)}"
    who = " ".join(w for w in (f"rank {e.rank}" if e.rank is not None else "", f"pid {e.pid}" if e.pid is not None else "",
                               f"on {e.host}" if e.host else "", f"device {e.device}" if e.device is not None else "") if w)
    who = "" if e.launcher else who  # a launcher's line names the worker itself
    return f"{e.kind}" + (f" ({who})" if who else "") + f": {e.message[:160]}"


def traceback(f: TracebackFact) -> str:
    who = f"rank {f.rank}" if f.rank is not None else (f"pid {f.pid}" if f.pid is not None else "a process")
    return f"{who}'s traceback reaches {f.frame} (torch.distributed)"


def ras(f: RasFact) -> str:
    """'NCCL RAS (0x..): communicator ranks 1, 2 behind at AllReduce count 10 (pid 9 on n1)' (a view whose listed
    ranks are ahead blames no one: the ranks behind them are not listed, NVIDIA/nccl#1911)."""
    who = (f"communicator rank{'s' if len(f.comm_ranks) > 1 else ''} {', '.join(map(str, f.comm_ranks[:8]))}"
           if f.comm_ranks else "a process")
    at = f" at {f.op or 'operation'} count {f.count}" if f.count is not None else ""
    text = f"NCCL RAS ({f.comm.partition(':')[2] or f.comm}): {who} {f.kind}{at}"
    if f.processes:
        text += f" ({'; '.join(f.processes[:4])})"
    return text + ("; the ranks behind them are not listed" if f.kind == "ahead" else "")


def stack(f: StackFact) -> str:
    return f"pid{'s' if len(f.pids) > 1 else ''} {fold(f.pids)} (no rank printed): its main-thread stack shows it {f.doing}"


def dump(f: DumpFact) -> str:
    thread = "the main thread" if f.main else "the thread the fatal signal hit ('Current thread')"
    where = [f"{who}, {c.file}:{c.line}" for who, c in f.owners]
    many = len(where) > 1
    return f"{f.tool}{'s' if many else ''} ({'; '.join(where[:LIMIT])}) show{'' if many else 's'} {thread} {f.doing}"


def call_sites(sites: tuple[CallSite, ...]) -> str:
    """Where each rank's timed-out collective was called from: ranks whose waits come from different lines
    of code are the first thing to look at."""
    def site(c: CallSite) -> str:
        return (f"{c.function} called from {c.user}" if c.user else
                f"{c.function}, no frame of the user's code among the {c.frames} shown (outermost: {c.outermost})")
    said = "; ".join(f"rank{'s' if len(c.ranks) > 1 else ''} {fold(c.ranks)}: {site(c)}" for c in sites[:LIMIT])
    if len(sites) == 1:
        return f"the timed-out collective's stack (Flight Recorder) of {said}"
    return f"the timed-out collectives come from {len(sites)} different places in the code ({said})"

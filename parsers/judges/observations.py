"""What the files show, as typed observations: the judge the summary is built from.

Why a judge: the summary and 'what the evidence shows' are presentation; they must not re-read
events. This judge reads them once (who timed out in which op, who asked for dumps, processes that
disagree at one opCount, a member that completed past another's wait, the Flight Recorder
analyzer's and RAS's findings, coverage, the first error, stacks pasted in logs, call sites,
tracebacks, host faults, NCCL error returns) and returns each as an `Observation` with its kind
and the ranks it is about; presentation (forensics/report/words) orders and words them.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any, cast

from parsers.gather.evidence import Coverage, Evidence
from parsers.readers import stamps
from parsers.judges.claims import claims
from parsers.judges.exceptions import spawn_raised
from parsers.judges.logs import fr_report, horovod, names, short_timeout, silence, unread
from parsers.model.events import (INFO_KINDS, TIMEOUT_KINDS, UNKNOWN_HOST, WARNING_KINDS, ErrorEvent, ErrorKind,
                                  OpEvent, Progress, CollectiveStack, CollectiveTimeout, DumpAsked, LocalPeer,
                                  NcclFailure, RankStated, RasFinding, WorkerReport)
from parsers.model.findings import (CallSite, Citation, CompletedPastFact, CoverageFact, CoverageNoteFact,
                                    DisagreementFact, DumpAskFact, DumpFact, ErrorFact, ErrorsFact, Findings, HostFact,
                                    JudgeContext, KnownFact, NoErrorFact, Observation, PeerFact,
                                    ObservationKind as OK, RasFact, StackFact, TimeoutFact, TracebackFact, TrailFact,
                                    cite)
from parsers.model.stacks import Frame
from parsers.readers.c10d import COLLECTIVE_STACK
from parsers.readers.last_error import own_reason
from parsers.stacks.classify import classify, is_library


#: errors a rank raises when its wait on a peer ran past a timeout of its own (gloo's recv/send, NCCL's)
#: (a rendezvous store's wait timeout, c10d's DistStoreError, is one too: ranks waited past it at init)
PEER_TIMEOUTS = frozenset({ErrorKind.GLOO_TIMEOUT, ErrorKind.NCCL_TIMEOUT, ErrorKind.STORE_TIMEOUT,
                           ErrorKind.BARRIER_ABSENT})
#: what a launcher reports of a process it runs (an exit, a signal it sent, torchelastic's failure entries)
_LAUNCHER_REPORTS = frozenset({ErrorKind.LAUNCHER_EXIT, ErrorKind.LAUNCHER_SIGNAL, ErrorKind.CHILD_FAILURE,
                               ErrorKind.ROOT_CAUSE})


def observe(ev: Evidence, reports: list | None = None, peers: tuple[PeerFact, ...] = ()) -> list[Observation]:
    """Everything the files show that a summary may say, most telling first (timeouts, settings, splits,
    analyzer and RAS findings, coverage, peers named by address (`peers`, the named judge's PeerFacts),
    errors, stacks, tracebacks, hosts, error returns)."""
    seen = _seen(ev, frozenset().union(*(r.not_counted for r in reports or [])))
    short = short_timeout.too_short(ev)
    out = [Observation(OK.SETTING, facts=short)] if short else []
    out += [Observation(OK.TIMEOUT, ranks=f.ranks if f.comm is None else (), facts=f) for f in _timeout_facts(seen)]
    out += [Observation(OK.DUMP_ASK, facts=f) for f in _dump_asks(seen)]
    out += [Observation(OK.DISAGREEMENT, facts=f) for f in process_op_disagreements(ev)[:2]]
    out += [Observation(OK.CLAIM, ranks=(f.rank, *f.unclaimed), facts=f) for f in claims(ev)]
    out += [Observation(OK.COMPLETED_PAST, facts=f) for f in completed_past(ev)]
    out += [Observation(OK.FR_REPORT, facts=f) for f in fr_report.facts(seen.analyzer)]
    out += [Observation(OK.RAS, facts=f) for f in _ras_facts(seen.ras_said)]
    out += [Observation(OK.HOROVOD, facts=f) for f in horovod.facts(ev)]
    # what the knowledge base knows comes before the generic first error (issue 42): a cause, a host, a symptom
    known = _known_facts(reports or [])
    out += [Observation(OK.KNOWN, facts=f) for f in known if not f.symptom]
    out += [Observation(OK.HOST, facts=f) for f in _host_facts(reports or [])]
    out += [Observation(OK.COVERAGE, facts=f) for f in _coverage_facts(ev.coverage, ev, silence.silent_below(ev))]
    named = [Observation(OK.PEER, ranks=f.ranks if f.mapped is not None else (), facts=f) for f in peers]
    error_facts = _error_facts(seen)
    errors = [Observation(OK.FIRST_ERROR, ranks=f.ranks, facts=f) for f in error_facts]
    # where the first error is itself such a report, whom it names comes first: its reporter is not its subject
    out += named + errors if any(_names_a_peer(f) for f in error_facts[:1]) else errors + named
    # a symptom's meaning follows the first error: what came before it is what it points to
    out += [Observation(OK.KNOWN, facts=f) for f in known if f.symptom]
    out += [Observation(OK.STACK, facts=f) for f in _rankless_stacks(ev)]
    sites = _call_sites(ev)
    out += [Observation(OK.CALL_SITE, ranks=tuple(r for c in sites for r in c.ranks), facts=sites)] if sites else []
    out += [Observation(OK.DUMP, facts=f) for f in _logged_dumps(ev)]
    out += [Observation(OK.TRACEBACK, ranks=(f.rank,) if f.rank is not None else (), facts=f)
            for f in _tracebacks(seen)]
    out += [Observation(OK.TRAIL, facts=f) for f in _trails(ev, seen)]
    not_read = unread.fact(unread.section(ev))
    if not out and not seen.errors and not seen.innermost and \
            not any(h.status in ("exclude", "suspect") for h in reports or []):
        # 'no error' only of lines that were all read: unread lines may be the error (issue 28)
        out.append(Observation(OK.NO_ERROR, facts=NoErrorFact(unread=not_read is not None)))
    if not_read is not None:
        out.append(Observation(OK.UNREAD, facts=not_read))
    if out:
        note = CoverageNoteFact(ev.coverage.complete, bool(ev.coverage.absent))
        out.append(Observation(OK.COVERAGE_NOTE, facts=note))
    return out


def process_op_disagreements(ev: Evidence) -> list[DisagreementFact]:
    """NCCL op lines of processes whose communicator is known only by its pointer (no init line, no rank):
    where two or more processes logged different collectives at the same opCount.

    Said, never judged: without the init lines nothing proves the processes share a
    communicator (a tensor-parallel and a data-parallel group count their own opCounts).
    """
    by_seq: dict[int, dict[tuple, str]] = {}
    for art in ev.artifacts:
        if not art.parsed:
            continue
        for e in art.parsed.events:
            if type(e) is OpEvent and e.seq_kind == "opCount" and e.comm.startswith("ptr:"):
                by_seq.setdefault(e.seq, {}).setdefault((e.origin.host, e.origin.pid, e.origin.device), e.op)
    out = []
    for seq, per in sorted(by_seq.items()):
        ops = Counter(per.values())
        if len(per) < 2 or len(ops) < 2:
            continue
        out.append(DisagreementFact(seq, tuple((pid, dev, op) for (host, pid, dev), op
                                               in sorted(per.items(), key=lambda kv: str(kv[0]))[:6])))
    return out


#: wait lines of two ranks further apart than this are not of one run
ONE_RUN_S = 3600.0


def completed_past(ev: Evidence, limit: int = 2) -> list[CompletedPastFact]:
    """Groups where one rank completed collectives past the one another member still waits in: 'in group
    0, rank 1 completed work up to 125 while rank 0 waits in work 122'.

    Why it matters: a member runs its collectives in order on one stream, so while rank 0 waits in 122 it
    has run nothing of 123; rank 1 completing 123 and on means rank 1's calls were matched with something
    else of rank 0's: the two sequences no longer line up (another op, another size, one more or fewer
    call; seen in accelerate#3250, 2 ranks of one group stuck at 122 and 126). One past is not enough: a
    peer that dies inside a collective can leave some members done with it and others not. Said, never
    judged: which side called the odd one is not in these counters. Skipped for a rank that waits at
    several positions and for wait lines hours apart (lines of several runs); gloo's completions stop
    short of the op it failed in (gloo counts a failed collective as completed).
    """
    done: dict[tuple[str, int], int] = {}
    waits: dict[tuple[str, int], set[int]] = {}
    when: dict[tuple[str, int], tuple] = {}  #: the time of a rank's first wait line, where it has one
    for art in ev.artifacts:
        for e in art.parsed.events if art.parsed else ():
            kind = type(e)
            if kind is not Progress and kind is not ErrorEvent or e.origin.rank is None or not e.comm:
                continue
            key = (e.comm, e.origin.rank)
            if kind is Progress and e.last_completed is not None:
                done[key] = max(done.get(key, -1), e.last_completed)
            elif kind is ErrorEvent and e.kind in TIMEOUT_KINDS and e.seq is not None:
                waits.setdefault(key, set()).add(e.seq)
                stamp = stamps.key(e.timestamp)
                if stamp is not None and (key not in when or stamp < when[key]):
                    when[key] = stamp
    runs = {comm for (comm, _), seqs in waits.items() if len(seqs) > 1}  # a rank stuck twice: several runs
    # per group, each member's completion (capped below its own wait), highest first: a waiter looks only at the
    # members past its wait, so 10,000 ranks waiting at one position cost a sort, not 10,000 x 10,000 pairs
    past_by_comm: dict[str, list[tuple[int, int]]] = {}
    for (cm, r), c in done.items():
        past_by_comm.setdefault(cm, []).append((min(c, min(waits[(cm, r)]) - 1) if (cm, r) in waits else c, r))
    for members in past_by_comm.values():
        members.sort(reverse=True)
    out: list[CompletedPastFact] = []
    for (comm, rank), seqs in sorted(waits.items(), key=lambda kv: min(kv[1])):
        seq = min(seqs)
        if comm in runs or any(names.group(said.comm) == names.group(comm) for said in out):  # one line per group
            continue
        best = None
        for c, r in past_by_comm.get(comm, ()):
            if c <= seq:
                break
            # two ranks' wait lines an hour apart or more are of several runs (a file that collects lines of
            # several jobs, tests/fixtures/host/ranklogs, has them months apart)
            if r != rank and stamps.close(when.get((comm, rank)), when.get((comm, r)), ONE_RUN_S):
                best = (c, r)
                break
        if best is not None:
            out.append(CompletedPastFact(comm, best[1], best[0], rank, seq))
        if len(out) >= limit:
            break
    return out


def _error_fact(e: Any, art: Any = None) -> ErrorFact:
    """An error with who said it, typed for a summary (a launcher's line about a worker names that worker in its
    message, not in its origin). mp.spawn's '-- Process 1 terminated with the following error:' carries the
    exception that worker raised, read from the traceback below it (`art`'s exceptions)."""
    o, data = e.origin, e.data
    raised = _spawn_raised(e, art)
    exit_status = None
    worker = data if type(data) is WorkerReport else None
    if e.kind == ErrorKind.LAUNCHER_EXIT and worker and worker.exitcode is not None and worker.local_rank is not None:
        exit_status = _wait_status(worker.exitcode)  # DeepSpeed's exit line is a whole command line first
    said = " ".join(e.message.split())
    last = data.last_error if type(data) is NcclFailure else None
    if own_reason(last):  # NCCL's own reason first: 'invalid usage' is what c10d made of it
        said = f"{last}; {said}"
    return ErrorFact(e.kind, said, cite(e.message[:300], tool=e.source or "logs",
                     file=art.cite if art is not None else o.file, line=o.line), o.rank, o.pid, o.host,
                     getattr(o, "device", None), e.kind in _LAUNCHER_REPORTS,
                     exit_status, data.local_rank if type(data) in _LOCAL_RANKED else None,
                     raised[0] if raised else None, raised[1] if raised else None)


#: the typed data that says a worker's local rank (a launcher's word on it, a peer's proxy connection)
_LOCAL_RANKED = (WorkerReport, RankStated, LocalPeer)


def _spawn_raised(e: Any, art: Any) -> tuple[str, str | None] | None:
    """(headline, what its category means if the raiser waited on a peer) of the exception mp.spawn's process
    raised, from the traceback under mp.spawn's exit line."""
    worker = e.data
    if type(worker) is not WorkerReport or e.kind != ErrorKind.LAUNCHER_EXIT or not worker.raised:
        return None
    exc = spawn_raised(art, worker.local_rank)  # which exception that is: the exceptions judge's to say
    if exc is None:
        return None
    return exc.headline(), _PEER_WORDS.get(exc.category)  # mp.spawn names the first process it reaps: maybe a waiter


#: exception categories whose wording says the raiser waited on a peer (parsers.readers.exception.categorize)
_PEER_WORDS = {"gloo": "a gloo error a process raises when a peer it talks to is gone",
               "timeout": "a timeout a process raises while it waits on a peer"}


def _wait_status(returncode: int) -> int:
    """A launcher's return code (-11: killed by signal 11) as the wait status describe_status reads."""
    return -returncode & 0x7F if returncode < 0 else (returncode & 0xFF) << 8


def _rankless_stacks(ev: Evidence, limit: int = 3) -> list[StackFact]:
    """What the main thread of each process whose stack was pasted without a rank is doing (a py-spy
    dump of one pid): the stack is evidence even when no line says which rank the process was."""
    by_what: dict[str, list[int]] = {}
    for r in ev.ranks:
        if r.rank is None and r.main_stack is not None and r.record.pid is not None:
            by_what.setdefault(r.activity.text, []).append(r.record.pid)
    return [StackFact(tuple(sorted(pids)), what)
            for what, pids in sorted(by_what.items(), key=lambda kv: -len(kv[1]))[:limit]]


def _logged_dumps(ev: Evidence, limit: int = 3) -> list[DumpFact]:
    """What the main thread of each stack dump found in a log was doing, and the thread a fatal signal hit
    (a segfault's site): a rank that aborts (the watchdog's SIGABRT) or crashes prints a faulthandler
    dump, the stack it died in; a framework's crash diagnostics may paste a py-spy dump of another
    process (its `Process N:` line names the pid). A dump is the rank's that its lines or its file name
    give (evidence._apply_hints), else no rank's."""
    attached = {id(a) for r in ev.ranks for a in r.files}  # a dump file of a known process is a stack of it
    by_what: dict[tuple[str, bool, str], list[tuple[str, Citation]]] = {}
    for art in ev.artifacts:
        if not art.parsed or id(art) in attached:
            continue
        for st in art.parsed.stacks:
            if st.origin is None or not (st.is_main or (st.signalled and st.frames)):
                continue
            tool = "py-spy dump" if st.source == "py-spy" else "faulthandler dump"
            doing = classify(st).text
            by_what.setdefault((tool, st.is_main, doing), []).append(
                (_dump_owner(st.origin), cite(doing, tool=st.source, file=art.cite, line=st.origin.line)))
    return [DumpFact(tool, main, doing, tuple(where))
            for (tool, main, doing), where in sorted(by_what.items(), key=lambda kv: -len(kv[1]))[:limit]]


def _dump_owner(o: Any) -> str:
    """Whose a dump is, as far as its origin tells: a rank, else a local rank or a pid, said as such."""
    if o.rank is not None:
        return f"rank {o.rank}"
    if o.local_rank is not None:
        return f"local rank {o.local_rank}, no global rank printed"
    return f"pid {o.pid}, no rank printed" if o.pid is not None else "no rank printed"


def _call_sites(ev: Evidence) -> tuple[CallSite, ...]:
    """Where each rank's timed-out collective was called from (the Flight Recorder's stack of it, which
    c10d prints under 'Stack trace of the failed collective:'), by the innermost frame of the user's code:
    ranks whose waits come from different lines of code are the first thing to look at."""
    by_site: dict[tuple[str, str | None, int, str], set[int]] = {}
    for art in ev.artifacts:
        for e in art.parsed.events if art.parsed else ():
            if getattr(e, "kind", "") != COLLECTIVE_STACK or e.origin.rank is None:
                continue
            frames = [Frame(function=f, file=path, line=n) for f, path, n in cast(CollectiveStack, e.data).frames]
            if not frames:
                continue
            user = next((f for f in frames if not is_library(f)), None)
            site = (frames[0].function, user.label if user else None, len(frames), frames[-1].label)
            by_site.setdefault(site, set()).add(e.origin.rank)
    sites = sorted(by_site.items(), key=lambda kv: (-len(kv[1]), min(kv[1])))
    return tuple(CallSite(function, user, n, outermost, tuple(sorted(rs)))
                 for (function, user, n, outermost), rs in sites)


@dataclass
class _Seen:
    """What one pass over every log's errors found: the raw material of `observe`."""

    timeouts: dict[tuple[str | None, int | None], set[int]] = field(default_factory=dict)  #: (op, seq) -> ranks
    #: timeouts whose line names only the rank inside a subgroup (`[PG ID 2 PG GUID 5(mesh_ulysses) Rank 0]`)
    group_timeouts: dict[tuple[str, str | None, int | None], set[int]] = field(default_factory=dict)
    #: the first error with a time: (stamps.key, it, the stamp as shown)
    first: tuple[tuple, ErrorFact, str] | None = None
    first_ranks: set[int] = field(default_factory=set)  #: the ranks with an error at that very time
    dumped_for: dict[int, set[int]] = field(default_factory=dict)  #: rank whose timeout asked for dumps -> ranks asked
    analyzer: list[ErrorEvent] = field(default_factory=list)  #: the Flight Recorder analyzer's report
    ras_said: list[RasFinding] = field(default_factory=list)  #: a RAS view's findings, said as such
    earliest: tuple[ErrorEvent, Any] | None = None  #: the first error in file order, and its artifact
    spawn_exit: tuple[ErrorEvent, Any] | None = None  #: mp.spawn's own word on which process failed, and how
    #: torchelastic's Root Cause entry: the failure its agent observed first (a tie of times does not say more)
    root_cause: tuple[ErrorEvent, Any] | None = None
    innermost: dict[int | None, ErrorEvent] = field(default_factory=dict)  #: last traceback frame per rank (or pid)
    #: ranks (None: a line without one) that say they waited past a timeout: a watchdog's, gloo's or NCCL's own
    waited_out: set[int | None] = field(default_factory=set)
    errors: int = 0
    trails: int = 0  #: NCCL's 'file:line -> code' lines: an error returned up the call chain

    def add(self, e: ErrorEvent, art: Any) -> None:
        """One error line: counted, and kept where it is one of the facts the summary says."""
        if e.kind == fr_report.KIND:  # the analyzer's findings are said as such
            self.analyzer.append(e)
            return
        rank = e.origin.rank
        if e.kind == ErrorKind.PYTHON_FRAME:  # a frame is where an error happened, not one more error
            self.innermost[rank if rank is not None else e.origin.pid] = e
            return
        if e.kind in WARNING_KINDS:  # a warning is no error: never the first error of the rank that printed it
            return
        self.errors += 1
        if self.earliest is None or (self.earliest[0].kind == ErrorKind.LAUNCHER_SIGNAL
                                     and e.kind != ErrorKind.LAUNCHER_SIGNAL):
            self.earliest = (e, art)  # a launcher killing the others is the end of its story
        if (self.spawn_exit is None and e.kind == ErrorKind.LAUNCHER_EXIT
                and cast(WorkerReport, e.data).launcher == "mp.spawn"):
            self.spawn_exit = (e, art)
        if self.root_cause is None and e.kind == ErrorKind.ROOT_CAUSE:
            self.root_cause = (e, art)
        asker = cast(DumpAsked, e.data).from_rank if e.kind == ErrorKind.DUMP_SIGNAL else None
        if asker is not None and rank is not None:
            self.dumped_for.setdefault(asker, set()).add(rank)
        if e.kind in TIMEOUT_KINDS or e.kind in PEER_TIMEOUTS:
            self.waited_out.add(rank)
        if e.kind in TIMEOUT_KINDS and rank is not None:
            self.timeouts.setdefault((e.op, e.seq), set()).add(rank)
        elif (e.kind in TIMEOUT_KINDS and e.comm
              and (group_rank := cast(CollectiveTimeout, e.data).group_rank) is not None):
            self.group_timeouts.setdefault((e.comm, e.op, e.seq), set()).add(group_rank)
        when = stamps.key(e.timestamp)
        if when is not None and (self.first is None or when < self.first[0]):
            # without a rank, who said it (pid, host, device) and what: a bare kind names no one
            self.first = (when, _error_fact(e, art), stamps.shown(e.timestamp or ""))  # a stamp: it has a key
            self.first_ranks = set()
        if when is not None and self.first is not None and when == self.first[0] and rank is not None:
            self.first_ranks.add(rank)


def _seen(ev: Evidence, not_counted: frozenset[tuple[str, int]] = frozenset()) -> _Seen:
    """The errors of every file, less those on the kernel lines the host judge did not count (`not_counted`, its
    reports' decision: from before the job started on their host), which are no error of the job."""
    seen = _Seen()
    for art in ev.artifacts:
        if not art.parsed:
            continue
        seen.trails += art.parsed.facts.get("error_trails") or 0
        for e in art.parsed.events:
            if type(e) is RasFinding:
                seen.ras_said.append(e)
            elif (type(e) is ErrorEvent and e.kind not in INFO_KINDS
                  and (e.origin.file, e.origin.line) not in not_counted):
                seen.add(e, art)
    return seen


def timed_out(ev: Evidence) -> tuple[bool, set[int]]:
    """(whether any watchdog line says a rank waited in a collective past its timeout: time evidence of a
    hang; the global ranks that did, where the lines print them): the hung scope a post-mortem can see
    (a group whose ranks never time out kept running)."""
    seen = _seen(ev)
    ranks = set().union(*seen.timeouts.values()) if seen.timeouts else set()
    stalled = _horovod_stalled(ev)
    waited = {r for r in seen.waited_out if r is not None}
    return bool(seen.timeouts or seen.group_timeouts or seen.waited_out or stalled), ranks | waited


def _horovod_stalled(ev: Evidence) -> bool:
    """Horovod's stall inspector reports an op only once ranks waited for it past its check time (60 s by
    default, HOROVOD_STALL_CHECK_TIME_SECONDS): time evidence of a hang, as a watchdog timeout is."""
    return any(type(e) is ErrorEvent and e.kind in (ErrorKind.HOROVOD_STALL, ErrorKind.HOROVOD_STALL_WARNING)
               for art in ev.artifacts if art.parsed for e in art.parsed.events)


def _timeout_facts(seen: _Seen) -> list[TimeoutFact]:
    """Who timed out in which collective: the three largest groups, global ranks then subgroups'."""
    timeouts = dict(seen.timeouts)
    for _, seq in [k for k in timeouts if k[0] is None]:  # a line without the op says no more than one with it
        named = set().union(*(rs for (o, s), rs in timeouts.items() if o is not None and s == seq))
        if timeouts[(None, seq)] <= named:
            del timeouts[(None, seq)]
    facts = [TimeoutFact(tuple(sorted(rs)), op, seq)
             for (op, seq), rs in sorted(timeouts.items(), key=lambda kv: -len(kv[1]))[:3]]
    for (comm, op, seq), rs in sorted(seen.group_timeouts.items(), key=lambda kv: -len(kv[1]))[:3]:
        facts.append(TimeoutFact(tuple(sorted(rs)), op, seq, comm))
    return facts


def _dump_asks(seen: _Seen) -> list[DumpAskFact]:
    return [DumpAskFact(origin_rank, tuple(sorted(asked)))
            for origin_rank, asked in sorted(seen.dumped_for.items(), key=lambda kv: -len(kv[1]))[:2]]


def _coverage_facts(cov: Coverage, ev: Evidence, silent: tuple[list[int], int] | None = None) -> list[CoverageFact]:
    """Who is silent, where that means something; or, without a job size, whose lines these are, and which
    ranks below a waiting one they leave out (`silent`, parsers.judges.logs.silence: said, never weighed)."""
    if cov.world_size and not cov.complete and cov.absent:
        fact = silence.absent_fact(ev, cov)
        # 'no line from 2 of 2 ranks' of files whose lines name no global rank says only that (a size a launch
        # line states, issue 42, and rank-less lines): nothing about who is missing
        return [fact] if cov.reporting or fact.role != "absent" else []
    quiet, top = (tuple(silent[0]), silent[1]) if silent else ((), None)
    if not cov.world_size and cov.reporting:
        return [CoverageFact("reporting", tuple(sorted(cov.reporting)), silent=quiet, top=top)]
    return [CoverageFact("silent", silent=quiet, top=top)] if silent and not cov.world_size else []


def _error_facts(seen: _Seen) -> list[ErrorsFact]:
    """The first error (by time where lines have one, else in file order), and mp.spawn's word when it is another."""
    parts = []
    said: ErrorEvent | None = None
    if seen.first is not None and seen.errors > 1 and len(seen.first_ranks) > 1:
        root = seen.root_cause  # among ranks tied to the second, the agent's own order is the one order said
        said_first = _error_fact(*root) if root is not None and root[0].origin.rank in seen.first_ranks else None
        parts.append(ErrorsFact("tied", said_first, at=seen.first[2], ranks=tuple(sorted(seen.first_ranks))))
    elif seen.first is not None and seen.errors > 1:
        parts.append(ErrorsFact("first-timed", seen.first[1], at=seen.first[2]))
    elif not seen.timeouts and not seen.group_timeouts and seen.earliest is not None:
        said = seen.earliest[0]
        parts.append(ErrorsFact("first" if seen.errors > 1 else "one", _error_fact(*seen.earliest)))
    if seen.spawn_exit is not None and seen.spawn_exit[0] is not said:  # why the job ended, when that is another
        parts.append(ErrorsFact("ended", _error_fact(*seen.spawn_exit)))
    return parts


def _tracebacks(seen: _Seen, limit: int = 3) -> list[TracebackFact]:
    return [TracebackFact(f.origin.rank, f.origin.pid, f.message) for f in list(seen.innermost.values())[:limit]]


def _host_facts(reports: list) -> list[HostFact]:
    """Hosts the host judge would exclude or suspects, with the first line that says why."""
    bad = [h for h in reports if h.status in ("exclude", "suspect") and h.reasons]
    # the host whose finding the files show first leads (not the first host name in sort order)
    bad.sort(key=lambda h: (h.status != "exclude", h.reasons[0].first.source or "", h.reasons[0].first.line_no or 0))
    return [HostFact(None if h.host == UNKNOWN_HOST else h.host, h.status, h.reasons[0].entry.title,
                     cite(h.reasons[0].first.evidence[:300], tool="knowledge base", file=h.reasons[0].first.source,
                          line=h.reasons[0].first.line_no))
            for h in bad]


#: known failures one summary lists (each entry once, its first subject: the rest are in the hosts section)
KNOWN_LIMIT = 3


def _known_facts(reports: list) -> list[KnownFact]:
    """Knowledge-base findings with no host to blame that name a cause (the code's, the job's set-up) or say
    a symptom's meaning: each entry once, causes first, worst first. Why: a known failure found anywhere must
    reach the verdict, not wait in a host section while the summary says 'first error: <its exception>'."""
    seen: dict[str, KnownFact] = {}
    groups = sorted((g for r in reports for g in r.groups if g.entry.host == "none"
                     and (g.entry.is_cause or g.entry.role == "symptom") and g.entry.severity != "info"),
                    key=lambda g: (not g.entry.is_cause, -g.entry.rank))
    for g in groups:
        host = next(r.host for r in reports if g in r.groups)
        if g.entry.id in seen:
            continue
        subject = g.first.subject if g.first.subject.startswith(("rank ", "pid ")) else None
        seen[g.entry.id] = KnownFact(
            g.entry.title, g.entry.meaning, g.entry.action_text, symptom=not g.entry.is_cause, who=subject,
            host=None if host == UNKNOWN_HOST else host, peer=g.first.groups.get("peer"), count=g.count,
            citation=cite(g.first.evidence[:300], tool="knowledge base", file=g.first.source, line=g.first.line_no))
        if len(seen) >= KNOWN_LIMIT:
            break
    return list(seen.values())


def _ras_facts(findings: list[RasFinding], limit: int = 3) -> list[RasFact]:
    """What RAS reports, one fact per communicator and kind, for a summary that names no culprit.

    Why the summary needs it: a RAS view whose listed ranks are AHEAD (the others lag and are not listed,
    NVIDIA/nccl#1911) blames no one, yet it is not 'no error': it says the communicator's counts differ and
    where the listed ranks are. Repeated views (STATUS, VERBOSE STATUS, JSON) say one thing once."""
    seen: dict[tuple[str, str], dict] = {}
    for f in findings:
        if f.kind not in ("behind", "ahead", "missing", "dead"):
            continue
        slot = seen.setdefault((f.comm, f.kind), {"ranks": set(), "where": set(), "op": f.op, "count": f.op_count})
        if f.comm_rank is not None:
            slot["ranks"].add(f.comm_rank)
        if f.pid is not None:
            slot["where"].add(f"pid {f.pid}" + (f" on {f.host}" if f.host else ""))
    return [RasFact(comm, kind, tuple(sorted(slot["ranks"])), slot["op"], slot["count"], tuple(sorted(slot["where"])))
            for (comm, kind), slot in list(seen.items())[:limit]]


def _trails(ev: Evidence, seen: _Seen) -> list[TrailFact]:
    """NCCL error returns with no WARN: said, with the caveat that at init they are often probes."""
    if not seen.trails or seen.errors:
        return []
    first_trail = next((a.parsed.facts["first_trail"] for a in ev.artifacts
                        if a.parsed and a.parsed.facts.get("first_trail")), None)
    return [TrailFact(seen.trails, first_trail)]


def _names_a_peer(f: ErrorsFact) -> bool:
    """The error said first is a lost connection or a size mismatch with a peer (what a PeerFact reads)."""
    return f.error is not None and f.error.kind in (ErrorKind.CONNECTION_CLOSED, ErrorKind.CONNECTION_RESET,
                                                    ErrorKind.SIZE_MISMATCH)


def judge(ev: Evidence, ctx: JudgeContext) -> Findings:
    """What the files show (the one protocol), as typed observations; the host judge's reports (`ctx`) say
    which hosts it would exclude or suspects, and the named judge's the peers named by address."""
    return Findings("logs", observations=observe(ev, ctx.of("hosts").reports, ctx.of("named").peers),
                    judge="observations")

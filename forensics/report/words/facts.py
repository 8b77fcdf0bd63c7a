"""The words of typed observations: what 'the evidence shows' says, worded here from typed facts.

Why a module of its own: a judge says what it found as data (parsers/model/findings.py: a host the host
judge would exclude and the line that says why, a traceback's innermost frame, what a RAS view says of a
communicator, stacks and dumps with no rank, where timed-out collectives were called from, who timed out in
which op, a timeout set too short, the Flight Recorder analyzer's and Horovod's findings, whose lines the files
hold); how that reads to an on-call engineer is presentation's, and nothing reads these words back.
"""

from __future__ import annotations

from parsers.judges.logs import names
from parsers.judges.logs.fr_report import where as fr_where
from parsers.model.events import describe_status
from parsers.model.findings import (CallSite, ClaimFact, CompletedPastFact, CoverageFact, CoverageNoteFact,
                                    DisagreementFact, DumpAskFact, DumpFact, ErrorFact, ErrorsFact, FrReportFact,
                                    HorovodFact, HostFact, KnownFact, NoErrorFact, Observation, PeerFact, RasFact,
                                    SettingFact, StackFact, TimeoutFact, TracebackFact, TrailFact, UnreadFact)
from parsers.model.ranges import fold

#: how many of a kind's places or sites one line names
LIMIT = 3
#: lines not understood that one line quotes
UNREAD_SHOWN = 2


def observed(o: Observation) -> str:
    """One observation in words, from its typed facts (every kind has them: nothing a judge wrote is shown)."""
    f = o.facts
    if isinstance(f, tuple) and f and isinstance(f[0], CallSite):
        return call_sites(f)
    return _WORDS[type(f)](f)


def host(f: HostFact) -> str:
    """'host gpu-b7 is to exclude: GPU has fallen off the bus [hosts/gpu-b7/kernel.log:12]'."""
    who = "the host of these lines (none names it)" if f.host is None else f"host {f.host}"
    status = "to exclude" if f.status == "exclude" else "suspect"  # 'host X is exclude' read as a typo
    c = f.citation
    return f"{who} is {status}: {f.title}" + (f" [{c.file}:{c.line}]" if c is not None and c.line else "")


def known(f: KnownFact) -> str:
    """'known failure (rank 3): DDP: parameters that got no gradient: <what it means>; recommended action: fix
    the code ...'; a symptom says its meaning and no action: 'symptom (on hostname-test, peer 172.36.143.59<44206>,
    2x): NCCL: InfiniBand work request flushed: Work request flushed (status 5): ...'."""
    where = ", ".join(x for x in (f.who, f"on {f.host}" if f.host else None, f"peer {f.peer}" if f.peer else None,
                                  f"{f.count}x" if f.count > 1 else None) if x)
    text = f"{'symptom' if f.symptom else 'known failure'}{f' ({where})' if where else ''}: {f.title}: {f.meaning}"
    if not f.symptom:
        text += f" Recommended action: {f.action}"
    c = f.citation
    return text + (f" [{c.file}:{c.line}]" if c is not None and c.line else "")


def errors(f: ErrorsFact) -> str:
    """'first error: nccl-timeout at rank 3 (12-01 05:31:43.444)', 'one error: ...', 'why the job ended: ...'."""
    if f.role == "tied":
        said = f"first errors at one time ({f.at}), from ranks {fold(f.ranks)}: their times do not say which came first"
        if f.error is not None and f.error.rank is not None:  # torchelastic's Root Cause among them
            said += f"; torchelastic saw rank {f.error.rank} exit first (its Root Cause)"
        return said
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
    who = " ".join(w for w in (f"rank {e.rank}" if e.rank is not None else "",
                               f"pid {e.pid}" if e.pid is not None else "", f"on {e.host}" if e.host else "",
                               f"device {e.device}" if e.device is not None else "") if w)
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
    return (f"pid{'s' if len(f.pids) > 1 else ''} {fold(f.pids)} (no rank printed): its main-thread stack shows it "
            f"{f.doing}")


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


def _ranks(ranks: "tuple[int, ...] | list[int]") -> str:
    """'rank 3' / 'ranks 0-2,4'."""
    return f"rank{'s' if len(set(ranks)) > 1 else ''} {fold(ranks)}"


def _op_named(op: str | None, seq: int | None) -> str:
    """'ALLREDUCE SeqNum 808', or 'a collective' when the line names no op."""
    return (op.upper() if op else "a collective") + (f" SeqNum {seq}" if seq is not None else "")


def timeout(f: TimeoutFact) -> str:
    """'ranks 0-2,4 timed out in ALLREDUCE SeqNum 80', or '... of group 3 (no global rank printed) timed out in ...'."""
    of = f" of {names.group(f.comm)} (no global rank printed)" if f.comm is not None else ""
    return f"{_ranks(f.ranks)}{of} timed out in {_op_named(f.op, f.seq)}"


def setting(f: SettingFact) -> str:
    """A collective timeout too short for any healthy collective: the cause is the setting, no rank."""
    shown = ", ".join(f"{ms} ms" for ms in f.timeouts_ms[:4])
    who = f" ({_ranks(f.ranks)})" if f.ranks else ""
    return (f"the collective timeout applied was {shown}{who}: shorter than a healthy collective can take (a group's "
            f"first one also sets up its NCCL communicator), so the timeout says nothing about any rank; the cause is "
            f"the setting (init_process_group(timeout=...) or the framework's option for it)")


def dump_ask(f: DumpAskFact) -> str:
    return (f"{_ranks(f.asked)} dumped because rank {f.origin}'s collective timed out (its watchdog asks every rank "
            "to dump)")


def trail(f: TrailFact) -> str:
    """NCCL error returns with no WARN, with the caveat that at init they are often probes."""
    return (f"NCCL logged {f.count} error return(s) ('file:line -> code'" + (f", first: {f.first}" if f.first else "")
            + ") and no WARN; at init such returns are often probes of a transport the host lacks")


def silent(ranks: "tuple[int, ...]", top: int, lead: str = "no line here from") -> str:
    """'no line here from rank 0, though rank 3 times out (ranks count from 0, so it is in the job)'."""
    many = len(ranks) > 1
    return (f"{lead} rank{'s' if many else ''} {fold(list(ranks))}, though rank {top} times out "
            f"(ranks count from 0, so {'these are' if many else 'it is'} in the job)")


def coverage(f: CoverageFact) -> str:
    """Whose lines these are, where that means something (see CoverageFact's roles)."""
    if f.role == "unnamed":  # how many other processes printed lines that name no rank at all, the files do not say
        return (f"these files hold lines from processes of the job's {f.world}-rank NCCL communicator "
                f"(its ranks {fold(list(f.ranks))} among them), none with a global rank printed")
    if f.role == "absent":
        return f"these files hold no line from {f.absent} of {f.world} ranks (e.g. rank {f.first})"
    if f.role == "reporting":
        none_from = f", {silent(f.silent, f.top, 'none from')}" if f.silent else ""
        return f"these files hold lines from {_ranks(f.ranks)} only{none_from}; the job's size is not stated"
    return silent(f.silent, f.top)


def coverage_note(f: CoverageNoteFact) -> str:
    """How much of the job these files cover, in words (was 'coverage partial', which a user had to guess at)."""
    if not f.complete:
        return "these files may not hold every rank: a rank with no lines here is not proof it is missing"
    if f.absent:
        return "these files hold all but a few ranks of the job"
    return "these files hold every rank of the job"


def no_error(f: NoErrorFact) -> str:
    """'no error' only of lines that were all read: unread lines may be the error (issue 28)."""
    return "no line that was understood reports an error" if f.unread else "these lines report no error"


def unread(f: UnreadFact) -> str:
    """'3 lines not understood (first: line 2 "..."; line 5 "...")'."""
    shown = "; ".join(f"line {n} \"{text[:80]}\"" for n, text in f.first[:UNREAD_SHOWN])
    return f"{f.count} line{'s' if f.count > 1 else ''} not understood" + (f" (first: {shown})" if shown else "")


def disagreement(f: DisagreementFact) -> str:
    """Said, never judged: without the init lines nothing proves the processes share a communicator."""
    who = ", ".join(f"pid {pid}" + (f" (device {dev})" if dev is not None else "") + f" {op}"
                    for pid, dev, op in f.processes)
    return (f"processes disagree at opCount {f.op_count:x}: {who} "
            f"(a collective mismatch if they share a communicator; these lines do not say)")


def completed_past(f: CompletedPastFact) -> str:
    """'in the default group, rank 1 completed work up to 125 while rank 0 waits in work 122: ...'."""
    return (f"in {names.group(f.comm)}, rank {f.rank} completed work up to {f.done} while rank {f.waiter} "
            f"waits in work {f.seq}: its collectives past {f.seq} were matched with something else of rank "
            f"{f.waiter}'s, so the two call sequences no longer line up (which side is odd is not in these lines)")


def fr_report(f: FrReportFact) -> str:
    """What one finding of the Flight Recorder analyzer shows, for a summary that names no culprit."""
    if f.role == "undecided":
        return (f"the Flight Recorder analyzer had no dump from rank {f.ranks[0]} and could not decide {f.count} "
                "collective(s)")
    if f.role == "gave-up":
        return f"it stopped checking group {f.group} after too many mismatches"
    where = fr_where(f.op, f.seq, f.group)
    of = f" of {f.size}" if f.size else ""
    if f.role == "not-joined":
        text = (f"the Flight Recorder analyzer finds {_ranks(f.ranks)}{of} never recorded {where}" if f.ranks
                else f"the Flight Recorder analyzer finds not all ranks joined {where}")
        if not f.minority:
            text += " (not a minority: the ranks that did record it may be the ones that ran ahead)"
        if f.no_dump:
            text += f"; it had no dump from ranks {fold(f.no_dump)}"
    elif f.role == "culprits":
        text = (f"the Flight Recorder analyzer finds {_ranks(f.ranks)}{of} differ in {where} "
                f"({', '.join(f.kinds[:3])}) from the rank it compared against, which may itself be the odd one"
                + ("" if f.complete else "; the list may be cut"))
        if "COLLECTIVE_STATE_MISMATCH" in f.kinds:
            text += " (a state mismatch: the listed rank's entry is in another state than the reference's)"
    else:
        text = f"the Flight Recorder analyzer reports errors in {where} (no 'Culprit rank' line was read)"
    return text + (f"; state {f.state}" if f.state else "")


def _ops(f: HorovodFact) -> str:
    """'3 ops' / '1 op, reported 11 times': distinct tensors, and how many entries named them."""
    return f"{f.ops} op{'s' if f.ops > 1 else ''}" + (f", reported {f.reports} times" if f.reports > f.ops else "")


def horovod(f: HorovodFact) -> str:
    """What Horovod's stall reports show when they name no one rank, and its timeline setting errors."""
    if f.role == "timeline" and f.directory:
        return (f"Horovod could not open its timeline file {f.path}: HOROVOD_TIMELINE names a directory "
                "(it must name a file, which rank 0 writes); the cause is the setting, no rank")
    if f.role == "timeline":
        return f"Horovod could not open its timeline file {f.path} (HOROVOD_TIMELINE): no timeline is written"
    if f.role == "several":
        return (f"Horovod's stall inspector names ranks {fold(f.ranks)} missing from every stalled op "
                f"({_ops(f)}): several ranks, so no one of them is named")
    if f.role == "split":
        return (f"Horovod's stall inspector names different ranks missing from different ops (ranks "
                f"{fold(f.ranks)}, {_ops(f)}): no rank is missing from all of them")
    if f.role == "left-out":
        return (f"Horovod's stall inspector leaves {_ranks(f.ranks)} out of every ready list ({_ops(f)}); the job's "
                "size is not stated, so ranks above the highest ready one may be missing too and none is named")
    if f.role == "varied":
        return f"Horovod's stall inspector's ready lists leave out different ranks from op to op ({_ops(f)})"
    return (f"Horovod's stall inspector lists the ranks ready for {_ops(f)}; the job's size is not stated, "
            "so which ranks are missing is not said")


def claim(f: ClaimFact) -> str:
    """A rank two processes claim, with both sources; the ranks none claims, which one of them may be."""
    who = ", ".join(f"{host} pid {pid}" for host, pid in f.claimants)
    none = f"; no process claims {_ranks(list(f.unclaimed))}, which one of them may be" if f.unclaimed else ""
    return f"rank {f.rank} is claimed by {len(f.claimants)} processes ({who}){none}"


def peer(f: PeerFact) -> str:
    """Ranks that name a peer by address, and whom the files pair it with: 'ranks 1-2 lost their connection to
    rank 3, closed by the peer (10.1.2.3: its own NCCL log states that address): they only report the loss';
    'rank 6 received 131072 bytes from rank 5 where it posted 65536 (...)'; unmapped: the address, and that no
    file maps it."""
    procs = [f"pid {pid}" + (f" on {host}" if host else "") for host, pid in f.processes]
    who = _ranks(f.reporters) if f.reporters else (", ".join(procs) if procs else "a process")
    many = len(f.reporters) > 1 or (not f.reporters and len(procs) > 1)
    if f.mapped is not None and f.how == "links":  # no address: the one rank its connections leave
        name = f"rank {f.mapped}"
        note = f"NCCL's line names no peer; of the ranks NCCL connects with {who}, only it sends there"
        if f.side == "sender":
            note = f"NCCL's line names no peer; of the ranks NCCL connects with {who}, only it receives there"
    elif f.mapped is not None:
        name = f"rank {f.mapped}" + (f" on {f.host}" if f.host and f.how.startswith("address") else "")
        note = f"{f.addr}: " + ("its own NCCL log states that address" if f.how.startswith("address")
                                else f"the host {f.host} holds it")
        if f.how.endswith("+links") and f.reporters:
            note += f"; of the ranks there, NCCL connects only it with {_ranks(f.reporters)}"
    elif f.ranks:
        name = f"host {f.host}" if f.host else f"the peer at {f.addr}"
        note = f"{f.addr}: {_ranks(f.ranks)} there; the lines do not say which"
    elif f.host:
        name, note = f"a process on host {f.host}", f"{f.addr}: a host of that name; no line says which rank"
    elif not f.addr:
        name, note = "its peer", "NCCL's line names no peer, and its connections do not say which"
    else:
        name, note = f"the peer at {f.addr}", "no file maps that address to a rank or host"
    if f.what == "size":
        if f.side == "sender":
            said = f"{who} sent {f.sent} bytes to {name}, which posted {f.posted}"
        else:
            said = f"{who} received {f.sent} bytes from {name} where {'they' if many else 'it'} posted {f.posted}"
        return f"{said} ({note}): a size mismatch (NCCL); the two sides called different collectives or sizes there"
    lost = "lost their connection" if many else "lost its connection"
    only = "they only report the loss" if many else "it only reports the loss"
    return f"{who} {lost} to {name}, {'closed' if f.what == 'closed' else 'reset'} by the peer ({note}): {only}"


#: the wording of each typed fact
_WORDS = {HostFact: host, KnownFact: known, ErrorsFact: errors, TracebackFact: traceback, RasFact: ras,
          StackFact: stack, DumpFact: dump, TimeoutFact: timeout, SettingFact: setting, DumpAskFact: dump_ask,
          TrailFact: trail, CoverageFact: coverage, CoverageNoteFact: coverage_note, NoErrorFact: no_error,
          UnreadFact: unread, DisagreementFact: disagreement, CompletedPastFact: completed_past,
          FrReportFact: fr_report, HorovodFact: horovod, ClaimFact: claim, PeerFact: peer}


def evidence_gap(gap: dict) -> str:
    """A post-mortem's missing piece (parsers.judges.gaps), with how to have it next time."""
    if gap.get("kind") == "no-recorder-state":
        return ("no recorder state in these files: who waits on whom inside NCCL, and since when, is unknown here "
                "(a live collect reads it from /dev/shm); load the recorder (`forensics env --recorder`: "
                "NCCL_PROFILER_PLUGIN, FORENSICS_RECORDER_COPY_DIR) and it copies its state beside the NCCL logs "
                "when the job dies")
    if gap.get("kind") == "fr-without-timing":
        ranks = [r for r in gap.get("ranks") or [] if isinstance(r, int)]
        whose = f" (ranks {fold(ranks)})" if ranks else ""
        return (f"Flight Recorder dumps without timing{whose}: an op still 'scheduled' may be running on the GPU or "
                "queued behind other work, so a long kernel on one rank's stream cannot be told from its peers' "
                "waits; set TORCH_NCCL_ENABLE_TIMING=1 (`forensics env`)")
    if gap.get("kind") == "no-stacks":
        ranks = [r for r in gap.get("ranks") or [] if isinstance(r, int)]
        one = len(ranks) == 1
        return (f"no Python stacks of rank{'' if one else 's'} {fold(ranks)}: the others' output holds "
                f"faulthandler's dump of every thread (printed as a rank aborts) and {'its' if one else 'theirs'} "
                f"none, so what {'its' if one else 'their'} threads did (a lock, a thread of its own, a slow step) "
                "is unknown here; a live `forensics collect` reads them with py-spy while the job hangs")
    return f"missing evidence: {gap.get('kind')}"

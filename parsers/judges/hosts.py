"""Judges each host healthy / suspect / exclude from its evidence and the knowledge base.

Many hangs are host faults seen from far away: a GPU off the bus, an uncorrectable
ECC error, a flapping IB port. This module reads a bundle's host evidence (and
the ranks' own logs), matches it against the knowledge base, and says per host
what was found, how bad it is and what to do. It also turns those findings into
Suspects, so `forensics analyze` can rank a rank on a broken host above ranks
that merely wait.
"""

from __future__ import annotations

import re
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Iterable

from parsers.judges import gpu_binding
from parsers.judges.kernel_times import JobStart, KernelEventLine, job_starts, lines_before_start, split_by_start
from parsers.gather.evidence import Artifact, Evidence, HostEvidence, RankEvidence
from parsers.judges.same_fault import same_fault_findings
from parsers.knowledge import ACTION_TEXT, SEVERITIES, Finding, KnowledgeBase, load
from parsers.model.events import ErrorEvent, ErrorKind, UNKNOWN_HOST
from parsers.model.findings import Findings, JudgeContext, ReasonClass, Suspect, cite
from parsers.model.manifest import RankRecord

HEALTHY, SUSPECT, EXCLUDE, UNKNOWN = "healthy", "suspect", "exclude", "unknown"
STATUSES = (HEALTHY, SUSPECT, EXCLUDE, UNKNOWN)

#: Kinds of rank files that are text logs worth matching (stdout/stderr, NCCL debug files).
RANK_LOG_KINDS = ("rank-log", "nccl-log")
#: Suspect confidence by severity of the host finding behind it (see host_suspects).
HOST_CONFIDENCE = {"critical": 0.96, "error": 0.85, "warning": 0.55, "info": 0.2}
#: Findings this many or more on one (entry, subject) are shown once, with a count.
_ACTION_ORDER = ("hardware-ticket", "exclude-host-and-restart", "restart-from-checkpoint", "fix-code")


@dataclass
class FindingGroup:
    """The same entry matched on the same subject, possibly many times (Xid storms)."""

    first: Finding
    last: Finding
    count: int = 1

    @property
    def entry(self):
        return self.first.entry

    def to_dict(self) -> dict[str, Any]:
        out = self.first.to_dict()
        out["count"] = self.count
        out["action_text"] = self.entry.action_text
        if self.count > 1:
            out["last_evidence"] = self.last.evidence
            out["last_line"] = self.last.line_no
        return out

    def describe(self) -> str:
        """'critical xid-79 (gpu ..., 3x): GPU has fallen off the bus [hosts/a/kernel.log:12]'."""
        where = (f" [{self.first.source}:{self.first.line_no}]" if self.first.line_no
                 else (f" [{self.first.source}]" if self.first.source else ""))
        times = f", {self.count}x" if self.count > 1 else ""
        return f"{self.entry.severity} {self.entry.id} ({self.first.subject}{times}): {self.entry.title}{where}"


@dataclass
class HostReport:
    """What one host's evidence says: status, grouped findings, and what could not be read."""

    host: str
    status: str = HEALTHY
    groups: list[FindingGroup] = field(default_factory=list)
    facts: dict[str, dict[str, Any]] = field(default_factory=dict)
    missing: list[str] = field(default_factory=list)
    #: collectors skipped: no such hardware, optional module absent
    not_applicable: list[str] = field(default_factory=list)
    collected: list[str] = field(default_factory=list)
    #: kernel findings left out as older than the job, or counted with no time to compare (parsers.judges.kernel_times)
    kernel_times: list[str] = field(default_factory=list)
    #: (file, line) of the kernel lines from before the job started on this host (kernel_times): no error of the
    #: job's, so no first error either (parsers.judges.observations reads this decision)
    not_counted: frozenset[tuple[str, int]] = frozenset()

    @property
    def reasons(self) -> list[FindingGroup]:
        """Groups that affect the host verdict, worst first."""
        return [g for g in self.groups if g.entry.host != "none"]

    @property
    def actions(self) -> list[str]:
        """Distinct actions called for by the reasons, most drastic first."""
        found = {g.entry.action for g in self.reasons}
        return [a for a in _ACTION_ORDER if a in found]

    @property
    def action(self) -> str | None:
        """The one action an automated restart job should take for this host."""
        if self.status == EXCLUDE:
            return "exclude-host-and-restart"
        return self.actions[0] if self.status == SUSPECT and self.actions else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "host": self.host,
            "status": self.status,
            "action": self.action,
            "action_text": ACTION_TEXT.get(self.action or "", None),
            "actions": self.actions,
            "reasons": [g.to_dict() for g in self.reasons],
            "other_findings": [g.to_dict() for g in self.groups if g.entry.host == "none"],
            "evidence_collected": list(self.collected),
            "evidence_missing": list(self.missing),
            "not_applicable": list(self.not_applicable),
            "kernel_times": list(self.kernel_times),
            "facts": self.facts,
        }


def group_findings(findings: Iterable[Finding]) -> list[FindingGroup]:
    """Fold repeats of one entry on one subject; worst severity first, then first seen."""
    groups: "OrderedDict[tuple[str, str], FindingGroup]" = OrderedDict()
    for f in findings:
        key = (f.entry.id, f.subject)
        if key in groups:
            groups[key].count += 1
            groups[key].last = f
        else:
            groups[key] = FindingGroup(first=f, last=f)
    return sorted(groups.values(), key=lambda g: -SEVERITIES.index(g.entry.severity))


def _status(groups: list[FindingGroup], has_evidence: bool) -> str:
    effects = {g.entry.host for g in groups}
    if "exclude" in effects:
        return EXCLUDE
    if "suspect" in effects:
        return SUSPECT
    return HEALTHY if has_evidence else UNKNOWN


def host_report(host: HostEvidence, kb: KnowledgeBase, rank_findings: Iterable[Finding] = (),
                job: JobStart | None = None, events: Iterable[KernelEventLine] = ()) -> HostReport:
    """The report of one host: its facts and kernel lines matched against the knowledge base; a kernel line
    from before the job's processes on the host started (`job`) is said and not counted, a finding's or one read
    as an error event (`events`, kernel_events) alike."""
    report = HostReport(host=host.host, missing=list(host.missing), not_applicable=list(host.not_applicable),
                        collected=list(host.collected))
    report.facts = {subject: dict(facts) for subject, facts in host.facts.items()}
    if host.collectors:
        report.facts["collectors"] = {f"collector.{name}.status": status for name, status in host.collectors.items()}
    findings = _kernel_findings(host, kb, job, events, report)
    for subject, facts in report.facts.items():
        findings += kb.match_facts(subject, facts, source=_fact_source(subject))
    findings += list(rank_findings)
    report.groups = group_findings(findings)
    report.status = _status(report.groups, bool(report.collected))
    return report


def _kernel_findings(host: HostEvidence, kb: KnowledgeBase, job: JobStart | None, events: Iterable[KernelEventLine],
                     report: HostReport) -> list[Finding]:
    """The kernel findings of `host` that count against the job; what its start left out is said in the report
    (`kernel_times`) and its lines listed (`not_counted`), those of findings and of error events alike."""
    by_file: dict[str, list[tuple[int, str]]] = {}
    for entry in host.kernel_lines:
        by_file.setdefault(entry.file, []).append((entry.line, entry.text))
    kernel: list[Finding] = []
    for rel, lines in by_file.items():
        kernel += kb.scan_lines(lines, "kernel", rel, "kernel")
    counted, report.kernel_times = split_by_start(kernel, host, job)
    found = {(f.source, f.line_no) for f in kernel}
    earlier, notes = lines_before_start((k for k in events if (k.file, k.line) not in found), host, job)
    report.kernel_times += notes  # an event no finding is on: said as its kind (a Nonfatal Xid 145)
    kept = {(f.source, f.line_no or 0) for f in counted}  # a line one counted finding is on counts
    report.not_counted = earlier | ({(f.source, f.line_no or 0) for f in kernel} - kept)
    return counted


def _fact_source(subject: str) -> str:
    kind = subject.split(" ", 1)[0]
    return {"gpu": "nvidia-smi/NVML", "ib": "infiniband sysfs", "disk": "df", "cpu": "cpufreq", "memory": "meminfo/PSI",
            "collectors": "manifest"}.get(kind, "")


def rank_log_findings(ev: Evidence, kb: KnowledgeBase) -> dict[tuple[str, int | None, int | None], list[Finding]]:
    """Knowledge-base findings in every rank's text logs, keyed by (host, rank, pid).

    The lines were picked while the logs were read (the knowledge base's line filter),
    so no log is read twice. A host line pasted into a job's output (an Xid, a GPU
    lost) counts too: such lines are matched against the kernel entries as well.
    """
    out: dict[tuple[str, int | None, int | None], list[Finding]] = {}
    for art in ev.artifacts:
        if art.kind not in RANK_LOG_KINDS or not art.parsed or not art.parsed.notes:
            continue
        host = art.hints.host or art.host or _content_host(art)
        rank = art.hints.rank if art.hints.from_manifest else art.rank
        pid = art.hints.pid if art.hints.from_manifest else art.pid
        subject = f"rank {rank}" if rank is not None else (f"pid {pid}" if pid is not None else "job log")
        found = kb.scan_lines(art.parsed.notes, subject, art.cite, "rank-log")
        seen = {(f.line_no, f.entry.id) for f in found}
        found += [f for f in kb.scan_lines(art.parsed.notes, subject, art.cite, "kernel")
                  if (f.line_no, f.entry.id) not in seen]
        line_hosts = _line_hosts(art) if host is None else {}
        line_ranks = _line_ranks(art) if rank is None and pid is None else {}
        for f in found:
            if f.line_no in line_ranks:  # a merged log: the line's own rank (its prefix, or its words) is whose it is
                f.subject = f"rank {line_ranks[f.line_no]}"
            line_host = line_hosts.get(f.line_no) if f.line_no is not None else None
            out.setdefault((host or line_host or UNKNOWN_HOST, rank, pid), []).append(f)
    return out


def _line_ranks(art) -> dict[int, int]:
    """Line number -> the one global rank the events read at that line name, for a file of no one rank (a
    launcher-merged log, a paste): a known error on a line is that rank's (DDP's 'did not receive grad for rank
    3', a `[rank5]:` prefix), not the whole log's. A line whose events name several ranks names none."""
    seen: dict[int, set[int]] = {}
    for e in art.parsed.events:
        origin = getattr(e, "origin", None)
        if origin is not None and origin.line is not None and origin.rank is not None:
            seen.setdefault(origin.line, set()).add(origin.rank)
    return {line: next(iter(rs)) for line, rs in seen.items() if len(rs) == 1}


def _line_hosts(art) -> dict[int, str]:
    """Line number -> the host its own prefix names, for a loose file of several hosts (one user's paste of
    NCCL lines from three nodes): a finding on a line belongs to that line's host, not to 'unknown-host'."""
    return {e.origin.line: e.origin.host for e in art.parsed.events
            if getattr(e, "origin", None) is not None and e.origin.line is not None and e.origin.host}


def _content_host(art) -> str | None:
    """The one host the lines of a loose file name (NCCL prefixes, launcher labels), if they name one."""
    hosts = {e.origin.host for e in art.parsed.events if getattr(e, "origin", None) is not None and e.origin.host}
    return hosts.pop() if len(hosts) == 1 else None


def kernel_events(ev: Evidence) -> dict[str, list[KernelEventLine]]:
    """Each line of a kernel log read as an error event (an Xid, a GPU off the bus, a PCIe error), by its file: the
    lines set against the job's start beside the knowledge base's findings, each host's from its own files only
    (`host_events`; every host handed every host's lines is quadratic over a fleet)."""
    by_file: dict[str, list[KernelEventLine]] = {}
    for art in ev.artifacts:
        for k in kernel_event_lines(art):
            by_file.setdefault(k.file, []).append(k)
    return by_file


def host_events(events: dict[str, list[KernelEventLine]], host: HostEvidence) -> list[KernelEventLine]:
    """The kernel lines read as error events (`kernel_events`) in the files of `host`'s kernel log."""
    return [k for file in {e.file for e in host.kernel_lines} for k in events.get(file, ())]


def kernel_event_lines(art: Artifact) -> list[KernelEventLine]:
    """The lines of one kernel log read as error events, each once, with the pid one of its events names."""
    out: dict[tuple[str, int], KernelEventLine] = {}
    if art.kind != "kernel-log" or not art.parsed:
        return []
    for e in art.parsed.events:
        if type(e) is not ErrorEvent or not e.origin.file or e.origin.line is None:
            continue
        pid = getattr(e.data, "pid", None)
        key = (e.origin.file, e.origin.line)
        if key not in out or (isinstance(pid, int) and out[key].pid is None):
            out[key] = KernelEventLine(*key, str(e.kind), pid if isinstance(pid, int) else None)
    return list(out.values())


#: what a bundle's host without host files lacks (a loose folder of logs was never expected to hold any)
NO_HOST_EVIDENCE = "no host evidence was collected on this host"


def host_reports(ev: Evidence, kb: KnowledgeBase) -> list[HostReport]:
    """One report per host with evidence (host files, manifest host records or rank logs), and per host
    a rank runs on, sorted by host.

    "missing" says only what the kind of input should have held: a bundle's host without host
    files lacks them; a folder of logs (a post-mortem) never had any, so nothing is missing there.
    """
    per_rank = rank_log_findings(ev, kb)
    by_host: dict[str, list[Finding]] = {}
    for (host, _rank, _pid), found in per_rank.items():
        by_host.setdefault(host, []).extend(found)
    judged = frozenset((f.source, f.line_no) for found in per_rank.values() for f in found if f.line_no is not None)
    for host, found in same_fault_findings(ev.artifacts, RANK_LOG_KINDS, judged,
                                             [r.record for r in ev.ranks]).items():
        by_host.setdefault(host, []).extend(found)  # one error on every rank of one host and no other (issue 42)
    expected = [NO_HOST_EVIDENCE] if ev.manifest is not None else []
    starts = job_starts(ev.ranks)
    events = kernel_events(ev)
    reports = [host_report(h, kb, by_host.get(name, []), starts.get(name), host_events(events, h))
               for name, h in ev.hosts.items()]
    for host in sorted(set(by_host) - set(ev.hosts)):
        if not by_host[host] and ev.manifest is None:
            continue
        report = HostReport(host=host, missing=list(expected))
        report.groups = group_findings(by_host[host])
        report.status = _status(report.groups, False)
        reports.append(report)
    named = {r.host for r in reports}
    # every host a rank runs on or a file names has a line, as analyze names it (the culprit's host too)
    hosts = [rank.record.host for rank in ev.ranks] + [art.hints.host or art.host for art in ev.artifacts]
    for host in hosts:
        if host and host not in named and host != UNKNOWN_HOST:
            named.add(host)
            reports.append(HostReport(host=host, missing=list(expected), status=UNKNOWN))
    return sorted(reports, key=lambda r: r.host)


#: a host name a scheduler, ssh or a folder may be given: letters, digits, '.', '-', '_', no leading '-'
_PLAIN_HOST = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,62}(?:\.[A-Za-z0-9_-]{1,63})*")


def plain_host(name: object) -> bool:
    """True when `name` is a plain host name (at most 253 characters) that the evidence gave, not the
    placeholder of lines no host names. Only such names reach an exclude list, a command or a folder
    name: a folder named 'node13,node07' would drain an innocent node, '--exclude=node01' is an option."""
    return (isinstance(name, str) and name != UNKNOWN_HOST and len(name) <= 253
            and _PLAIN_HOST.fullmatch(name) is not None)


def host_suspects(reports: Iterable[HostReport], ranks: Iterable[RankEvidence],
                  aftermath: frozenset[tuple[str, int]] = frozenset()) -> list[Suspect]:
    """Suspects for `forensics analyze`: ranks on hosts with faults, and ranks whose own logs name a known error.

    A rank on a host with an uncorrectable ECC error or a GPU off the bus gets a
    confidence above the stack-based classes (a stopped process is 0.95): the
    hardware explains the hang, and the recommended action travels in the evidence.
    Findings in a rank's own log are pinned to that rank; host findings go to every
    rank on the host, and, when its environment tells which GPU each rank used
    (parsers.judges.gpu_binding), the rank on the GPU a finding names ranks first.
    `aftermath`: (file, line) of lines that follow their rank's own collective timeout (see
    heartbeat_aftermath); a finding first seen there blames no rank.
    """
    suspects = []
    by_host: dict[str, list[RankEvidence]] = {}
    for r in ranks:
        by_host.setdefault(r.record.host, []).append(r)
    for report in reports:
        if not report.groups:
            continue  # nothing found on this host: no suspect can come of it
        order = gpu_binding.gpu_order(report.facts)
        for rank in by_host.get(report.host, ()):
            rec = rank.record
            subject = f"rank {rec.rank}" if rec.rank is not None else f"pid {rec.pid}"
            mine = [g for g in report.groups if g.first.subject == subject and _blames_rank(g, aftermath)]
            host_wide = [g for g in report.reasons if not g.first.subject.startswith(("rank ", "pid "))]
            my_bus = gpu_binding.rank_bus(rank, order) if order else None
            best = _worst(mine + host_wide, my_bus)
            if best is None:
                continue
            suspects.append(_suspect(rec, report, best, own=best in mine, my_bus=my_bus))
    return suspects


def log_only_suspects(reports: Iterable[HostReport],
                      aftermath: frozenset[tuple[str, int]] = frozenset()) -> list[Suspect]:
    """Known errors in logs of ranks that have no process record (loose folders): pinned to that rank, where one
    rank says it. The same known error from several ranks (every rank's topology detection failing alike under
    WSL2, DDP's error on every rank) is the job's or the host's, no one rank's own: it blames none of them."""
    reports = list(reports)
    ranks_of: dict[str, set[str]] = {}
    for report in reports:
        for g in report.groups:
            if g.first.subject.startswith("rank "):
                ranks_of.setdefault(g.entry.id, set()).add(g.first.subject)
    out = []
    for report in reports:
        for g in report.groups:
            subject = g.first.subject
            if len(ranks_of.get(g.entry.id, ())) > 1:
                continue
            if subject.startswith("rank ") and subject[5:].isdigit() and _blames_rank(g, aftermath):
                rank = int(subject[5:])
                rec = RankRecord(host=report.host, pid=0, dir="", rank=rank)
                s = _suspect(rec, report, g, own=True)
                s.pid = None
                out.append(s)
    return out


def _named_bus(group: FindingGroup) -> gpu_binding.Bus | None:
    return gpu_binding.bus_of(group.first.evidence) or gpu_binding.bus_of(group.first.subject)


def _blames_rank(group: FindingGroup, aftermath: frozenset[tuple[str, int]] = frozenset()) -> bool:
    """A rank's own log line blames that rank only if it is a cause, not a victim's symptom.

    Watchdog timeouts and closed connections are what every waiting rank prints
    (action restart, no host effect); a CUDA OOM or an ECC error is the rank's own.
    A heartbeat-monitor line after the rank's own collective timeout is the aftermath of that wait.
    """
    entry = group.entry
    if group.first.line_no is not None and (group.first.source, group.first.line_no) in aftermath:
        return False
    return entry.severity in ("error", "critical") and (entry.action == "fix-code" or entry.host != "none")


def _worst(groups: list[FindingGroup], my_bus: gpu_binding.Bus | None = None) -> FindingGroup | None:
    """The finding that explains a rank best: worst severity, then one naming its own GPU."""
    if not groups:
        return None

    def key(g: FindingGroup) -> tuple:
        named = _named_bus(g)
        return (SEVERITIES.index(g.entry.severity), my_bus is not None and named == my_bus, g.entry.host == "exclude")

    return max(groups, key=key)


#: Confidence shift when the finding names the rank's own GPU, or another GPU of its host.
SAME_GPU_BONUS, OTHER_GPU_PENALTY = 0.02, 0.1


def _suspect(rank: RankRecord, report: HostReport, group: FindingGroup, own: bool,
             my_bus: gpu_binding.Bus | None = None) -> Suspect:
    entry = group.entry
    where = "its own log says" if own else f"its host {report.host} has"
    reason = f"{where} {entry.title.lower()}: {entry.meaning.split('. ')[0].rstrip('.')}"
    file, line = group.first.source or None, group.first.line_no

    def at(text: str, tagged: bool = False) -> str:  # a citation of the finding's own line
        return cite(text, tool="knowledge base", file=file, line=line, tagged=tagged)

    evidence = [at(group.describe(), tagged=bool(group.first.line_no or group.first.source)),
                at(f"evidence: {group.first.evidence[:300]}"),
                cite(f"recommended action: {entry.action_text}", tool="knowledge base")]
    if not own:
        evidence.append(cite(f"host verdict: {report.status}" + (f" -> {ACTION_TEXT[report.action]}" if report.action
                                                                  else ""), tool="host judge"))
    confidence = HOST_CONFIDENCE[entry.severity]
    named = _named_bus(group)
    if not own and my_bus is not None and named is not None:
        shown = "{:04x}:{:02x}:{:02x}".format(*named)
        if named == my_bus:
            confidence += SAME_GPU_BONUS
            evidence.append(at(f"the finding names this rank's own GPU ({shown})"))
        else:
            confidence -= OTHER_GPU_PENALTY
            evidence.append(at(f"the finding names another GPU of the host ({shown}); this rank waits on it"))
    return Suspect(
        rank=rank.rank,
        host=rank.host,
        pid=rank.pid,
        reason_class=ReasonClass.KNOWN_ERROR if own else ReasonClass.HOST_FAULT,
        reason=reason,
        confidence=min(confidence, 0.99),
        evidence=evidence,
        action=entry.action_text,
    )


def exit_status(reports: Iterable[HostReport]) -> str:
    """'exclude' / 'suspect' if any host is so, else 'unknown' if any host is, else 'healthy'."""
    statuses = {r.status for r in reports}
    for status in (EXCLUDE, SUSPECT, UNKNOWN):
        if status in statuses:
            return status
    return HEALTHY


def heartbeat_aftermath(ev: Evidence) -> frozenset[tuple[str, int]]:
    """(file, line) of heartbeat-monitor lines ('watchdog got stuck', 'Heartbeat monitor timed out') that a
    rank printed after its own watchdog timeout in the same file.

    Why: once a collective times out the watchdog dumps and aborts the communicators, and a peer that is gone
    or stuck can hold that abort for minutes; the monitor then reports the watchdog stuck. That is the wait's
    aftermath, so it names the rank no more than the timeout does. Stuck with no timeout before it still blames.
    """
    out = set()
    for art in ev.artifacts:
        if art.kind not in RANK_LOG_KINDS or not art.parsed:
            continue
        timed_out: dict[int | None, int] = {}  # rank -> line of its first watchdog timeout
        for e in art.parsed.events:
            line = getattr(getattr(e, "origin", None), "line", None)
            if line is None or getattr(e, "kind", None) not in (ErrorKind.WATCHDOG_TIMEOUT, ErrorKind.HEARTBEAT):
                continue
            if e.kind == ErrorKind.WATCHDOG_TIMEOUT:
                timed_out.setdefault(e.origin.rank, line)
            elif timed_out.get(e.origin.rank, line) < line:
                out.add((art.cite, line))
    return frozenset(out)


def judge_hosts(ev: Evidence, kb: KnowledgeBase) -> tuple[list[HostReport], list[Suspect]]:
    """The host judge: a report per host, and the suspects those reports make (pure)."""
    reports = host_reports(ev, kb)
    aftermath = heartbeat_aftermath(ev)
    suspects = host_suspects(reports, ev.ranks, aftermath)
    if ev.manifest is None:
        named = {s.rank for s in suspects}
        suspects += [s for s in log_only_suspects(reports, aftermath) if s.rank not in named]
    return reports, suspects


def judge(ev: Evidence, ctx: JudgeContext) -> Findings:
    """The host judge (the one protocol): the knowledge base (`ctx.kb`) over host facts and known errors."""
    reports, suspects = judge_hosts(ev, ctx.kb if ctx.kb is not None else load(use_env=False))  # or the built-in one
    return Findings("hosts", suspects, judge="hosts", reports=reports)

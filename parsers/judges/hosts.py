"""Judges each host healthy / suspect / exclude from its evidence and the knowledge base.

Many hangs are host faults seen from far away: a GPU off the bus, an uncorrectable
ECC error, a flapping IB port. This module reads a bundle's host evidence (and
the ranks' own logs), matches it against the knowledge base, and says per host
what was found, how bad it is and what to do. It also turns those findings into
Suspects, so `forensics analyze` can rank a rank on a broken host above ranks
that merely wait.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

from parsers.knowledge import ACTION_TEXT, SEVERITIES, Finding, KnowledgeBase
from parsers import gpu_binding
from parsers.suspects import merge_suspects
from parsers.model import Suspect, Verdict
from parsers.readers import host_ib, host_kernel, host_nvml, host_nvsmi, host_system

HEALTHY, SUSPECT, EXCLUDE, UNKNOWN = "healthy", "suspect", "exclude", "unknown"
STATUSES = (HEALTHY, SUSPECT, EXCLUDE, UNKNOWN)

#: Rank collectors whose files are text logs worth matching (stdout/stderr, NCCL debug files).
RANK_LOG_COLLECTORS = ("stdio", "nccl_log")
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
        where = f" [{self.first.source}:{self.first.line_no}]" if self.first.line_no else (f" [{self.first.source}]" if self.first.source else "")
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
    not_applicable: list[str] = field(default_factory=list)  #: collectors skipped: no such hardware, optional module absent
    collected: list[str] = field(default_factory=list)

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


class _HostReader:
    """Reads one host's collector files into facts and findings; bad files become 'missing' notes."""

    def __init__(self, bundle: Any, kb: KnowledgeBase, report: HostReport) -> None:
        self.bundle = bundle
        self.kb = kb
        self.report = report
        self.findings: list[Finding] = []

    def file(self, record: Any, name: str) -> tuple[str, str] | None:
        """(bundle-relative path, text) of the collector's file called `name`, if present."""
        for rel in record.files:
            if Path(rel).name == name:
                try:
                    return rel, self.bundle.path(rel).read_text(encoding="utf-8", errors="replace")
                except OSError as err:
                    self.report.missing.append(f"{record.name}: cannot read {rel}: {err}")
        return None

    def merge(self, subjects: dict[str, dict[str, Any]], prefix: str, overwrite: bool = True) -> None:
        for subject, facts in subjects.items():
            name = f"{prefix} {subject}".strip() if prefix else subject
            target = self.report.facts.setdefault(name, {})
            for k, v in facts.items():
                if overwrite or k not in target:
                    target[k] = v

    def decode(self, record: Any, filename: str, parse: Callable[[str], Any], use: Callable[[Any, str], None]) -> None:
        got = self.file(record, filename)
        if got is None:
            return
        rel, text = got
        try:
            use(parse(text), rel)
        except ValueError as err:
            self.report.missing.append(f"{record.name}: {rel} could not be decoded: {err}")

    def kernel(self, record: Any) -> None:
        got = self.file(record, "kernel.log")
        if got:
            rel, text = got
            lines = host_kernel.read_kernel_log(text)
            self.findings += self.kb.scan_lines(host_kernel.numbered_messages(lines), "kernel", rel, "kernel")

    def run(self, record: Any) -> None:
        name = record.name
        if name == "kernel_log":
            self.kernel(record)
        elif name == "nvidia_smi":
            before = len(self.report.missing)
            self.decode(record, "nvidia-smi-q.xml", host_nvsmi.parse_xml, lambda d, rel: self.merge(d, "gpu"))
            if not any(k.startswith("gpu ") for k in self.report.facts):
                del self.report.missing[before:]
                self.decode(record, "nvidia-smi-q.txt", host_nvsmi.parse_text, lambda d, rel: self.merge(d, "gpu"))
        elif name == "nvml":
            self.decode(record, "nvml.json", host_nvml.parse_nvml_json, lambda d, rel: self.merge(d, "gpu", overwrite=False))
        elif name == "infiniband":
            self.decode(record, "infiniband.json", host_ib.parse_ib_json, lambda d, rel: self.merge(d, ""))
        elif name == "cpufreq":
            self.decode(record, "cpufreq.json", host_system.parse_cpufreq_json, lambda d, rel: self.merge({"cpu": d}, ""))
        elif name == "disk":
            self.decode(record, "df.txt", host_system.parse_df, lambda d, rel: self.merge(d, ""))
            self.decode(record, "df-inodes.txt", lambda t: host_system.parse_df(t, inodes=True), lambda d, rel: self.merge(d, ""))
        elif name == "memory":
            self.decode(record, "memory.json", host_system.parse_memory_json, lambda d, rel: self.merge({"memory": d}, ""))


def host_report(bundle: Any, host_record: Any, kb: KnowledgeBase, rank_findings: Iterable[Finding] = ()) -> HostReport:
    """The report of one manifest host record (plus findings from its ranks' logs)."""
    report = HostReport(host=host_record.host)
    reader = _HostReader(bundle, kb, report)
    collectors = {}
    for record in host_record.collectors:
        collectors[f"collector.{record.name}.status"] = record.status
        if record.status == "ok" or record.files:
            report.collected.append(record.name)
            reader.run(record)
        if record.status not in ("ok", "skipped"):
            report.missing.append(f"{record.name}: {record.status}" + (f" ({record.error})" if record.error else ""))
        elif record.status == "skipped":
            report.not_applicable.append(f"{record.name}: {record.error or 'skipped'}")
    report.facts["collectors"] = collectors
    findings = list(reader.findings)
    for subject, facts in report.facts.items():
        findings += kb.match_facts(subject, facts, source=_fact_source(subject))
    findings += list(rank_findings)
    report.groups = group_findings(findings)
    report.status = _status(report.groups, bool(report.collected))
    return report


def _fact_source(subject: str) -> str:
    kind = subject.split(" ", 1)[0]
    return {"gpu": "nvidia-smi/NVML", "ib": "infiniband sysfs", "disk": "df", "cpu": "cpufreq", "memory": "meminfo/PSI", "collectors": "manifest"}.get(kind, "")


def rank_log_findings(bundle: Any, kb: KnowledgeBase) -> dict[tuple[str, int | None, int], list[Finding]]:
    """Knowledge-base findings in every rank's text logs, keyed by (host, rank, pid)."""
    out: dict[tuple[str, int | None, int], list[Finding]] = {}
    for rank in bundle.manifest.ranks:
        subject = f"rank {rank.rank}" if rank.rank is not None else f"pid {rank.pid}"
        found: list[Finding] = []
        for record in rank.collectors:
            if record.name not in RANK_LOG_COLLECTORS:
                continue
            for rel in record.files:
                try:
                    text = bundle.path(rel).read_text(encoding="utf-8", errors="replace")
                except (OSError, ValueError):
                    continue
                found += kb.scan_lines(enumerate(text.splitlines(), start=1), subject, rel, "rank-log")
        out[(rank.host, rank.rank, rank.pid)] = found
    return out


def host_reports(bundle: Any, kb: KnowledgeBase) -> list[HostReport]:
    """One report per host named in the manifest (hosts record or ranks), sorted by host."""
    per_rank = rank_log_findings(bundle, kb)
    by_host: dict[str, list[Finding]] = {}
    for (host, _rank, _pid), found in per_rank.items():
        by_host.setdefault(host, []).extend(found)
    reports = []
    seen = set()
    for record in bundle.manifest.hosts:
        reports.append(host_report(bundle, record, kb, by_host.get(record.host, [])))
        seen.add(record.host)
    for host in sorted(set(by_host) - seen):
        report = HostReport(host=host, missing=["no host evidence was collected on this host"])
        report.groups = group_findings(by_host[host])
        report.status = _status(report.groups, False)
        reports.append(report)
    return sorted(reports, key=lambda r: r.host)


def host_suspects(reports: Iterable[HostReport], ranks: Iterable[Any], bundle: Any = None) -> list[Suspect]:
    """Suspects for `forensics analyze`: ranks on hosts with faults, and ranks whose own logs name a known error.

    A rank on a host with an uncorrectable ECC error or a GPU off the bus gets a
    confidence above the stack-based classes (a stopped process is 0.95): the
    hardware explains the hang, and the recommended action travels in the evidence.
    Findings in a rank's own log are pinned to that rank; host findings go to every
    rank on the host, and, when `bundle` lets us tell which GPU each rank used
    (parsers.gpu_binding), the rank on the GPU a finding names ranks first.
    """
    suspects = []
    ranks = list(ranks)
    for report in reports:
        order = gpu_binding.gpu_order(report.facts)
        for rank in (r for r in ranks if r.host == report.host):
            subject = f"rank {rank.rank}" if rank.rank is not None else f"pid {rank.pid}"
            mine = [g for g in report.groups if g.first.subject == subject and _blames_rank(g)]
            host_wide = [g for g in report.reasons if not g.first.subject.startswith(("rank ", "pid "))]
            my_bus = gpu_binding.rank_bus(bundle, rank, order) if bundle is not None and order else None
            best = _worst(mine + host_wide, my_bus)
            if best is None:
                continue
            suspects.append(_suspect(rank, report, best, own=best in mine, my_bus=my_bus))
    return suspects


def _named_bus(group: FindingGroup) -> gpu_binding.Bus | None:
    return gpu_binding.bus_of(group.first.evidence) or gpu_binding.bus_of(group.first.subject)


def _blames_rank(group: FindingGroup) -> bool:
    """A rank's own log line blames that rank only if it is a cause, not a victim's symptom.

    Watchdog timeouts and closed connections are what every waiting rank prints
    (action restart, no host effect); a CUDA OOM or an ECC error is the rank's own.
    """
    entry = group.entry
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


def _suspect(rank: Any, report: HostReport, group: FindingGroup, own: bool, my_bus: gpu_binding.Bus | None = None) -> Suspect:
    entry = group.entry
    where = "its own log says" if own else f"its host {report.host} has"
    reason = f"{where} {entry.title.lower()}: {entry.meaning.split('. ')[0].rstrip('.')}"
    evidence = [group.describe(), f"evidence: {group.first.evidence[:300]}", f"recommended action: {entry.action_text}"]
    if not own:
        evidence.append(f"host verdict: {report.status}" + (f" -> {ACTION_TEXT[report.action]}" if report.action else ""))
    confidence = HOST_CONFIDENCE[entry.severity]
    named = _named_bus(group)
    if not own and my_bus is not None and named is not None:
        shown = "{:04x}:{:02x}:{:02x}".format(*named)
        if named == my_bus:
            confidence += SAME_GPU_BONUS
            evidence.append(f"the finding names this rank's own GPU ({shown})")
        else:
            confidence -= OTHER_GPU_PENALTY
            evidence.append(f"the finding names another GPU of the host ({shown}); this rank waits on it")
    return Suspect(
        rank=rank.rank,
        host=rank.host,
        pid=getattr(rank, "pid", None),
        reason_class="known-error" if own else "host-fault",
        reason=reason,
        confidence=min(confidence, 0.99),
        evidence=evidence,
    )


def exit_status(reports: Iterable[HostReport]) -> str:
    """'exclude' / 'suspect' if any host is so, else 'unknown' if any host is, else 'healthy'."""
    statuses = {r.status for r in reports}
    for status in (EXCLUDE, SUSPECT, UNKNOWN):
        if status in statuses:
            return status
    return HEALTHY


def fold_into_verdict(verdict: Verdict, bundle: Any, kb: KnowledgeBase) -> Verdict:
    """Add host evidence to a verdict from the stacks: suspects, a 'hosts' section, the action.

    The one call `forensics analyze` needs. Host suspects merge into the existing
    ranking (a rank on a host with an uncorrectable ECC error goes first); the
    summary gains the recommended action when a host or known error is the culprit.
    """
    reports = host_reports(bundle, kb)
    extra = host_suspects(reports, bundle.manifest.ranks, bundle)
    verdict.suspects = merge_suspects(verdict.suspects, extra)
    verdict.sections["hosts"] = [r.to_dict() for r in reports]
    for report in reports:
        verdict.missing_evidence += [f"host {report.host}: {note}" for note in report.missing]
    culprit = verdict.culprit
    if culprit is not None and culprit.reason_class in ("host-fault", "known-error"):
        action = next((e[len("recommended action: "):] for e in culprit.evidence if e.startswith("recommended action: ")), None)
        lead = f"{culprit.label} {culprit.reason}"
        verdict.summary = lead + (f". Recommended action: {action}." if action else ".") + (f" {verdict.summary}" if verdict.summary else "")
    excluded = [r.host for r in reports if r.status == EXCLUDE]
    if excluded:
        verdict.sections["exclude_hosts"] = excluded
    return verdict

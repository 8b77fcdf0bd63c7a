"""Host faults in a verdict's words: which hosts to take out of the job, why, and what to do.

Why here: the host judge (parsers.judges.hosts) classifies each host healthy / suspect / exclude from its
Xid, ECC, PCIe AER and IB evidence, and the verdict carries its reports (`sections['hosts']`); the
verdict's words must lead with them where they explain the hang. A hardware fault on the culprit's own
host is the why and draining that host is the action; a fault elsewhere is said with its own action.
Hosts with the same finding share a line, folded as `clush -b` folds them (`node[007,031-032]`).
Presentation only: this reads the reports as the judge wrote them and decides nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable

from forensics.hostset import HostSetError, fold as fold_hosts, validate_host
from parsers.model.events import UNKNOWN_HOST

#: what a host fault says where no line or file names the host (never the placeholder itself)
NOT_NAMED = "(host not in the evidence)"

#: knowledge-base actions that say the fault is the machine's, not the program's
HARDWARE_ACTIONS = ("hardware-ticket", "exclude-host-and-restart")
#: host verdicts that call for an action
ACTING = ("exclude", "suspect")
#: the heading of the kernel-time lines (ReportView.kernel_times) in the text and the HTML report
KERNEL_TIMES_TITLE = "host kernel lines against the job's start"
#: lines of kernel-time notes one output shows (a line per set of hosts that say the same); the rest are counted
KERNEL_TIME_LINES = 4
#: notes of one host (one per kind of line left out, or why none was compared) a line shows
KERNEL_TIME_NOTES = 3


@dataclass(frozen=True)
class HostFault:
    """Hosts that share one finding: the folded set, the status, the finding, and the action to take."""

    hosts: tuple[str, ...]
    status: str  #: 'exclude' | 'suspect'
    finding: str  #: the knowledge-base entry's id ('xid-79')
    title: str  #: its title ('Xid 79: GPU has fallen off the bus')
    meaning: str  #: its first sentence of meaning
    action: str  #: what to do, in words
    hardware: bool  #: the finding is a hardware fault (a ticket / drain), not a program's error

    @property
    def folded(self) -> str:
        return folded(self.hosts)

    def said(self) -> str:
        """'exclude node[007,031-032] (3 hosts): Xid 79: GPU has fallen off the bus -> <action>'."""
        count = f" ({len(self.hosts)} hosts)" if len(self.hosts) > 1 else ""
        return f"{self.status} {self.folded}{count}: {self.title} -> {self.action}"

    def to_dict(self) -> dict[str, Any]:
        return {"hosts": list(self.hosts), "folded": self.folded, "status": self.status, "finding": self.finding,
                "title": self.title, "meaning": self.meaning, "action": self.action, "hardware": self.hardware}


def folded(hosts: Iterable[str]) -> str:
    """Plain host names folded (`node[007,031-032]`), any other name listed after them as it is."""
    plain, other = [], []
    for h in dict.fromkeys(hosts):
        if h == UNKNOWN_HOST:  # (a plain name in form: the placeholder of lines no host names)
            other.append(NOT_NAMED)
            continue
        try:
            plain.append(validate_host(h))
        except HostSetError:
            other.append(h)
    return ",".join(([fold_hosts(plain)] if plain else []) + other)


def _action(report: dict[str, Any], reason: dict[str, Any], several: bool) -> str:
    """The host's action first (drain it), then the finding's own (a ticket), in words."""
    them = "them" if several else "it"
    if report.get("status") == "exclude":
        first = f"drain (exclude) the host{'s' if several else ''} and restart the job without {them}"
        own = reason.get("action_text")
        return f"{first}; {own}" if own and reason.get("action") != "exclude-host-and-restart" else first
    return reason.get("action_text") or report.get("action_text") or "look at the host's evidence (forensics hosts)"


def host_faults(reports: Iterable[dict[str, Any]]) -> list[HostFault]:
    """The acting hosts of the host judge's reports, folded by (status, worst finding): exclude first."""
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in reports:
        if r.get("status") in ACTING and r.get("reasons"):
            groups.setdefault((r["status"], r["reasons"][0].get("id", "")), []).append(r)
    out = []
    for (status, finding), members in sorted(groups.items(), key=lambda kv: ACTING.index(kv[0][0])):
        reason = members[0]["reasons"][0]
        meaning = (reason.get("meaning") or "").split(". ")[0].rstrip(".")
        out.append(HostFault(hosts=tuple(m["host"] for m in members), status=status, finding=finding,
                             title=reason.get("title") or finding, meaning=meaning,
                             action=_action(members[0], reason, len(members) > 1),
                             hardware=reason.get("action") in HARDWARE_ACTIONS))
    return out


def own_host_fault(faults: Iterable[HostFault], host: str | None) -> HostFault | None:
    """The hardware fault on `host` (the culprit's), if the host judge found one there."""
    if not host or host == UNKNOWN_HOST:  # lines no host names are not the culprit's host's
        return None
    return next((f for f in faults if f.hardware and host in f.hosts), None)


def culprit_why(fault: HostFault, host: str) -> str:
    """What the culprit's own host fault means, said as the why of the verdict."""
    return f"its host {host} has a hardware fault, {fault.title}: {fault.meaning}"


def culprit_action(fault: HostFault, host: str) -> str:
    """The next step where the culprit's own host has a hardware fault: drain that host."""
    own = fault.action.split("; ", 1)[1] if "; " in fault.action else ""
    return f"drain (exclude) {host} and restart the job without it" + (f"; {own}" if own else "")


def headline_note(fault: HostFault, host: str) -> str:
    """What the VERDICT line adds: the fault on the culprit's own host, and the drain."""
    return f"its host {host} has {fault.title} (the likely cause): drain {host}"


def exclude_list(faults: Iterable[HostFault]) -> str:
    """Every plain host name to exclude, folded: what a scheduler's --exclude takes (any other name never goes
    into a host list: parsers.judges.hosts.plain_host)."""
    names = []
    for h in (h for f in faults if f.status == "exclude" for h in f.hosts if h != UNKNOWN_HOST):
        try:
            names.append(validate_host(h))
        except HostSetError:
            continue
    return fold_hosts(list(dict.fromkeys(names))) if names else ""


def kernel_time_lines(reports: Iterable[dict[str, Any]]) -> list[str]:
    """The host judge's own sentences on kernel lines set against the job's start (`kernel_times`: an OOM kill
    from before the job started, said and not counted; findings counted with no time to compare), a line per
    set of hosts that say the same, bounded. Why said in every output: a fault left out of the verdict must be
    seen to have been left out, not seem never found."""
    by_notes: dict[tuple[str, ...], list[str]] = {}
    for r in reports:
        notes = tuple(r.get("kernel_times") or ())
        if notes:
            by_notes.setdefault(notes, []).append(str(r.get("host")))
    lines = []
    for notes, hosts in by_notes.items():
        more = len(notes) - KERNEL_TIME_NOTES
        said = "; ".join(notes[:KERNEL_TIME_NOTES]) + (f"; {more} more (forensics hosts)" if more > 0 else "")
        lines.append(f"host{'s' if len(hosts) > 1 else ''} {folded(hosts)}: {said}")
    if len(lines) > KERNEL_TIME_LINES:
        left = sum(len(h) for h in list(by_notes.values())[KERNEL_TIME_LINES:])
        lines = lines[:KERNEL_TIME_LINES] + [f"… {left} more host{'s' if left > 1 else ''} (forensics hosts, --json)"]
    return lines

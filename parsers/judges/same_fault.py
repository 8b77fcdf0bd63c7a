"""Many ranks of one host with the same fault, and no rank elsewhere with it: a host verdict (issue 42 item 3).

Why a rule of its own: a host fault the knowledge base does not know (an NCCL WARN about a local device, a
driver call failing) shows as the same error on every process of that host and on none of another's. The
comparison is what makes it a host's: a single-host job has nothing to compare with, and an error one rank
of the host lacks is no host's. A victim's symptom repeats just as well on every process of a healthy host
(a peer lost, a connection closed or reset by the peer, a timeout, a flushed work request, an abort after
another error): those point at the peer, so they never count here, nor does anything the knowledge base
already judges (its host-scoped entries make their own verdict; its symptoms and code faults are no host's).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Iterable

from parsers.knowledge import Entry, Finding
from parsers.model.events import AFTERMATH_OF_WAIT, INFO_KINDS, UNKNOWN_HOST, WAIT_ERRORS, ErrorEvent

#: words of a victim: the line is about a peer, a wait or a teardown, not about this host's own hardware
_SYMPTOM_WORDS = re.compile(
    r"peer|remote|completion|closed|reset|timed?[ _-]?out|timeout|flush|abort|lost|unreachable|refused|broken pipe|"
    r"disconnect|hang up|hung up|eof|shut ?down|terminat|killed|signal|exit(?:ed)? ?code|last error|"
    r"watchdog|heartbeat|cancel|interrupted|connection|socket|rendezvous|store|barrier|rank \d|from rank|to rank",
    re.IGNORECASE)
#: parts of a line that differ between ranks of one fault: numbers, hex, addresses, host names are cut
_VARYING = re.compile(r"0x[0-9a-f]+|\[[0-9a-f:.]+\](?::\d+)?|\d+(?:\.\d+)*", re.IGNORECASE)

SAME_FAULT = Entry(
    id="same-fault-one-host",
    title="The same error on every rank of one host and on no other host",
    kind="line",
    meaning=("Every process this host ran reported one error that no process of another host reported, and the "
             "error is no victim's symptom (no peer lost, no connection closed, no timeout): something of the host "
             "itself (its GPUs, its network card, its driver, its files) fails the same way for all of its ranks"),
    severity="warning",
    action="exclude-host-and-restart",
    host="suspect",
    origin="parsers/judges/same_fault.py",
    streams=("rank-log",),
)


@dataclass
class _Said:
    """One normalised error and, per rank identity of each host, the first line that said it."""

    kind: str
    text: str
    lines: dict[str, dict[tuple, tuple[str, int | None, str]]] = field(default_factory=dict)


def normalise(host: str, text: str) -> str:
    """The error's words with what differs between ranks cut out (the host's name, numbers, addresses)."""
    text = text.replace(host, "HOST") if host else text
    return " ".join(_VARYING.sub("N", text).lower().split())[:300]


def _identity(e: Any, art: Any) -> tuple | None:
    """Which process of its host a line is: its global rank, else its local rank, else its pid."""
    o = e.origin
    rank = o.rank if o.rank is not None else art.rank
    if rank is not None:
        return ("rank", rank)
    if o.local_rank is not None:
        return ("local", o.local_rank)
    pid = o.pid if o.pid is not None else art.pid
    return ("pid", pid) if pid is not None else None


def _host_of(e: Any, art: Any) -> str | None:
    host = e.origin.host or art.hints.host or art.host
    return host if host and host != UNKNOWN_HOST else None


def _candidate(e: ErrorEvent) -> bool:
    """An error a host's own fault may print: no information, no wait on a peer, no aftermath, no victim's
    words (a completion error, too: NCCL's IB sender reports its peer's loss so)."""
    if e.kind in INFO_KINDS or e.kind in WAIT_ERRORS or e.kind in AFTERMATH_OF_WAIT:
        return False
    return not e.peer_addr and not _SYMPTOM_WORDS.search(e.message or "")


def _read(artifacts: Iterable[Any], kinds: tuple[str, ...], judged: frozenset[tuple[str, int]]
          ) -> tuple[dict[str, set[tuple]], dict[tuple[str, str], _Said]]:
    """Every rank identity each host's lines show, and each candidate error with the ranks that said it;
    `judged`: (file, line) the knowledge base matched, which it judges itself."""
    members: dict[str, set[tuple]] = {}
    said: dict[tuple[str, str], _Said] = {}
    for art in artifacts:
        if art.kind not in kinds or not art.parsed:
            continue
        for e in art.parsed.events:
            if getattr(e, "origin", None) is None:
                continue
            host, who = _host_of(e, art), _identity(e, art)
            if host is None or who is None:
                continue
            members.setdefault(host, set()).add(who)  # a rank that printed no error is still the host's
            if type(e) is not ErrorEvent or not _candidate(e) or (art.cite, e.origin.line) in judged:
                continue
            key = (e.kind, normalise(host, e.message))
            per_host = said.setdefault(key, _Said(*key)).lines.setdefault(host, {})
            per_host.setdefault(who, (art.cite, e.origin.line, e.message))
    return members, said


def same_fault_findings(artifacts: Iterable[Any], kinds: tuple[str, ...],
                        judged: frozenset[tuple[str, int]] = frozenset(),
                        records: Iterable[Any] = ()) -> dict[str, list[Finding]]:
    """Host -> a finding citing each of its ranks' lines, where every rank (at least 2, told apart alike) of
    that host said one error, no rank of another host with lines of its own said it, and the job has another
    host to compare. `records`: the bundle's process records; a rank that wrote no line still is its host's."""
    members, said = _read(artifacts, kinds, judged)
    for rec in records:
        if rec.host and rec.host != UNKNOWN_HOST and (rec.rank is not None or rec.pid):
            members.setdefault(rec.host, set()).add(("rank", rec.rank) if rec.rank is not None else ("pid", rec.pid))
    if len(members) < 2:
        return {}
    out: dict[str, list[Finding]] = {}
    for s in said.values():
        if len(s.lines) != 1:
            continue
        host, lines = next(iter(s.lines.items()))
        if len({who for who in lines if who[0] == min(lines)[0]}) < 2 or set(lines) != members[host] or host in out:
            continue
        cited = "; ".join(f"{who[0]} {who[1]} at {f}:{n}" for who, (f, n, _) in sorted(lines.items(), key=str))
        first = min(lines.values(), key=lambda v: (v[0], v[1] or 0))
        out[host] = [Finding(SAME_FAULT, f"host {host}", f"{len(lines)} of {len(lines)} ranks of {host}: "
                             f"{first[2][:200]} ({cited[:400]})", source=first[0], line_no=first[1])]
    return out

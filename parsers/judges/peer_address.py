"""Whom a line names by address: the rank or host behind a peer's address, as far as the files pair them.

Why: a rank that lost a peer or received more than it posted names that peer by address only (gloo: `Connection
closed by peer [10.1.2.3]:6541`; NCCL: `Connection closed by remote peer node2<42830>`, `NET/Socket : peer
127.0.0.1<33658> message truncated`). The address is someone else, never the rank that printed it: read for whom it
names, it points at the process that went away or sent the other size. Who that is, the files say in three ways,
each weaker than the one before:
- a process's own NCCL lines state the addresses it uses (`Bootstrap : Using eth0:10.1.2.3<0>`: `net-address`);
- the address is a host's name (NCCL prints a peer's host name where it resolves one: `node2<42830>`);
- the reporter's NCCL connections (`Channel 00/0 : 5[0] -> 6[0] [receive] via NET/Socket/0`) narrow the ranks at
  one address (every rank of one host, or of a job on one machine, shares it) to those it exchanges data with.
Where none of these leaves a single rank, the address is said as it is and that it was not mapped; a loopback
address is mapped only by what a process's own lines state (on a machine of many ranks it is every one of them).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import AbstractSet, cast

from parsers.gather.evidence import Evidence
from parsers.judges.logs import identity
from parsers.model.events import ErrorEvent, ErrorKind, NetAddresses, TopoEdge, Truncated
from parsers.model.findings import Citation, cite

#: the lines that name a peer by address, and the sources whose peer_addr is a peer process (a launcher's names a host)
KINDS = frozenset({ErrorKind.CONNECTION_CLOSED, ErrorKind.CONNECTION_RESET, ErrorKind.SIZE_MISMATCH})
SOURCES = frozenset({"gloo", "nccl-log", "nccl-last-error"})
#: most reports read (every rank of a large job may print one per lost peer)
MAX_REPORTS = 4096


@dataclass(frozen=True)
class Report:
    """One line that names a peer by address: who printed it and the address (without its port)."""

    event: ErrorEvent
    file: str
    reporter: int | None
    addr: str


@dataclass(frozen=True)
class Named:
    """Whom an address names: `ranks` it may be (the reporter left out), the `host` where one is known, and `how`
    the files pair them ('address': the ranks' own NCCL lines state it; 'host': a host of that name; each with
    '+links' where the reporter's connections narrowed them; '' where nothing maps it)."""

    addr: str
    ranks: tuple[int, ...] = ()
    host: str | None = None
    how: str = ""
    said: Citation | None = None  #: the line that pairs the address with the rank

    @property
    def rank(self) -> int | None:
        """The one rank named, where the files leave exactly one."""
        return self.ranks[0] if len(self.ranks) == 1 and self.how else None


def address_of(peer_addr: str | None) -> str | None:
    """The address part of a peer as the readers keep it: 'addr:port' (gloo's '[addr]:port', its brackets dropped
    by the reader; an IPv6 address keeps its colons, the port is the last part) or 'addr<port>' (NCCL, where addr
    may be a host name: 'node2<42830>')."""
    if not peer_addr:
        return None
    text = peer_addr.strip()
    if "<" in text:
        text = text.split("<", 1)[0]
    elif ":" in text and text.rsplit(":", 1)[1].isdigit():
        text = text.rsplit(":", 1)[0]
    return text.strip("[]") or None


def loopback(addr: str) -> bool:
    return addr.startswith("127.") or addr in ("::1", "localhost")


def any_report(ev: Evidence) -> bool:
    """Whether any file holds a line that names a peer by address (most do not: the rank table is built only then)."""
    return any(type(e) is ErrorEvent and e.kind in KINDS and e.source in SOURCES
               and (e.peer_addr or e.kind == ErrorKind.SIZE_MISMATCH)
               for art in ev.artifacts if art.parsed for e in art.parsed.events)


def reports(ev: Evidence, ids: identity.Identities) -> list[Report]:
    """Every line of every file that names a peer by address, with its reporter's global rank where known."""
    out = []
    for art in ev.artifacts:
        for e in art.parsed.events if art.parsed else ():
            if type(e) is not ErrorEvent or e.kind not in KINDS or e.source not in SOURCES:
                continue
            addr = address_of(e.peer_addr)
            if addr is None and e.kind != ErrorKind.SIZE_MISMATCH:  # before NCCL 2.12 a size mismatch names no peer
                continue
            reporter = ids.resolve(e.origin)
            out.append(Report(e, art.cite, reporter if reporter is not None else art.rank, addr or ""))
            if len(out) >= MAX_REPORTS:
                return out
    return out


def book(ev: Evidence, ids: identity.Identities) -> dict[str, dict[int, Citation]]:
    """address -> {global rank: the line where that rank's process states it uses the address}."""
    out: dict[str, dict[int, Citation]] = {}
    for art in ev.artifacts:
        for e in art.parsed.events if art.parsed else ():
            if type(e) is not ErrorEvent or e.kind != ErrorKind.NET_ADDRESS:
                continue
            rank = ids.resolve(e.origin)
            rank = art.rank if rank is None else rank
            if rank is None:
                continue
            for addr in cast(NetAddresses, e.data).addresses or ():
                out.setdefault(str(addr), {}).setdefault(rank, cite(
                    f"{art.cite}" + (f":{e.origin.line}" if e.origin.line else "") + f": {e.message[:160]}",
                    tool="nccl-log", file=art.cite, line=e.origin.line))
    return out


def links(ev: Evidence, ids: identity.Identities) -> dict[int, tuple[set[int], set[int]]]:
    """Global rank -> (ranks that send to it, ranks it sends to) over NCCL's ring and channel connections."""
    out: dict[int, tuple[set[int], set[int]]] = {}
    for art in ev.artifacts:
        for e in art.parsed.events if art.parsed else ():
            if type(e) is not TopoEdge or e.kind not in ("ring", "channel"):
                continue
            a, b = ids.global_of(e.comm, e.src), ids.global_of(e.comm, e.dst)
            if a is not None and b is not None and a != b:
                out.setdefault(b, (set(), set()))[0].add(a)
                out.setdefault(a, (set(), set()))[1].add(b)
    return out


def hosts(ev: Evidence, found: list[Report]) -> set[str]:
    """The host names the files show (their own, and the reports' prefixes): an address that is one of them names
    that host."""
    return {a.host for a in ev.artifacts if a.host} | {r.event.origin.host for r in found if r.event.origin.host}


def _host_named(addr: str, seen: AbstractSet[str]) -> str | None:
    """The host an address names: a host name the files show, whole or as its first label (NCCL cuts its own
    prefix's host name at the first dot, and prints a peer's full name: 'gpu004.ds-a4-r02.abc.com<55693>')."""
    if loopback(addr) or addr[:1].isdigit() and addr.replace(".", "").isdigit():
        return addr if addr in seen else None  # an IPv4 address is a host name only where a file says it whole
    return addr if addr in seen else (addr.split(".")[0] if addr.split(".")[0] in seen else None)


def resolve(rep: Report, ids: identity.Identities, addresses: dict[str, dict[int, Citation]],
            linked: dict[int, tuple[set[int], set[int]]], seen: AbstractSet[str] = frozenset()) -> Named:
    """Whom one report's address names (see the module's doc); the reporter is never among them. A size mismatch
    that names no address (NCCL before 2.12) names the one rank the reporter's connections leave, if one."""
    if not rep.addr:
        near = _near(rep, linked) - {rep.reporter}
        return Named("", (next(iter(near)),), None, "links") if len(near) == 1 else Named("")
    said = {r: c for r, c in addresses.get(rep.addr, {}).items() if r != rep.reporter}
    how, host = ("address" if said else ""), None
    ranks = set(said)
    if not ranks and (host := _host_named(rep.addr, seen | {i.host for i in ids.ranks.values() if i.host})):
        ranks, how = {r for r, info in ids.ranks.items() if info.host == host} - {rep.reporter}, "host"
        if not ranks:
            return Named(rep.addr, (), host, how)
    if not ranks:
        return Named(rep.addr)
    hosts = {ids.ranks[r].host for r in ranks if r in ids.ranks and ids.ranks[r].host}
    host = host or (hosts.pop() if len(hosts) == 1 else None)
    near = _near(rep, linked)
    if len(ranks) > 1 and ranks & near:
        ranks, how = ranks & near, how + "+links"
    only = next(iter(ranks)) if len(ranks) == 1 else None
    return Named(rep.addr, tuple(sorted(ranks)), host, how, said.get(only) if only is not None else None)


def _near(rep: Report, linked: dict[int, tuple[set[int], set[int]]]) -> set[int]:
    """The ranks the reporter's NCCL connections reach on the report's side: those that send to it (it received
    the other size), those it sends to (it sent it), either (a lost connection). Only for NCCL's own reports: a
    gloo connection is none of NCCL's."""
    if rep.reporter not in linked or rep.event.source == "gloo":
        return set()
    senders, receivers = linked[rep.reporter]
    side = rep.event.data.side if type(rep.event.data) is Truncated else None
    return set(senders if side == "receiver" else receivers if side == "sender" else senders | receivers)

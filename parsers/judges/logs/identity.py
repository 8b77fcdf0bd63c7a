"""Who is who: global rank, host and pid of every process the evidence mentions.

Why: each source names processes differently (NCCL: host:pid and comm rank; c10d:
`[rankN]`; FR: the dumping rank; RAS: comm rank, pid and node IP). Verdicts must be
in global ranks and hosts, so everything is first mapped onto one table.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from parsers.gather.evidence import Evidence
from parsers.model.events import CommMember, Origin


@dataclass
class RankInfo:
    """What is known about one global rank, and which kinds of evidence it left."""

    rank: int
    host: str | None = None
    pids: set[int] = field(default_factory=set)
    kinds: set[str] = field(default_factory=set)  #: artifact kinds it left: fr-dump, nccl-log, rank-log, ...
    files: list[str] = field(default_factory=list)

    @property
    def pid(self) -> int | None:
        return min(self.pids) if len(self.pids) == 1 else (min(self.pids) if self.pids else None)


@dataclass
class Identities:
    """Rank table plus the lookups the correlation needs."""

    ranks: dict[int, RankInfo] = field(default_factory=dict)
    by_pid: dict[int, int] = field(default_factory=dict)
    by_host_pid: dict[tuple[str, int], int] = field(default_factory=dict)
    comm_ranks: dict[str, dict[int, int]] = field(default_factory=dict)  #: comm -> comm rank -> global rank
    comm_size: dict[str, int] = field(default_factory=dict)
    comm_members: dict[str, set[int]] = field(default_factory=dict)  #: comm -> global ranks known in it
    world_size: int | None = None
    unranked: list[str] = field(default_factory=list)  #: files whose process has no known global rank
    own: set[int] = field(default_factory=set)  #: ranks with a file of their own (not only lines in a merged log)
    aliases: dict[tuple[int, str], str] = field(default_factory=dict)  #: (global rank, alias) -> comm key
    alias_keys: dict[str, set[str]] = field(default_factory=dict)  #: alias -> every comm key it stands for
    #: the evidence leaves out ranks judged elsewhere (parsers.gather.source.Source.elsewhere): the members seen of a
    #: communicator are then not all of them
    partial: bool = False

    def canonical(self, comm: str, rank: int | None) -> str:
        """The key a comm goes by across sources, for an event of global rank `rank`.

        Why: a c10d line names a group 'pg:pg_C' (its description) where the same
        process's Flight Recorder dump keys it by its ranks. The rank's own dump decides;
        without one (the culprit often has none) an alias standing for a single group
        job-wide is taken; an ambiguous one ('mesh_tp' of many TP groups) stays as it is.
        """
        if rank is not None:
            found = self.aliases.get((rank, comm))
            if found is not None:
                return found
        keys = self.alias_keys.get(comm)
        if keys is not None and len(keys) == 1:
            return next(iter(keys))
        return comm

    def info(self, rank: int) -> RankInfo:
        found = self.ranks.get(rank)
        if found is None:
            found = self.ranks[rank] = RankInfo(rank)
        return found

    def resolve(self, origin: Origin | None) -> int | None:
        """Global rank of an event's origin, via its rank, else its (host, pid), else its pid."""
        if origin is None:
            return None
        if origin.rank is not None:
            return origin.rank
        if origin.pid is not None:
            if origin.host and (origin.host, origin.pid) in self.by_host_pid:
                return self.by_host_pid[(origin.host, origin.pid)]
            return self.by_pid.get(origin.pid)
        return None

    def global_of(self, comm: str, comm_rank: int | None) -> int | None:
        if comm_rank is None:
            return None
        return self.comm_ranks.get(comm, {}).get(comm_rank)


#: the largest world size believed (a log saying 'nranks 4000000000' is not a job)
MAX_WORLD = 1 << 20


def build(arts: Evidence) -> Identities:
    """Fill the rank table from every artifact's facts and every CommMember event."""
    ids = Identities(world_size=arts.world_size, partial=bool(arts.elsewhere))
    for art in arts.artifacts:
        rank = art.rank
        path = art.cite
        if rank is None:
            merged = art.parsed.facts.get("ranks") if art.parsed else None
            for r in merged or ():  # a launcher-merged log: every labelled rank left lines in it
                info = ids.info(int(r))
                info.kinds.add(art.kind)
                info.files.append(path)
            if not merged:
                ids.unranked.append(path)
            continue
        info = ids.info(rank)
        info.kinds.add(art.kind)
        info.files.append(path)
        if not art.merged:
            ids.own.add(rank)
        if art.host and not info.host:
            info.host = art.host
        pids = (art.parsed.facts.get("pids") if art.parsed else None) or ([art.pid] if art.pid else [])
        for pid in pids:
            info.pids.add(int(pid))
            ids.by_pid.setdefault(int(pid), rank)
            if info.host:
                ids.by_host_pid[(info.host, int(pid))] = rank
    for art in arts.artifacts:
        if not art.parsed:
            continue
        if art.parsed.facts.get("world_size"):
            ids.world_size = max(ids.world_size or 0, int(art.parsed.facts["world_size"]))
    for art in arts.artifacts:
        if not art.parsed:
            continue
        for ev in art.parsed.events:
            if type(ev) is CommMember:
                _learn_process(ids, ev, art.kind, art.cite)
                _member(ids, ev)
        size = art.parsed.facts.get("world_size")
        if size:
            ids.world_size = max(ids.world_size or 0, int(size))
    if ids.world_size and ids.world_size > MAX_WORLD:
        ids.world_size = None  # hostile or broken input: never loop over a size taken from data
    return ids


def _learn_process(ids: Identities, ev: CommMember, kind: str, path: str) -> None:
    """A process's rank in a world-sized communicator is its global rank: learn host and pid from it.

    Needed where one file holds many processes (a launcher-merged log), so no file-level rank exists.
    """
    o = ev.origin
    if o.pid is None or ev.comm_rank is None or not ev.nranks or ev.nranks != ids.world_size:
        return
    rank = o.rank if o.rank is not None else ev.comm_rank
    info = ids.info(rank)
    info.kinds.add(kind)
    if path not in info.files:
        info.files.append(path)
    if (o.host, o.pid) in ids.by_host_pid or (o.host is None and o.pid in ids.by_pid):
        return
    ids.by_pid.setdefault(o.pid, rank)
    if o.host:
        ids.by_host_pid[(o.host, o.pid)] = rank
    info.pids.add(o.pid)
    if o.host and not info.host:
        info.host = o.host


def _member(ids: Identities, ev: CommMember) -> None:
    grank = ids.resolve(ev.origin)
    for alias in ev.aliases or ():
        ids.alias_keys.setdefault(alias, set()).add(ev.comm)
        if grank is not None:
            ids.aliases[(grank, alias)] = ev.comm
    if ev.nranks:
        ids.comm_size[ev.comm] = max(ids.comm_size.get(ev.comm, 0), ev.nranks)
    members = ids.comm_members.setdefault(ev.comm, set())
    if ev.global_ranks:
        table = ids.comm_ranks.setdefault(ev.comm, {})
        for i, g in enumerate(ev.global_ranks):
            table.setdefault(i, g)
        members.update(ev.global_ranks)
        ids.comm_size[ev.comm] = max(ids.comm_size.get(ev.comm, 0), len(ev.global_ranks))
    if grank is not None:
        members.add(grank)
        if ev.comm_rank is not None:
            ids.comm_ranks.setdefault(ev.comm, {}).setdefault(ev.comm_rank, grank)

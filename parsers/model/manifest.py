"""Typed form of manifest.json, the index of a bundle, and its reading (`manifest_from_dict`).

Every rank (host, pid, global rank) and every collector run (status, timing, error,
files written) is named here, so an analysis can tell evidence that says "nothing
happened" from evidence that is missing. The records are the model both sides share: collectors
fill them, readers get them back from the file. Writing them (JSON encoding, the bundle writer)
is forensics/bundle/'s (`encode.py`, `writer.py`); reading checks the file first against
parsers/input/manifest_schema.py, the bounds of untrusted input.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from parsers.input.manifest_schema import check_manifest
from parsers.input.errors import ManifestError
from parsers.model.events import plausible_size

FORMAT = "hang-forensics-bundle"
VERSION = 1
MANIFEST_NAME = "manifest.json"


_FIELD_NAMES: dict[type, tuple[str, ...] | None] = {}  #: per class: its dataclass fields, None when not a dataclass
_LEAVES = frozenset({str, int, float, bool, type(None)})


def field_names(value: Any) -> tuple[str, ...] | None:
    """The dataclass fields of `value`'s class, None when it is no dataclass instance; looked up once per class."""
    cls = type(value)
    if cls not in _FIELD_NAMES:
        _FIELD_NAMES[cls] = (tuple(f.name for f in dataclasses.fields(value))
                             if dataclasses.is_dataclass(value) and not isinstance(value, type) else None)
    return _FIELD_NAMES[cls]


def plain(value: Any) -> Any:
    """`value` as plain data: dataclasses as dicts of their fields, lists, tuples and dicts rebuilt, the rest as is.

    Why not dataclasses.asdict: it deep-copies every leaf and looks up the fields of every
    instance; for the manifest of a 4,096-host job bundle (~940k values) that was ~2 s of the
    merge on this machine, ~3x this (benchmarks/fleet_fanout.py). Leaves here are strings,
    numbers, booleans and None, which need no copy."""
    if type(value) in _LEAVES:
        return value
    names = field_names(value)
    if names is not None:
        return {name: plain(getattr(value, name)) for name in names}
    if isinstance(value, list):
        return [plain(v) for v in value]
    if isinstance(value, tuple):
        return tuple(plain(v) for v in value)
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    return value


class CollectorNote(str):
    """A rank's collector that did not give its evidence, 'gdb: timeout (gdb did not answer in 30.0 s)', typed:
    `kind` ('gdb: timeout') is what many ranks share, `detail` (the tool's own error, with its seconds or pid)
    is each rank's own, so presentation folds the ranks by kind without reading the words back."""

    kind: str
    detail: str

    def __new__(cls, kind: str, detail: str = "") -> "CollectorNote":
        obj = str.__new__(cls, kind + (f" ({detail})" if detail else ""))
        obj.kind, obj.detail = kind, detail
        return obj

    def __getnewargs__(self) -> tuple[str, str]:  # type: ignore[override]  # copy and pickle keep the fields
        return self.kind, self.detail


class Status:
    """Outcome of one collector run. Plain strings so the JSON stays readable."""

    OK = "ok"  #: evidence gathered
    FAILED = "failed"  #: the tool ran and failed; see error
    TIMEOUT = "timeout"  #: the tool was killed at its time limit
    UNAVAILABLE = "unavailable"  #: the tool is not installed
    DENIED = "denied"  #: not permitted (ptrace, file mode)
    GONE = "gone"  #: the target process no longer exists
    SKIPPED = "skipped"  #: not asked for, or nothing to collect

    ALL = (OK, FAILED, TIMEOUT, UNAVAILABLE, DENIED, GONE, SKIPPED)


#: collectors' earlier names, as bundles written before a rename still say them -> the name now
COLLECTOR_ALIASES = {"nccl_recorder": "recorder"}


def collector_name(name: str) -> str:
    """A collector's name now, for a name read from a manifest (an earlier name included). Here, with the manifest,
    not in the registry of kinds: opening a bundle (parsers.gather.source) needs the name, not every reader."""
    return COLLECTOR_ALIASES.get(name, name)


@dataclass
class CollectorRecord:
    """One collector's run against one rank or one host."""

    name: str
    status: str
    seconds: float = 0.0
    error: str | None = None
    files: list[str] = field(default_factory=list)
    details: dict[str, Any] = field(default_factory=dict)


@dataclass
class ChildRecord:
    """A child process of a rank (a DataLoader worker, a helper it started), with what was collected.

    Children that inherit RANK are not ranks; they are kept here, linked to their parent,
    because a rank that waits on its worker is explained by the worker's own state.
    """

    pid: int
    ppid: int
    dir: str
    comm: str | None = None
    cmdline: list[str] = field(default_factory=list)
    state: str | None = None  #: state letter when collected (R, S, D, T, Z)
    wchan: str | None = None
    inherits_rank: bool = False  #: its environment carries the parent's RANK (a forked worker)
    depth: int = 1  #: 1 = child of the rank, 2 = grandchild
    collectors: list[CollectorRecord] = field(default_factory=list)


@dataclass
class RankRecord:
    """One process of a distributed job on one host, with what was collected from it."""

    host: str
    pid: int
    dir: str
    rank: int | None = None
    local_rank: int | None = None
    world_size: int | None = None
    local_world_size: int | None = None
    group_rank: int | None = None
    job_id: str | None = None
    cmdline: list[str] = field(default_factory=list)
    state_before: str | None = None
    state_after: str | None = None
    collectors: list[CollectorRecord] = field(default_factory=list)
    #: where `rank` came from: environ (RANK & co.), py-spy-locals, nccl-log, output-prefix; None: unknown
    rank_source: str | None = None
    ppid: int | None = None
    #: why this process was taken as one rank of its job when its environment names no rank
    job_evidence: list[str] = field(default_factory=list)
    children: list[ChildRecord] = field(default_factory=list)

    def collector(self, name: str) -> CollectorRecord | None:
        """The record of collector `name`, or None if it did not run."""
        return next((c for c in self.collectors if c.name == name), None)

    @property
    def label(self) -> str:
        """Short human name: 'rank 5 (hostA pid 4242)'."""
        who = f"rank {self.rank}" if self.rank is not None else "unranked process"
        return f"{who} ({self.host} pid {self.pid})"


@dataclass
class HostRecord:
    """One host that was asked for evidence, and how that went."""

    host: str
    status: str = Status.OK
    seconds: float = 0.0
    error: str | None = None
    dir: str | None = None
    collectors: list[CollectorRecord] = field(default_factory=list)
    #: collector name -> {runs, total_s, max_s} over this host's ranks and itself (forensics.collect.local)
    costs: dict[str, dict[str, float | int]] = field(default_factory=dict)


@dataclass
class MissingRank:
    """A rank the job should have but for which no process was found: itself evidence."""

    rank: int
    reason: str
    host: str | None = None
    job_id: str | None = None


@dataclass
class JobArtifact:
    """A job-level file that belongs to no single rank (launcher record, RAS answer, ...)."""

    kind: str
    path: str
    host: str | None = None
    rank: int | None = None


@dataclass
class Manifest:
    """The whole index. `format` and `version` guard readers against foreign files."""

    created: str
    tool_version: str
    format: str = FORMAT
    version: int = VERSION
    command: list[str] = field(default_factory=list)
    hosts: list[HostRecord] = field(default_factory=list)
    ranks: list[RankRecord] = field(default_factory=list)
    missing: list[MissingRank] = field(default_factory=list)
    artifacts: list[JobArtifact] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    interrupted: bool = False  #: collection was cut short (Ctrl-C, SIGTERM): what is here is what was gathered

    def to_dict(self) -> dict[str, Any]:
        """Plain data for json.dump (what dataclasses.asdict gives, built without its deep copies)."""
        return plain(self)

    @property
    def world_size(self) -> int | None:
        """The job's size its rank records state (the largest plausible one), or None: what bounds a rank or a
        peer the evidence and the digests name."""
        sizes = [size for r in self.ranks if (size := plausible_size(r.world_size))]
        return max(sizes) if sizes else None

    @property
    def complete(self) -> bool:
        """True when every collector that ran succeeded or was skipped, and every host answered."""
        fine = (Status.OK, Status.SKIPPED)
        if self.interrupted:
            return False
        hosts_ok = all(h.status == Status.OK for h in self.hosts)
        ranks_ok = all(c.status in fine for r in self.ranks for c in r.collectors)
        host_collectors_ok = all(c.status in fine for h in self.hosts for c in h.collectors)
        return hosts_ok and ranks_ok and host_collectors_ok


_FIELDS: dict[type, tuple[frozenset, tuple]] = {}


def _fields(cls: type) -> tuple[frozenset, tuple]:
    """(field names, required names) of a dataclass, computed once (a 100k-rank manifest builds 600k records)."""
    got = _FIELDS.get(cls)
    if got is None:
        fields = dataclasses.fields(cls)
        got = _FIELDS[cls] = (frozenset(f.name for f in fields),
                              tuple(f.name for f in fields
                                    if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING))
    return got


def _build(cls: type, data: Any, where: str) -> Any:
    """Build dataclass `cls` from a dict, naming the place of any bad or missing field."""
    if not isinstance(data, dict):
        raise ManifestError(f"{where}: expected an object, got {type(data).__name__}")
    names, required = _fields(cls)
    kwargs = {k: v for k, v in data.items() if k in names}
    absent = [n for n in required if n not in kwargs]
    if absent:
        raise ManifestError(f"{where}: missing field(s) {', '.join(absent)}")
    return cls(**kwargs)


def _printable(value: Any, depth: int = 0) -> Any:
    """The manifest with lone surrogates (a JSON '\\udcff') replaced in every string: they cannot be encoded,
    and a host or path holding one broke the text, JSON and HTML outputs. Depth is bounded by the schema."""
    if isinstance(value, str):
        return value.encode("utf-8", "replace").decode("utf-8") if not value.isascii() else value
    if depth > 64:
        return value
    if isinstance(value, dict):
        return {_printable(k, depth + 1): _printable(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list):
        return [_printable(v, depth + 1) for v in value]
    return value


def manifest_from_dict(data: Any, plain_text: bool = False) -> Manifest:
    """Validate and convert parsed manifest JSON. Raises ValueError with the faulty place.

    `plain_text`: the JSON text it was parsed from was ASCII without a `\\u` escape, so no string in it can
    hold what `_printable` replaces, and its walk over every value (millions at 100k ranks) is skipped."""
    if not isinstance(data, dict):
        raise ManifestError("manifest: expected a JSON object")
    if data.get("format") != FORMAT:
        raise ManifestError(f"manifest: format is {data.get('format')!r}, expected {FORMAT!r}")
    version = data.get("version")
    if not isinstance(version, int) or version > VERSION or version < 1:
        raise ManifestError(f"manifest: version {version!r} is not supported (this reader knows 1..{VERSION})")
    check_manifest(data)  # types and ranges of every field, before anything is built from them
    if not plain_text:
        data = _printable(data)
    man = _build(Manifest, data, "manifest")
    man.hosts = [_host(h, f"hosts[{i}]") for i, h in enumerate(data.get("hosts", []))]
    man.ranks = [_rank(r, f"ranks[{i}]") for i, r in enumerate(data.get("ranks", []))]
    man.missing = [_build(MissingRank, m, f"missing[{i}]") for i, m in enumerate(data.get("missing", []))]
    man.artifacts = [_build(JobArtifact, a, f"artifacts[{i}]") for i, a in enumerate(data.get("artifacts", []))]
    return man


def _collectors(items: Any, where: str) -> list[CollectorRecord]:
    if not isinstance(items, list):
        raise ManifestError(f"{where}.collectors: expected a list")
    return [_build(CollectorRecord, c, f"{where}.collectors[{i}]") for i, c in enumerate(items)]


def _rank(data: Any, where: str) -> RankRecord:
    rec = _build(RankRecord, data, where)
    rec.collectors = _collectors(data.get("collectors", []), where)
    kids = data.get("children", [])
    if not isinstance(kids, list):
        raise ManifestError(f"{where}.children: expected a list")
    rec.children = []
    for i, kid in enumerate(kids):
        child = _build(ChildRecord, kid, f"{where}.children[{i}]")
        child.collectors = _collectors(kid.get("collectors", []), f"{where}.children[{i}]")
        rec.children.append(child)
    return rec


def _host(data: Any, where: str) -> HostRecord:
    rec = _build(HostRecord, data, where)
    rec.collectors = _collectors(data.get("collectors", []), where)
    return rec

"""A host's digest: what the readers got from its ranks' and host's files, kept small, as versioned JSON.

Why: at 100,000 ranks, reading 600,000 raw files in one process is what makes analysis slow. Each
host already has its files when `collect` ends, so it reads them there, with the same readers
(`parsers.gather.evidence.read_file`) and the same model (`parsers.model`) as analysis, and writes
`hosts/<host>/digest.json` beside them: per file, the typed evidence (`Parsed`) with its lists capped
and its strings cut. Analysis rebuilds the evidence from the digests, then reads raw files only for
the ranks the class rules mark as odd ones out (`parsers.scale.classes`), and for any rank the verdict then
names that it has not read raw. Digest and raw read can disagree only where a cap dropped
something, and never about a rank the verdict names.

What a digest never carries: job-level files (launcher records, step series, analyzer reports), read
raw always. A digest is hostile input like any file of a bundle: its size is bounded, its format and
version checked, and only the model's own types are rebuilt from it, field by field, with simple types
checked (`DigestError` on anything else; analysis then reads that host's raw files and says so).
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import os
import stat
import sys
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterable

from parsers.input import bounded_json
from parsers.input.errors import FileFormatError
from parsers.model.events import (DATA_TYPES, CommMember, ErrorEvent, OpEvent,
                                  FAULT_FLAGS, Origin, Parsed, ProcessState, Progress, RasFinding, TopoEdge,
                                  fault_flags)
from parsers.model.looks import Look, SecondLook
from parsers.model.summaries import COMMS_CAP, SUMMARY_EDGES, TOP_FRAMES, Position, RankSummary, SummaryError
from parsers.model.samples import Share, StackSamples
from parsers.model.states import frozen
from parsers.scale.named_faults import Claims, exits_named
from parsers.model.stacks import Frame, ThreadStack
from parsers.readers.exception import PyException, TracebackFrame as ExcFrame
from parsers.readers.launcher import RankExit
from parsers.readers.proxy_dump import ProxyOp
from parsers.readers.recorder import CollRecord, ProxyOpRecord, RecorderState, StepRecord
from parsers.judges.exceptions import exceptions_by_rank, kept_exceptions
from parsers.judges.p2p_stacks import blocking_call, stack_op
from parsers.judges.recorder import wait_edges

if TYPE_CHECKING:  # the host's side only (make_digest): the merge of the classes reads no file and no reader's table
    from parsers.gather.evidence import Evidence

FORMAT = "hang-forensics-digest"
#: 2: every ErrorEvent's data is typed (tags such as events.DeviceFault, events.StoreWait that a version-1 reader does
#: not know, so it refuses the digest as newer rather than failing on a tag). Version 1 is still read: its dict data
#: of those kinds is typed when the event is rebuilt (ErrorEvent takes a dict and checks it field by field).
#: 3: a rank summary keeps its main thread's blocking send/recv and peer (`RankSummary.p2p`): a version-2 reader would
#: drop it unsaid, and its focus then lose the stack-peer matching's ranks, so it refuses the digest as newer
#: (its host read raw). Versions 1 and 2 are still read: their summaries say no p2p op (they kept none).
VERSION = 3
#: the oldest version this tool reads
OLDEST_VERSION = 1
DIGEST_NAME = "digest.json"
#: a host digest larger than this is refused unread (a host of 72 ranks at a few kB each is far below)
MAX_DIGEST_BYTES = 64 << 20
#: strings from data are cut to this many characters (a message, a frame's file name)
MAX_STR = 1000
#: nesting deeper than this in a digest is refused (the model nests a few levels)
MAX_DEPTH = 24

# caps per file (what keeps a digest at kilobytes a rank); the rank the verdict names is read raw anyway
OPS_PER_COMM = 16  #: last operations kept per communicator, sequence kind and comm rank
EVENT_CAP = 256  #: memberships, progress counters, topology edges, RAS findings kept per file
ERRORS_HEAD = ERRORS_TAIL = 32  #: first and last errors kept per file
THREADS_CAP = 64
MAIN_FRAMES, OTHER_FRAMES = 64, 16
EXCEPTIONS_CAP, EXC_FRAMES = 8, 32
#: ranks whose last exception a file keeps besides its last EXCEPTIONS_CAP (a console of many ranks' tracebacks)
EXCEPTION_RANKS = 32
NOTES_CAP, UNREAD_CAP, PROBLEMS_CAP = 200, 20, 20
#: notes the knowledge base matches are kept past NOTES_CAP, up to this many more (`reduce_parsed`'s `matched`)
MATCHED_NOTES_CAP = 2000
COLLS_CAP, ACTIVE_PROXY_CAP, DONE_PROXY_CAP = 32, 128, 16
PROC_THREADS_CAP = 1024

#: the model's types a digest may rebuild, by tag; nothing else is ever constructed from one
_TYPES: dict[str, type] = {}
for _cls in (Origin, CommMember, OpEvent, Progress, ErrorEvent, *DATA_TYPES, TopoEdge,
             RasFinding, ProcessState, Frame, ThreadStack, StackSamples, Share, RankExit, PyException, ExcFrame,
             RecorderState, CollRecord, ProxyOpRecord, StepRecord, ProxyOp, Look, SecondLook):
    _TYPES[f"{_cls.__module__.rsplit('.', 1)[-1]}.{_cls.__name__}"] = _cls
_TAG = {cls: tag for tag, cls in _TYPES.items()}
_FIELDS = {cls: {f.name: f for f in dataclasses.fields(cls) if f.init} for cls in _TYPES.values()}
#: the Parsed fields a digest carries (the rest are a job file's, never in a digest)
_PARSED_FIELDS = ("events", "lines", "unknown_lines", "problems", "stacks", "facts", "process", "host_facts", "exits",
                  "recorder", "notes", "exceptions", "samples", "unread", "second_look", "kernel_stamps")
#: characters of a kernel line's stamp a digest keeps (`[Mon Dec  7 17:32:58 2026]`, `[12345.678901]`, ISO forms)
STAMP_CHARS = 64


class DigestError(FileFormatError):
    """A digest that cannot be used: unreadable, another format or a newer version, or not the model's shape."""

    help = "the digest is not used: that host's raw files are read instead"


# ----------------------------------------------------------------------------- model <-> JSON


#: per model type: (field, its default or MISSING, whether it has a default factory), for `encode`'s loop
_ENCODED = {cls: tuple((name, f.default, f.default_factory is not dataclasses.MISSING)  # type: ignore[misc]
                       for name, f in fields.items()) for cls, fields in _FIELDS.items()}
#: the exact types `encode` gives back as they are (a subclass, such as an IntEnum, takes `_encode_other`)
_AS_IS = frozenset({type(None), bool, int, float})
if any(issubclass(cls, (str, int, float, list, tuple, set, frozenset, dict)) for cls in _TAG):
    raise TypeError("a model type that is also a builtin value: encode's dataclass branch would come first")


def encode(obj: Any, depth: int = 0, paths: dict[str, int] | None = None) -> Any:
    """A value of the model as JSON data: dataclasses tagged, tuples, sets and non-string keys marked,
    strings cut to MAX_STR; a string equal to one of `paths` (the file's own path as read, and as
    cited) is written as its number, so a bundle that moved is cited where it now is. Raises DigestError for a
    type the model does not have (that file is then not digested and analysis reads it raw).

    The exact scalar types, strings and the model's dataclasses are told by their type first: a digest
    encodes half a million values a thousand ranks, and the chain of isinstance checks was most of its cost."""
    if depth > MAX_DEPTH:
        raise DigestError("nested too deep")
    t = type(obj)
    if t in _AS_IS:
        return obj
    if t is str:
        return {"$p": paths[obj]} if paths and obj in paths else obj[:MAX_STR]
    deeper = depth + 1
    if t is list:  # the model's lists and tuples: told by type too, their scalar items taken as they are
        return _encode_items(obj, deeper, paths)
    if t is tuple:
        return {"$tu": _encode_items(obj, deeper, paths)}
    fields = _ENCODED.get(t)
    if fields is None:
        return _encode_other(obj, depth, paths)
    out: dict[str, Any] = {"$t": _TAG[t]}
    for name, default, factory in fields:
        value = getattr(obj, name)
        if default is not dataclasses.MISSING and value == default:
            continue
        if factory and not value:
            continue
        out[name] = value if type(value) in _AS_IS and deeper <= MAX_DEPTH else encode(value, deeper, paths)
    return out


def _encode_items(items: list | tuple, depth: int, paths: dict[str, int] | None) -> list:
    """`encode` of each item at `depth`: an exact None, bool, int or float as it is (what `encode` gives back for
    one within MAX_DEPTH), anything else through `encode`. Why: a rank's proxy dump is 1,900 ops of (peer, status,
    channel) tuples: a call a scalar was a fifth of a costly host's digest."""
    if depth > MAX_DEPTH:
        return [encode(x, depth, paths) for x in items]
    return [x if type(x) in _AS_IS else encode(x, depth, paths) for x in items]


def _encode_other(obj: Any, depth: int, paths: dict[str, int] | None) -> Any:
    """`encode` of a container, or of a subclass of a builtin value (an enum)."""
    if obj is None or isinstance(obj, (bool, int, float)):
        return obj
    if isinstance(obj, str):
        if paths and obj in paths:
            return {"$p": paths[obj]}
        return obj[:MAX_STR]
    if isinstance(obj, list):
        return [encode(x, depth + 1, paths) for x in obj]
    if isinstance(obj, tuple):
        return {"$tu": [encode(x, depth + 1, paths) for x in obj]}
    if isinstance(obj, (set, frozenset)):
        return {"$se": [encode(x, depth + 1, paths) for x in obj]}
    if isinstance(obj, dict):
        if all(isinstance(k, str) and not k.startswith("$") for k in obj):
            return {k[:MAX_STR]: encode(v, depth + 1, paths) for k, v in obj.items()}
        return {"$d": [[encode(k, depth + 1, paths), encode(v, depth + 1, paths)] for k, v in obj.items()]}
    raise DigestError(f"no digest form for {type(obj).__name__}")


def decode(data: Any, depth: int = 0, paths: tuple = ()) -> Any:
    """The model's value from `encode`'s JSON data (`paths`: what each path number stands for, where the
    file is now); DigestError on any other shape."""
    if depth > MAX_DEPTH:
        raise DigestError("nested too deep")
    t = type(data)
    if data is None or t is str or t is int or t is float or t is bool:
        return data
    if t is list:
        deeper = depth + 1
        if deeper <= MAX_DEPTH:  # a list of the model's objects (a file's events): each built directly
            return [x if type(x) in _PLAIN_TYPES else _build(x, deeper, paths) if type(x) is dict and "$t" in x
                    else decode(x, deeper, paths) for x in data]
        return [decode(x, deeper, paths) for x in data]
    if not isinstance(data, dict):
        raise DigestError(f"unexpected {type(data).__name__}")
    if "$t" in data:
        return _build(data, depth, paths)
    if len(data) == 1 and "$p" in data:
        n = data["$p"]
        if not isinstance(n, int) or isinstance(n, bool) or not 0 <= n < len(paths):
            raise DigestError("a path number out of range")
        return paths[n]
    if len(data) == 1 and "$tu" in data:
        items = _list(data["$tu"])
        if depth + 1 > MAX_DEPTH:
            return tuple(decode(x, depth + 1, paths) for x in items)
        # a plain JSON value is its own decoding (decode's first test): no call for each
        return tuple([x if type(x) in _PLAIN_TYPES else decode(x, depth + 1, paths) for x in items])
    if len(data) == 1 and "$se" in data:
        try:
            return set(decode(x, depth + 1, paths) for x in _list(data["$se"]))
        except TypeError as err:
            raise DigestError(f"a set of unhashable values: {err}") from None
    if len(data) == 1 and "$d" in data:
        out = {}
        for pair in _list(data["$d"]):
            if not isinstance(pair, list) or len(pair) != 2:
                raise DigestError("a mapping entry that is not a pair")
            try:
                out[decode(pair[0], depth + 1, paths)] = decode(pair[1], depth + 1, paths)
            except TypeError as err:
                raise DigestError(f"an unhashable key: {err}") from None
        return out
    if any(k.startswith("$") for k in data):
        raise DigestError("an unknown marker")
    return {k: v if type(v) in _PLAIN_TYPES else decode(v, depth + 1, paths) for k, v in data.items()}


def _list(value: Any) -> list:
    if not isinstance(value, list):
        raise DigestError("a list expected")
    return value


def _build(data: dict, depth: int, paths: tuple) -> Any:
    tag = data["$t"]
    cls = _TYPES.get(tag) if type(tag) is str else None
    if cls is None:
        raise DigestError(f"unknown type {str(tag)[:60]!r}")
    rules = _RULES[cls]
    kwargs = {}
    for name, raw in data.items():
        if name == "$t":
            continue
        try:
            rule = rules[name]
        except KeyError:
            raise DigestError(f"{cls.__name__} has no field {name[:60]!r}") from None
        if rule is None:
            kwargs[name] = raw if type(raw) in _PLAIN_TYPES else decode(raw, depth + 1, paths)
            continue
        types_, item, bool_ok, plain_ok = rule
        t = type(raw)
        if t in plain_ok:  # a plain JSON value of a type the field takes (the common case): nothing to decode
            # a short string is shared, not copied per event: JSON gives every comm id, op and host its own copy
            # (6 events a rank each naming the same comm: hundreds of MB at 100k ranks); interned strings are
            # freed with their last user
            kwargs[name] = sys.intern(raw) if t is str and len(raw) <= 64 else raw
            continue
        value = raw if t in _PLAIN_TYPES else decode(raw, depth + 1, paths)
        if not isinstance(value, types_) or not bool_ok and type(value) is bool \
                or item is not None and type(value) is list and any(not isinstance(x, item) for x in value):
            raise DigestError(f"{cls.__name__}.{name}: {type(value).__name__} where {_FIELDS[cls][name].type} belongs")
        kwargs[name] = value
    try:
        return cls(**kwargs)
    except (TypeError, ValueError) as err:
        raise DigestError(f"{cls.__name__}: {err}") from None


_SIMPLE = {"int": (int,), "str": (str,), "bool": (bool,), "float": (int, float), "None": (type(None),),
           "dict": (dict,), "list": (list,), "tuple": (tuple,)}


def _allowed(annotation: Any, owner: type) -> tuple[tuple[type, ...], type | None] | None:
    """What a field's annotation allows, as (types, type of a list's items or None): simple types, the
    model's own types ('Origin | None'), lists of either ('list[Frame]', 'list[int] | None'); None where an
    annotation is none of these (not checked here; the constructors and the judges' guards check those)."""
    if not isinstance(annotation, str):
        return None
    names = vars(sys.modules[owner.__module__])
    allowed: list[type] = []
    item: type | None = None
    for part in annotation.split("|"):
        part = part.strip().strip("'\"")
        base, _, inner = part.partition("[")
        inner = inner.rstrip("]").strip().strip("'\"")
        if base in _SIMPLE:
            allowed += _SIMPLE[base]
            if base == "list" and inner:
                found = _SIMPLE.get(inner, (names.get(inner),))[0]
                item = found if isinstance(found, type) and (found in _TAG or inner in _SIMPLE) else None
        elif isinstance(names.get(base), type) and names[base] in _TAG:
            allowed.append(names[base])
        else:
            return None
    return tuple(allowed), item


#: per type, per field: the types its value may have (None: not checked here); computed once
_ALLOWED = {cls: {name: _allowed(f.type, cls) for name, f in fields.items()} for cls, fields in _FIELDS.items()}
#: plain JSON values need no decoding (a path number is an object)
_PLAIN_TYPES = frozenset((type(None), int, float, bool, str))
#: _ALLOWED as _build reads it, per field: (types, item type, whether a bool passes (bool is an int to
#: isinstance: only a field that names bool takes one), the plain JSON types that pass as they are: exactly
#: those the isinstance check would let through)
_RULES = {cls: {name: None if rule is None else (rule[0], rule[1], bool in rule[0],
                                                 frozenset(t for t in _PLAIN_TYPES
                                                           if t in rule[0] and (t is not bool or bool in rule[0])))
                for name, rule in rules.items()}
          for cls, rules in _ALLOWED.items()}


# ----------------------------------------------------------------------------- bounding one file's evidence


def reduce_parsed(parsed: Parsed, matched: frozenset[int] = frozenset()) -> Parsed:
    """A copy of `parsed` with every list capped (see the caps above): kilobytes a file, whatever its size.

    What is kept is what the judges compare across ranks: every membership, the last operations of each
    communicator, the progress counters, the first and last errors, the last exception of each rank a file names
    (`kept_exceptions`), the main thread's stack whole, and the notes (kept lines) whose line numbers are in
    `matched` (those the knowledge base matches) past the cap."""
    out = dataclasses.replace(parsed)
    out.events = _reduce_events(parsed.events)
    out.stacks = [_cap_stack(t) for t in parsed.stacks[:THREADS_CAP]]
    # the exceptions the exceptions judge reads of the file: whichever rank each names, the copy files it alike
    out.exceptions = [_cap_exception(e) for e in kept_exceptions(parsed.exceptions, EXCEPTIONS_CAP, EXCEPTION_RANKS)]
    out.notes = _cap_notes(parsed.notes, matched)
    # each kept kernel line's own time (parsers.judges.kernel_times: a line from before the job is not counted):
    # without it a digest's host would count what the plain read of the same files leaves out
    kept = {note[0] for note in out.notes if isinstance(note, tuple) and note}
    out.kernel_stamps = {n: str(t)[:STAMP_CHARS] for n, t in parsed.kernel_stamps.items() if n in kept}
    out.unread = list(parsed.unread[:UNREAD_CAP])
    out.problems = list(parsed.problems[:PROBLEMS_CAP])
    out.exits = list(parsed.exits[:PROC_THREADS_CAP])
    out.host_facts = dict(list(parsed.host_facts.items())[:EVENT_CAP])
    if parsed.process is not None and len(parsed.process.threads) > PROC_THREADS_CAP:
        out.process = dataclasses.replace(parsed.process, threads=tuple(parsed.process.threads[:PROC_THREADS_CAP]))
    out.recorder = [_cap_recorder(s) for s in parsed.recorder]
    return out


def _cap_notes(notes: list, matched: frozenset[int]) -> list:
    """The first NOTES_CAP notes, and after them the notes whose line is in `matched` (MATCHED_NOTES_CAP at most),
    in file order. Why: a host's kernel log kept only its first 200 filtered lines, so an OOM kill or an Xid
    later in a long log reached the full read's verdict and not the digest's (the same bundle, two answers)."""
    head = list(notes[:NOTES_CAP])
    if len(notes) <= NOTES_CAP or not matched:
        return head
    later = [note for note in notes[NOTES_CAP:] if isinstance(note, tuple) and note and note[0] in matched]
    return head + later[:MATCHED_NOTES_CAP]


def _reduce_events(events: list) -> list:
    keep: list[int] = []
    counts: Counter = Counter()
    errors = [i for i, e in enumerate(events) if type(e) is ErrorEvent]
    kept_errors = set(errors[:ERRORS_HEAD]) | set(errors[-ERRORS_TAIL:])
    last_ops: dict[tuple, list[int]] = {}
    for i, ev in enumerate(events):
        cls = type(ev)
        if cls is OpEvent:
            last_ops.setdefault((ev.comm, ev.seq_kind, ev.comm_rank), []).append(i)
        elif cls is ErrorEvent:
            if i in kept_errors:
                keep.append(i)
        elif counts[cls] < EVENT_CAP:
            counts[cls] += 1
            keep.append(i)
    for idx in last_ops.values():
        keep += idx[-OPS_PER_COMM:]
    return [events[i] for i in sorted(keep)]


def _cap_stack(t: ThreadStack) -> ThreadStack:
    cap = MAIN_FRAMES if t.is_main else OTHER_FRAMES
    return t if len(t.frames) <= cap else dataclasses.replace(t, frames=t.frames[:cap])


def _cap_exception(e: PyException) -> PyException:
    return dataclasses.replace(e, frames=e.frames[-EXC_FRAMES:], chain=[_cap_exception(c) for c in e.chain[-4:]])


def _cap_recorder(s: RecorderState) -> RecorderState:
    """The newest collectives, the ops in flight and the newest finished ops, without their step slots
    (no judge reads those; the op's counters and last state say where it is): what the recorder judge's
    edges, progress ages and stalls read."""
    active = [op for op in s.proxy_ops if op.active][:ACTIVE_PROXY_CAP]
    done = sorted((op for op in s.proxy_ops if not op.active), key=lambda o: o.last_progress_ns)[-DONE_PROXY_CAP:]
    ops = [dataclasses.replace(op, steps=[]) for op in active + done]
    ops.sort(key=lambda o: o.op_index)
    return dataclasses.replace(s, colls=s.colls[-COLLS_CAP:], proxy_ops=ops)


def encode_parsed(parsed: Parsed, path: str = "", rel: str = "",
                  matched: frozenset[int] = frozenset()) -> dict[str, Any]:
    """One file's evidence, bounded, as JSON data (DigestError where the model holds a foreign type);
    `path` and `rel`: the file's path as read and as cited, written as path numbers 0 and 1; `matched`: the
    line numbers of notes kept past the cap (`reduce_parsed`)."""
    paths = {p: i for i, p in enumerate((path, rel, HOST_TOKEN)) if p}
    small = reduce_parsed(parsed, matched)
    out: dict[str, Any] = {"kind": parsed.kind}
    for name in _PARSED_FIELDS:
        value = getattr(small, name)
        if value:
            out[name] = encode(value, paths=paths)
    return out


def decode_parsed(data: Any, path: str = "", rel: str = "", host: str | None = None) -> Parsed:
    """The `Parsed` of one file from a digest, its path numbers read as `path`, `rel` and `host` (where the
    file is now, and the host it is filed under; DigestError on a foreign shape)."""
    if not isinstance(data, dict) or not isinstance(data.get("kind"), str):
        raise DigestError("a file's evidence without its kind")
    kwargs = {}
    for name, raw in data.items():
        if name == "kind":
            continue
        if name not in _PARSED_FIELDS:
            raise DigestError(f"a file's evidence has no field {name[:60]!r}")
        kwargs[name] = decode(raw, paths=(path, rel, host))
    for name in ("lines", "unknown_lines"):
        if not isinstance(kwargs.get(name, 0), int):
            raise DigestError(f"{name}: not a number")
    for name in ("events", "problems", "stacks", "exits", "recorder", "notes", "exceptions", "unread"):
        if not isinstance(kwargs.get(name, []), list):
            raise DigestError(f"{name}: not a list")
    for name in ("facts", "host_facts"):
        if not isinstance(kwargs.get(name, {}), dict):
            raise DigestError(f"{name}: not a mapping")
    _check_members(kwargs)
    return Parsed(kind=data["kind"][:100], **kwargs)


_MEMBER_TYPES = {"events": (CommMember, OpEvent, Progress, ErrorEvent, TopoEdge, RasFinding), "stacks": (ThreadStack,),
                 "exits": (RankExit,), "recorder": (RecorderState,), "exceptions": (PyException,)}


#: the same as sets of exact types: what decode builds is one of the model's types (none subclasses another)
#: or a plain value, so an item's type is in the set exactly where isinstance would accept it
_MEMBER_SETS = {name: frozenset(types) for name, types in _MEMBER_TYPES.items()}


def _check_members(kwargs: dict) -> None:
    for name, allowed in _MEMBER_SETS.items():
        items = kwargs.get(name)
        if items and not allowed.issuperset(map(type, items)):
            raise DigestError(f"{name}: an item of another type")
    if kwargs.get("process") is not None and not isinstance(kwargs["process"], ProcessState):
        raise DigestError("process: not a process state")
    if kwargs.get("samples") is not None and not isinstance(kwargs["samples"], StackSamples):
        raise DigestError("samples: not stack samples")
    stamps = kwargs.get("kernel_stamps", {})
    if not (isinstance(stamps, dict) and len(stamps) <= NOTES_CAP + MATCHED_NOTES_CAP and all(
            type(n) is int and isinstance(t, str) and len(t) <= STAMP_CHARS for n, t in stamps.items())):
        raise DigestError("kernel_stamps: not line -> stamp, at most one a kept note")
    for name in ("notes", "unread"):
        for item in kwargs.get(name, ()):
            if not (isinstance(item, (list, tuple)) and len(item) == 2 and isinstance(item[0], int)
                    and isinstance(item[1], str)):
                raise DigestError(f"{name}: not (line, text) pairs")


# ----------------------------------------------------------------------------- the digest document


def kb_key(kb: Any) -> str:
    """A short fingerprint of a knowledge base's line entries: which lines a read keeps as notes depends
    on them, so a digest made with another knowledge base is not used (its notes could differ)."""
    h = hashlib.sha256()
    for e in sorted((e for e in kb.entries if e.kind == "line"), key=lambda e: e.id):
        pattern = getattr(e.pattern, "pattern", None)
        h.update(f"{e.id}\0{e.needle}\0{pattern}\0{','.join(e.streams)}\n".encode())
    return h.hexdigest()[:16]


@dataclass
class HostDigest:
    """A digest read and checked: the host it speaks for, its folder, and its files' evidence, undecoded."""

    host: str
    dir: str
    kb: str
    files: dict[str, dict]  #: path under `dir` -> {'kind', 'error', 'parsed'} (parsed decoded on use)
    ranks: list = field(default_factory=list)  #: its rank summaries: as read, then (own_summaries) RankSummary
    host_findings: list[dict] = field(default_factory=list)
    created: str = ""
    foreign: int = 0  #: rank summaries left out: they spoke for no process of this host's own


#: rank summaries a digest may hold beyond its host's own processes (each is left out): more, and the digest is
#: refused whole, before any is looked at (one host's 200,000 summaries of other hosts' ranks once cost 37 s)
MAX_FOREIGN = 64
#: bytes a host's digest may take per process of its own (one rank's files' evidence, capped: tens of kB when
#: real; 2 MiB holds its lists at their caps): a larger file is refused before it is parsed
DIGEST_BYTES_PER_PROCESS = 2 << 20


def own_summaries(dig: HostDigest, own: dict[int, int | None], world: int | None = None) -> HostDigest:
    """`dig` with only the rank summaries that speak for the host's own processes (`own`: pid -> rank, from the
    manifest's records of that host): a host speaks for itself only. A summary of another pid, or of this pid
    with another rank, is left out and counted in `foreign`. Costs what the host's own ranks cost: a digest
    with more summaries than its processes (and MAX_FOREIGN) is refused (DigestError) unread."""
    if len(dig.ranks) > len(own) + MAX_FOREIGN:
        raise DigestError(f"{len(dig.ranks)} rank summaries for the {len(own)} processes of its host")
    kept = [r for r in dig.ranks if _speaks_for(r, own)]
    return dataclasses.replace(dig, ranks=typed_summaries(kept, world), foreign=len(dig.ranks) - len(kept))


def typed_summaries(docs: list[Any], world: int | None = None) -> list[RankSummary]:
    """A digest's rank summaries read as the model's type, each checked (DigestError naming the first that fails:
    a digest that lies about one of its own ranks is not used, and its host's raw files are read); `world`, where
    the manifest states it, bounds the peers they name."""
    out = []
    for i, doc in enumerate(docs):
        try:
            out.append(RankSummary.from_json(doc, world))
        except SummaryError as err:
            raise DigestError(f"rank summary {i}: {err}") from None
    return out


def _speaks_for(summary: Any, own: dict[int, int | None]) -> bool:
    if not isinstance(summary, dict):
        return False
    pid, rank = summary.get("pid"), summary.get("rank")
    if not _count(pid) or pid not in own:
        return False
    return own[pid] is None or (rank == own[pid] and _count(rank))


def _count(v: Any) -> bool:
    """A non-negative int below 2^31 (not a bool, a float, a string or a container)."""
    return type(v) is int and 0 <= v < 1 << 31


def own_processes(ranks: Iterable[Any]) -> dict[str, dict[int, int | None]]:
    """host -> pid -> rank of the manifest's rank records (what each host's digest may speak for)."""
    out: dict[str, dict[int, int | None]] = {}
    for r in ranks:
        out.setdefault(r.host, {})[r.pid] = r.rank
    return out


@dataclass(frozen=True)
class StatedJob:
    """What the manifest says of the job, that each host's digest is checked against: its rank records and its size.

    Why a type: a digest may speak for its host's own processes only, and name no rank or peer past the job's size;
    the readers of digests (digest first, the focus) took both as one positional tuple to stay under an argument
    count. The facts derived from the records are properties, made once per reading, not once a host (they walk
    every record: 12,500 hosts x 100,000 records read them for 20 minutes)."""

    ranks: Any  #: the manifest's rank records (host, pid, rank)
    world: int | None = None  #: the job's size the manifest states, if it does

    @classmethod
    def of(cls, manifest: Any) -> StatedJob:
        """What `manifest` (parsers.gather.source's) says of the job."""
        return cls(manifest.ranks, manifest.world_size)

    @functools.cached_property
    def processes(self) -> dict[str, dict[int, int | None]]:
        """host -> pid -> rank (`own_processes`): what each host's digest may speak for."""
        return own_processes(self.ranks)

    def own(self, host: str) -> dict[int, int | None]:
        """pid -> rank of `host`'s own processes (none: a host the manifest gives no process)."""
        return self.processes.get(host, {})


#: the host name files are read under when a digest is made: a value that came from the file's hint (not its
#: content) is then this token, written as a path number, and read back as the host the bundle files it under
#: now (the fleet's merge re-files a host's bundle under the name it reached the host by)
HOST_TOKEN = "hf-digest-host-5e2a91"


def make_digest(host: str, host_dir: str, files: dict[str, Any], ev: Evidence, host_findings: list, kb: str,
                created: str) -> dict[str, Any]:
    """The digest document of one host: its files' evidence (`parsers.scale.digest_first.encode_files`), a
    summary per rank (`rank_summary`) and the host judge's findings."""
    return {"format": FORMAT, "version": VERSION, "created": created, "host": host, "dir": host_dir, "kb": kb,
            "ranks": [summary.to_json() for _, summary in summaries_of(ev, host)], "host_findings": host_findings,
            "files": files}  # last: the merge of the classes reads the digest up to it (`read_summaries`)


def summaries_of(ev: Evidence, host: str | None = None) -> list[tuple[str, RankSummary]]:
    """(host, summary) of each rank of the evidence (of `host` only, when given): what a host's digest says of
    its ranks, and what analysis gathers rank by rank where the digests' classes are not the whole job. The
    files, recorder states and exits are indexed once (a rank's own are looked up, not searched for)."""
    logs: dict[tuple[Any, Any], list] = {}
    for art in ev.artifacts:
        if art.parsed:
            logs.setdefault((art.hints.host, art.hints.pid), []).append(art)
    recorder: dict[Any, list] = {}
    for st in ev.recorder:
        recorder.setdefault(st.pid, []).append(st)
    # a launcher exit is a rank's by the rule digest first and the focus read exits by (its rank, as the judges
    # match an exit to a rank; its host and pid), not by its pid alone (pids repeat from host to host)
    claims = Claims(r.record for r in ev.ranks)
    exits: dict[Any, list] = {}
    for n, x in exits_named(ev.exits):
        for key in claims.processes(n):
            exits.setdefault(key, []).append((x.returncode, x.exited_at))
    # a rank's last exception is the one the exceptions judge files under it (`exceptions_by_rank`: the rank its
    # line names, else its file's), over the files this evidence holds (a host's digest: that host's own)
    raised = exceptions_by_rank(ev.artifacts)
    return [(r.record.host, rank_summary(r, logs.get((r.record.host, r.record.pid), []), recorder.get(r.record.pid, []),
                                         exits.get((r.record.host, r.record.pid), []),
                                         raised.get(r.rank) if r.rank is not None else None))
            for r in ev.ranks if host is None or r.record.host == host]


def rank_summary(r: Any, logs: list, own: list, exits: list, raised: tuple[Any, Any] | None = None) -> RankSummary:
    """What one rank looks like, for people and the fleet merge: state, stack class and top frames, last op and
    seq per communicator, recorder waits, last exception, exit. `logs`: the parsed artifacts filed under its host
    and pid; `own`: its recorder states; `exits`: (returncode, exited_at) of its launcher records; `raised`: (its
    last exception, the file it was read from) as the exceptions judge files it (`exceptions_by_rank`)."""
    act = r.activity
    main = r.main_stack
    comms: dict[str, Position] = {}
    files = [art for art in r.files if art.parsed]
    # rank logs are not process files: their ops count too
    files += [art for art in logs if art.kind in ("nccl-log", "rank-log", "fr-dump")]
    for art in files:
        for e in art.parsed.events:
            if type(e) is OpEvent and (len(comms) < COMMS_CAP or e.comm in comms):
                prev = comms.get(e.comm)
                if prev is None or e.seq >= prev.seq:
                    comms[e.comm] = Position(e.op, e.seq, e.seq_kind, e.state)
    exc = f"{raised[0].type}: {raised[0].message}"[:MAX_STR] if raised is not None else None
    waits = [(hex(st.comm_id), op.peer, op.last_state, op.coll_seq)
             for st in own for op in st.proxy_ops if op.in_progress]
    op = stack_op(r.rank, blocking_call(main), None)  # the stack-peer matching's op (a peer past the job: refused)
    return RankSummary(r.rank, r.record.pid, r.state, act.kind, act.op, act.where,
                       tuple(f.label[:200] for f in (main.frames[:TOP_FRAMES] if main else [])), tuple(comms.items()),
                       tuple(waits[:SUMMARY_EDGES]), exc, tuple(exits[:8]), tuple(rank_flags(r, logs, exits)),
                       *_recorder_roles(own), p2p=(op.kind, op.peer) if op else None)


def rank_flags(r: Any, logs: list, exits: list) -> list[str]:
    """The rank's own oddities: frozen (its state, or its /proc state, is one the stacks judge names by itself:
    `parsers.model.states.frozen`), a collector problem, a live process without its state after, an exit, an
    exception, an error that is no wait on others. Made where the rank's files are (`logs`: the parsed artifacts
    under its host and pid)."""
    proc = r.proc
    flags = []
    if frozen(r) or (proc is not None and frozen(proc)):
        flags.append("frozen")
    if r.problems:
        flags.append("problems")
    # 'unstated' and 'exited' are no copy of the stacks judge's exited rule (a state letter of a process gone,
    # `states.gone`: in 'frozen' above). They say where its raw files matter: a process gone during collection
    # (no state after it: no judge reads that letter, but what it left may be cut short), and a launcher record
    # that names it (`named_faults.exits_named`: the judges read that record against the rank itself: its first
    # failure, its exit cited under it, a finished rank in no hang)
    if r.record.state_after is None and r.from_manifest:
        flags.append("unstated")
    if exits:
        flags.append("exited")
    # the 'exception' and 'error' flags go to the process whose files hold them, not to the rank a line names
    # (`exceptions.exception_rank`: whom the judge then names): a host's digest cannot flag another host's rank,
    # and the judge sees a `[rank3]:` traceback in rank 0's log only once rank 0's files are read raw
    faults = {flag for art in logs for flag in fault_flags(art.parsed)}
    flags += [flag for flag in FAULT_FLAGS if flag in faults]
    return flags


def _recorder_roles(states: list) -> tuple[tuple, tuple]:
    """The rank's place in each recorder communicator ((comm, comm rank, job rank)) and whom it waits on
    ((comm, peer's comm rank), the edges `parsers.judges.recorder.wait_edges` draws from its own states):
    what the root needs to find, over classes, the ranks others wait on."""
    if not states:
        return (), ()
    members = tuple((st.comm_hex, st.rank, st.env_rank) for st in states[:COMMS_CAP]
                    if st.env_rank is not None and st.rank >= 0)
    return members, tuple(sorted({(e.comm_id, e.peer) for e in wait_edges(states)})[:SUMMARY_EDGES])


def write_json(doc: dict[str, Any]) -> bytes:
    return json.dumps(doc, separators=(",", ":"), allow_nan=False).encode()


def read_digest(path: os.PathLike | str, own: dict[int, int | None] | None = None,
                world: int | None = None) -> HostDigest:
    """Open, bound and check one digest file (DigestError with the reason; never raises anything else); with
    `own` (pid -> rank of the host's processes), only its summaries of those (`own_summaries`); `world`: the job's
    size where the manifest states it (a peer past it refuses the digest)."""
    return _checked(_loads(_read(path, own, None)), own, world)


def read_summaries(path: os.PathLike | str, own: dict[int, int | None] | None = None,
                   world: int | None = None) -> HostDigest:
    """`read_digest` without its files' evidence (`files` empty): what the merge of the classes reads of every
    host. Why: the files' evidence is nine tenths of a digest and the class summary reads none of it; a digest
    written with its files last (`make_digest`) is read up to them and parsed without them (at 10,000 ranks the
    JSON of every whole digest was the largest cost of the focus). A digest of another order, or whose head
    does not parse as the whole document less its files, is read whole."""
    raw = _read(path, own, _FILES_LAST)
    at = raw.find(_FILES_LAST)
    if at >= 0:
        try:
            doc = _loads(raw[:at] + b"}")
            if isinstance(doc, dict) and "files" not in doc:
                return _checked(dict(doc, files={}), own, world)
        except DigestError:
            pass  # not the head of a digest written files last: read whole, and judged whole
        raw += _read(path, own, None, len(raw))
    return _checked(_loads(raw), own, world)


#: where a digest written by `make_digest` ends its head: its files' evidence, the last key
_FILES_LAST = b',"files":{'


def _read(path: os.PathLike | str, own: dict[int, int | None] | None, until: bytes | None, skip: int = 0) -> bytes:
    """The bytes of a digest file past `skip`, its size bounded first (whole, or up to the first `until`)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0))
    except OSError as err:
        raise DigestError(f"cannot open: {err.strerror or err}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise DigestError("not a regular file")
        if st.st_size > MAX_DIGEST_BYTES:
            raise DigestError(f"{st.st_size} bytes, over the {MAX_DIGEST_BYTES >> 20} MiB a digest may have")
        if own is not None and st.st_size > DIGEST_BYTES_PER_PROCESS * (len(own) + 1):
            raise DigestError(f"{st.st_size} bytes for the {len(own)} processes of its host (at most "
                              f"{DIGEST_BYTES_PER_PROCESS >> 20} MiB a process)")
        with os.fdopen(fd, "rb", closefd=False) as fh:
            fh.seek(skip)
            if until is None:
                return fh.read(MAX_DIGEST_BYTES + 1)
            head = bytearray()
            while (chunk := fh.read(1 << 15)) and len(head) <= MAX_DIGEST_BYTES:
                head += chunk
                if until in head[-len(chunk) - len(until):]:
                    break
            return bytes(head)
    except OSError as err:
        raise DigestError(f"cannot read: {err.strerror or err}") from None
    finally:
        os.close(fd)


def _loads(raw: bytes) -> Any:
    try:
        return bounded_json.loads(raw, finite=True)
    except (ValueError, RecursionError, MemoryError) as err:
        raise DigestError(f"not JSON: {str(err)[:200]}") from None


def _checked(doc: Any, own: dict[int, int | None] | None, world: int | None = None) -> HostDigest:
    dig = check_digest(doc)
    if own is None:
        return dataclasses.replace(dig, ranks=typed_summaries(dig.ranks, world))
    return own_summaries(dig, own, world)


def check_digest(doc: Any) -> HostDigest:
    """The schema and version check (the files' evidence is decoded, and checked, when used)."""
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise DigestError(f"not a {FORMAT} document")
    version = doc.get("version")
    if not isinstance(version, int) or isinstance(version, bool):
        raise DigestError("no version")
    if version > VERSION:
        raise DigestError(f"version {version} is newer than this tool reads ({VERSION})")
    if version < OLDEST_VERSION:
        raise DigestError(f"version {version} is not one this tool wrote")
    for key, typ in (("host", str), ("dir", str), ("kb", str), ("files", dict), ("ranks", list),
                     ("host_findings", list)):
        if not isinstance(doc.get(key), typ):
            raise DigestError(f"{key!r}: missing or not a {typ.__name__}")
    for rel, entry in doc["files"].items():
        if not isinstance(entry, dict) or not isinstance(entry.get("kind"), str) \
                or not isinstance(entry.get("error", ""), str) or not isinstance(entry.get("parsed", {}), dict):
            raise DigestError(f"file {rel[:80]!r}: not a digest entry")
        if rel.startswith("/") or ".." in rel.split("/") or "\x00" in rel:
            raise DigestError(f"file {rel[:80]!r}: not a path inside the host's folder")
    return HostDigest(host=doc["host"], dir=doc["dir"], kb=doc["kb"], files=doc["files"], ranks=doc["ranks"],
                      host_findings=doc["host_findings"], created=str(doc.get("created", "")))


__all__ = ["FORMAT", "VERSION", "DIGEST_NAME", "DigestError", "HostDigest", "encode", "decode", "encode_parsed",
           "decode_parsed", "make_digest", "read_digest", "read_summaries", "check_digest", "kb_key", "rank_summary",
           "summaries_of", "write_json"]

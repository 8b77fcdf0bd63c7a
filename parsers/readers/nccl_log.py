"""NCCL debug logs (NCCL_DEBUG=INFO/WARN/TRACE), 2.18 to 2.28+, wrapped or not.

Why these lines: init lines tie a process (host:pid) to a communicator rank and
commId; COLL lines (`AllReduce: opCount a ... comm 0x..`) are the per-rank op stream
whose missing entries name a culprit; Ring/Tree/Channel lines give the neighbours a
rank waits on; WARN lines say what broke and which peer address was involved.

Format facts (field notes): prefix `host:pid:tid [dev] NCCL INFO `; WARN adds
`file:line ` (2.30+: `file:line (function) `) before `NCCL WARN`; 2.26+ may put
`[YYYY-mm-dd HH:MM:SS] ` first. opCount is hex and counts kernel launches per comm.
Records may be glued together or start mid-line: every record start is searched for.
NCCL_DEBUG=TRACE with NCCL_DEBUG_SUBSYS=CALL adds an API trace, one line a call and no device
bracket: `host:pid:tid NCCL CALL ncclCommInitRank(comm, nranks, commIdHash, rank, dev)`, and every
collective or p2p call as `ncclAllReduce(sendbuff,recvbuff,count,datatype,op,root,comm,stream)`
(the replay tool's documented format; a timestamp may come first, NCCL_DEBUG_TIMESTAMP_LEVELS).
"""

from __future__ import annotations

import calendar
import re
from itertools import chain, islice
from typing import Callable, Iterable, NamedTuple

from parsers.model.events import (CommAborted, CommMember, ErrorEvent, ErrorKind, LocalPeer, OpEvent, Origin, Parsed,
                                  TopoEdge, normalise_op)
from parsers.readers.prefix import labels_are_line_numbers, short_host, strip_prefix
from parsers.readers import nccl_net, pasted_host, textline

#: records one physical line may be split into (glued writes of a few processes hold 2-3; a hostile line of
#: repeated headers is not allowed to become thousands of records)
MAX_PIECES = 64

_RECORD = re.compile(
    r"(?:\[(?P<ts>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:[.,]\d{1,9})?)\] )?"
    #: the host starts where a run of host characters starts (the lookbehind): a search tried every position of
    #: a long run of them, each backtracking 253 characters (a 10 MB file of dash rules: 17 s; the fuzzer found it)
    r"(?<![\w.-])(?P<host>[\w.-]{1,253}+):(?P<pid>\d{1,10}):(?P<tid>\d{1,10}) \[(?P<dev>[^\]]{0,32})\] "
    r"(?:(?P<src>[\w./-]{1,256}:\d{1,7})(?: \((?P<fn>[^)]{0,256})\))? )?"
    r"NCCL (?P<lvl>INFO|WARN|TRACE|ABORT)\s?"
)
#: `rest` (parent, color, key, commId: 72 characters the longest in tests/fixtures, sglang #3836) is bounded to 512:
#: an open `.*?` scanned to the line's end from every copy of the head on one long line (quadratic, issue 31)
_INIT = re.compile(
    r"comm (?P<ptr>0x[0-9a-f]+|\(nil\)) rank (?P<rank>\d+) nranks (?P<nranks>\d+) cudaDev (?P<cuda>-?\d++)"
    r"(?: nvmlDev (?P<nvml>-?\d++))?(?: busId (?P<bus>\w++))?(?P<rest>.{0,512}?)- ?Init(?: (?P<phase>START|COMPLETE))?"
)
_COMMID = re.compile(r"commId (0x[0-9a-f]+)")
_PARENT = re.compile(r"parent (0x[0-9a-f]+) (?:splitCount|childCount) (-?\d+) color (-?\d+)")
_NRANKS = re.compile(r"^comm (?P<ptr>0x[0-9a-f]+) rank (?P<rank>\d+) nRanks (?P<nranks>\d+) nNodes (?P<nnodes>\d+)")
_COLL = re.compile(
    r"^(?P<op>[A-Za-z]+): opCount (?P<oc>[0-9a-f]+) sendbuff \S+ recvbuff \S+ count (?P<count>\d+) "
    r"datatype (?P<dt>\d+) op (?P<redop>\d+) root (?P<root>-?\d+) comm (?P<ptr>0x[0-9a-f]+)"
    r"(?: \[nranks=(?P<nranks>\d+)\])?"
)
_RING = re.compile(r"^Ring (?P<ch>\d+) : (?P<prev>-?\d+) -> (?P<me>\d+) -> (?P<next>-?\d+)")
_TREE = re.compile(r"^Tree (?P<ch>\d+) : (?P<up>-?\d+) -> (?P<me>\d+) -> (?P<down>[-\d/]+)")
_TREES_OLD = re.compile(r"Trees((?: \[\d+\] [-\d/]+->\d+->-?\d+)+)")
_TREE_OLD_ONE = re.compile(r"\[(?P<ch>\d+)\] (?P<down>[-\d/]+)->(?P<me>\d+)->(?P<up>-?\d+)")
_RING_LIST = re.compile(r"^Channel (?P<ch>\d+)/(?P<n>\d+) :(?P<ranks>(?:\s+\d+)+)\s*$")
#: a connection of one channel: `Channel 00/0 : 3[3] -> 1[1] via P2P/IPC`; NCCL 2.3-2.6 print the same as
#: `Ring 00 : 3[3] -> 1[1] via P2P/IPC`, and a network hop without the device brackets
#: (`Ring 00 : 1 -> 4 [receive] via NET/IB/1/GDRDMA`)
_CONN = re.compile(
    r"^(?:Channel|Ring) (?P<ch>\d+)(?:/\d+)? : (?P<a>\d+)(?:\[[^\]]*\])? -> (?P<b>\d+)(?:\[[^\]]*\])? "
    r"(?:\[(?P<dir>send|receive)\] )?via (?P<via>\S+)"
)
_VERSION = re.compile(r"NCCL version (?P<v>\d+\.\d+\.\d+\S*)")
_CLOSED = re.compile(r"Connection closed by (?:remote peer|localRank) ?(?P<peer>\S+)?")
_IB = re.compile(r"Got completion from peer (?P<peer>\S+) with (?:status=(?P<st>[\w()]+)|error (?P<err>\d+))")
_TRAIL = re.compile(r"^[\w./-]+:\d+ -> \d+")
#: a record whose `host:pid:tid` was cut off (by the user, or a wrapper): `[0] misc/socket.cc:71 NCCL WARN ...`,
#: `NCCL INFO init.cc:1093 -> 1`. Read, but with no process identity.
_ANON = re.compile(
    r"^(?:\[(?P<dev>-?\d+)\] )?(?:(?P<src>[\w./-]+:\d+)(?: \((?P<fn>[^)]*)\))? )?NCCL (?P<lvl>INFO|WARN|TRACE|ABORT)\s?"
)
#: a record whose `host:pid:tid` is partly there: an empty host (`:166:1226 [0] misc/socket.cc:484 NCCL WARN`,
#: NVIDIA/nccl#1808), a host and no pid:tid (`gpu-server320 [5] misc/socket.cc:46 NCCL WARN`, #1920), a pid the
#: poster redacted (`host-01.example.com:XXXXXX [5] ibvwrap.c:262 NCCL WARN`, #2013). Read with what it has.
_PARTIAL = re.compile(
    r"^(?:\[(?P<ts>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:[.,]\d{1,9})?)\] )?"
    r"(?P<host>[\w.-]{0,253})(?::(?P<pid>\d{1,10}|X{1,16})(?::(?P<tid>\d{1,10}))?)? \[(?P<dev>-?\d{1,4})\] "
    r"(?:(?P<src>[\w./-]{1,256}:\d{1,7})(?: \((?P<fn>[^)]{0,256})\))? )?NCCL (?P<lvl>INFO|WARN|TRACE|ABORT)\s?"
)
#: the API trace (NCCL_DEBUG_SUBSYS=CALL): `gc01:41073:41128 NCCL CALL ncclCommInitRank(0x55d8c12613d0, 16,
#: 0x521631e3a56ecc2c, 0, 0)`; the arguments hold no parenthesis; a line's start (behind its wrappers)
_CALL = re.compile(
    r"^(?:\[(?P<ts>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:[.,]\d{1,9})?)\] )?"
    r"(?P<host>[\w.-]{1,253}):(?P<pid>\d{1,10}):(?P<tid>\d{1,10}) NCCL CALL (?P<fn>nccl[A-Za-z]{1,64})"
    r"\((?P<args>[^()]{0,2048})\)",
    re.MULTILINE,  # a line's start only: never a scan of every position of a hostile line
)
#: the collectives and p2p calls the trace prints with the 8 replayable arguments
_CALL_OPS = ("AllReduce", "AllGather", "ReduceScatter", "Broadcast", "Reduce", "Send", "Recv", "AllToAll",
             "Gather", "Scatter")
#: prefix of the comm key of traced calls: their positions count calls, not NCCL's opCount (kept apart)
CALL_COMM = "call:"
_SERVICE_CLOSED = re.compile(r"\[Service thread\] Connection closed by localRank (?P<lr>-?\d+)")
#: what lies between a comm's nranks and "- Abort COMPLETE" ("cudaDev 7 busId e4000 "): bounded, so a line of many
#: "comm ... nranks N" without the end costs each start a bounded look, not the rest of the line (quadratic before)
_ABORT = re.compile(r"comm (?P<ptr>0x[0-9a-f]+|\(nil\)) rank (?P<rank>-?\d+) nranks (?P<nranks>-?\d++)"
                    r".{0,256}?- Abort COMPLETE")
HEAD_LINES = 2000

#: ncclDataType_t numbers -> names (stable since NCCL 2.x).
DTYPES = {0: "int8", 1: "uint8", 2: "int32", 3: "uint32", 4: "int64", 5: "uint64", 6: "float16", 7: "float32",
          8: "float64", 9: "bfloat16", 10: "float8e4m3", 11: "float8e5m2"}


def looks_like(text: str) -> bool:
    """True when `text` (a file's start) holds NCCL debug records."""
    return _RECORD.search(text) is not None or _CALL.search(text) is not None


@textline.remembered_for_short_lines  # a pure test of the line: logs repeat lines
def looks_like_line(text: str) -> bool:
    """True when one prefix-stripped line is an NCCL record, its version banner, or a record
    whose host:pid:tid prefix was cut off."""
    if "NCCL" not in text:  # most lines: no regex at all (and no backtracking over a hostile 60 KB line)
        return False
    return _RECORD.search(text[:8192]) is not None or _ANON.match(text) is not None or text.startswith("NCCL version") \
        or _PARTIAL.match(text[:8192]) is not None or " NCCL CALL " in text and _CALL.search(text[:8192]) is not None


class _State:
    """Per-file context: NCCL prints the comm pointer on op lines and the commId only at init."""

    def __init__(self) -> None:
        self.ptr_to_comm: dict[tuple[int, str], str] = {}
        self.ptr_rank: dict[tuple[int, str], int] = {}
        self.last_ptr: dict[tuple[int, int], str] = {}  #: (pid, tid) -> comm ptr of the last init there
        self.members: dict[tuple[int, str], CommMember] = {}
        self.hosts: set[str] = set()  #: host names seen at clean record starts
        self.seen_hosts: set[str] = set()
        self.seen_pids: set[int] = set()
        self.wrap_ranks: set[int] = set()  #: launcher rank labels on NCCL records (an error trail is a line too)
        self.calls: dict[tuple[int, str], int] = {}  #: (pid, comm ptr) -> traced collective/p2p calls so far

    def comm_of(self, pid: int, ptr: str) -> str:
        return self.ptr_to_comm.get((pid, ptr), f"ptr:{pid}:{ptr}")


def parse_lines(lines: Iterable[str], file: str | None = None) -> Parsed:
    """Read NCCL records from lines (any wrapper around them is stripped first).

    Lines that are no NCCL record (a PyTorch watchdog line in an NCCL_DEBUG file) are still
    read by the other line readers: files are mixed in the wild.
    """
    return parse_pairs(enumerate(lines, 1), file)


def parse_pairs(pairs: Iterable[tuple[int, str]], file: str | None = None) -> Parsed:
    """parse_lines for (line number, line) pairs picked out of a bigger file (logscan's full scan):
    each record keeps its real line number; whether `[N] ` labels count lines is judged on the
    first HEAD_LINES picked, as parse_lines judges it on the first lines."""
    it = iter(pairs)
    head = list(islice(it, HEAD_LINES))
    return parse_numbered(chain(head, it), file, numbered=labels_are_line_numbers([t for _, t in head]))


def parse_numbered(pairs: Iterable[tuple[int, str]], file: str | None = None, numbered: bool = False) -> Parsed:
    """parse_lines for (line number, line) pairs: a caller that picked the NCCL lines out of a
    bigger file keeps their real line numbers. `numbered`: a leading `[N] ` counts lines."""
    out = Parsed(kind="nccl-log")
    st = _State()
    for lineno, raw in pairs:
        out.lines += 1
        if textline.is_absurd(raw):
            out.unknown_lines += 1
            continue
        raw = textline.matched_part(raw)
        if "NCCL" not in raw:
            _other(out, raw, file, lineno, numbered)
            continue
        if " NCCL CALL " in raw and _traced_call(out, st, raw, file, lineno, numbered):
            continue
        first = _RECORD.match(raw)
        if first is not None:  # the common case: a bare NCCL line, no wrapper to strip
            text, host_hint, rank_hint = raw.rstrip("\r\n"), None, None
        else:
            text, pre = strip_prefix(raw)
            host_hint = pre.host
            rank_hint = pre.rank if pre.rank is not None else (None if numbered else pre.label)
            first = _RECORD.match(text)
        if first is not None and text.find(" NCCL ", first.end()) < 0:
            starts = [first]
        else:  # glued records or a record starting mid-line: find every start
            starts = list(islice(_RECORD.finditer(text), MAX_PIECES))
        if not starts:
            if text.startswith("NCCL version"):
                m = _VERSION.search(text)
                if m:
                    out.facts["nccl_version"] = m.group("v")
                    continue
            anon = _ANON.match(text) or _PARTIAL.match(text)
            if anon:
                _anonymous(out, anon, text, host_hint, rank_hint, file, lineno)
                continue
            _other(out, raw, file, lineno, numbered)
            continue
        if len(starts) == 1 and starts[0].start() == 0 and starts[0].group("host") in st.hosts:
            cuts = [0]  # the common case, nothing to repair
        else:
            cuts = [_clean_start(st, text, m) for m in starts]
        for i, m in enumerate(starts):
            end = cuts[i + 1] if i + 1 < len(starts) else len(text)
            _record(out, st, m, text[m.end():end].strip(), host_hint, file, lineno, cuts[i], rank_hint)
    _finish(out, st)
    return out


def _other(out: Parsed, raw: str, file: str | None, lineno: int, numbered: bool) -> None:
    """A line that is no NCCL record: the other line readers get it; what none knows is counted."""
    text, pre = strip_prefix(raw)
    if not text:
        return
    rank = pre.rank if pre.rank is not None else (None if numbered else pre.label)
    events = textline.match_text(text, Origin(host=pre.host, pid=pre.pid, rank=rank, file=file, line=lineno))
    if events:
        out.events.extend(events)
    elif textline.looks_known(text):
        out.note_unread(lineno, text)
    elif not textline.is_benign(text):
        textline.note_unknown(out, lineno, text)


def _traced_call(out: Parsed, st: _State, raw: str, file: str | None, lineno: int, numbered: bool) -> bool:
    """One line of the API trace (NCCL_DEBUG_SUBSYS=CALL), bare or behind a launcher's prefix; False if
    the line is no trace line. ncclCommInitRank names the process's rank, the communicator's size and
    device; each collective/p2p call is an op at its position among this process's calls on that comm."""
    m = _CALL.match(raw)
    host_hint, rank = None, None
    if m is None:
        text, pre = strip_prefix(raw)
        m = _CALL.match(text)
        if m is None:
            return False
        host_hint = pre.host
        rank = pre.rank if pre.rank is not None else (None if numbered else pre.label)
    pid, tid = int(m.group("pid")), int(m.group("tid"))
    host = short_host(m.group("host")) or host_hint
    st.seen_hosts.add(host)
    st.seen_pids.add(pid)
    if rank is not None:
        st.wrap_ranks.add(rank)
    out.facts["traced_calls"] = out.facts.get("traced_calls", 0) + 1
    fn, args = m.group("fn"), [a.strip() for a in m.group("args").split(",")]
    origin = Origin(host, pid, rank, file, lineno)
    if (fn == "ncclCommInitRank" and len(args) == 5
            and all(a.lstrip("-").isdigit() for a in (args[1], args[3], args[4]))):
        ptr, nranks, hashed, me, dev = args
        origin.device = int(dev) if int(dev) >= 0 else None
        key = (pid, ptr)
        comm = hashed if hashed.startswith("0x") else st.comm_of(pid, ptr)
        st.ptr_to_comm[key], st.ptr_rank[key] = comm, int(me)
        st.last_ptr[(pid, tid)] = ptr
        if key not in st.members:
            st.members[key] = CommMember(comm=comm, comm_rank=int(me), nranks=int(nranks), origin=origin, comm_ptr=ptr,
                                         source="nccl-log")
            out.events.append(st.members[key])
        return True
    name = fn[4:]
    if name in _CALL_OPS and len(args) == 8 and args[2].isdigit() and args[3].isdigit() \
            and args[5].lstrip("-").isdigit():
        ptr = args[6]
        op = normalise_op(name) or name.lower()
        n = st.calls.get((pid, ptr), 0)
        st.calls[(pid, ptr)] = n + 1
        peer = int(args[5]) if op in ("send", "recv", "broadcast", "reduce") else None
        out.events.append(OpEvent(
            comm=CALL_COMM + st.comm_of(pid, ptr), comm_rank=st.ptr_rank.get((pid, ptr)), op=op, seq=n, origin=origin,
            seq_kind="call", state="enqueued", count=int(args[2]), dtype=DTYPES.get(int(args[3]), args[3]), peer=peer,
            source="nccl-log", time_ns=stamp_ns(m.group("ts"))))
    return True  # ncclGetUniqueId, ncclGroupStart/End, ncclCommDestroy...: understood, nothing to weigh


def _anonymous(out: Parsed, m: re.Match, text: str, host: str | None, rank: int | None, file: str | None,
               lineno: int) -> None:
    """An NCCL record without (all of) host:pid:tid: WARNs and versions still count, the rest is a trail."""
    dev = m.group("dev")
    named = m.groupdict().get("host")  # _PARTIAL's: the host and pid it does print
    pid = m.groupdict().get("pid")
    origin = Origin(short_host(named) if named else host, int(pid) if pid and pid.isdigit() else None, rank, file,
                    lineno, device=int(dev) if dev and dev.lstrip("-").isdigit() else None)
    msg = text[m.end():].strip()
    if m.group("lvl") == "WARN":
        _warn(out, msg, origin, m.groupdict().get("ts"))
    elif _TRAIL.match(msg):
        out.facts["error_trails"] = out.facts.get("error_trails", 0) + 1
    else:
        out.facts["other_records"] = out.facts.get("other_records", 0) + 1


def stamp_ns(ts: str | None) -> int | None:
    """`2026-12-01 10:00:00.123456` (NCCL_DEBUG_TIMESTAMP_FORMAT `[%F %T.%6f] `) as ns, read as UTC.

    Why UTC: NCCL prints local time without a zone; only differences between ranks are used
    (who enters a collective last), and those hold when every host keeps the same zone."""
    if not ts:
        return None
    try:
        whole, _, frac = ts.replace(",", ".").partition(".")
        day, clock = whole.split(" ")
        y, mo, d = (int(x) for x in day.split("-"))
        h, mi, sec = (int(x) for x in clock.split(":"))
        secs = calendar.timegm((y, mo, d, h, mi, sec, 0, 0, 0))
    except ValueError:
        return None
    return secs * 1_000_000_000 + (int(frac.ljust(9, "0")[:9]) if frac else 0)


def _clean_start(st: _State, text: str, m: re.Match) -> int:
    """Where a record really starts. Glued records ('... Init STARTvm:495:495 [0] NCCL') make the
    host match swallow the end of the previous record; a known host name as suffix fixes that."""
    start = m.start("host") if m.group("ts") is None else m.start()
    host = m.group("host")
    if host not in st.hosts and st.hosts:
        for k in range(1, len(host)):  # longest known host that is a suffix: O(len) set lookups
            if host[k:] in st.hosts:
                return start + k
    if m.start() == 0 or text[m.start() - 1].isspace():
        st.hosts.add(host)
    return m.start()


class _Rec(NamedTuple):
    """One NCCL record being read: its header match, its message (the text after the header), where it came from."""

    m: re.Match
    msg: str
    origin: Origin
    pid: int
    tid: int


def _record(out: Parsed, st: _State, m: re.Match, msg: str, wrap_host: str | None, file: str | None,
            lineno: int, start: int | None = None, wrap_rank: int | None = None) -> None:
    """Interpret one NCCL record; uninterpreted messages are counted, not errors.

    Why a table: each message form (an op line, an init line, the topology's ring/tree/channel lines, the
    version, an error trail, a finished comm, a closed proxy connection) has its own small reader in
    _MESSAGE_FORMS, tried in turn; the first that reads the message ends it."""
    pid, tid = int(m.group("pid")), int(m.group("tid"))
    host = short_host(m.group("host"))
    if start is not None and m.group("ts") is None and start > m.start("host"):
        host = short_host(m.group("host")[start - m.start("host"):])
    dev = m.group("dev")
    device = int(dev) if dev.isdigit() else None  # NCCL's bracket is the CUDA device, never a rank
    origin = Origin(host, pid, wrap_rank, file, lineno, device=device)  # a launcher's rank label is the global rank
    st.seen_hosts.add(host)
    st.seen_pids.add(pid)
    if wrap_rank is not None:
        st.wrap_ranks.add(wrap_rank)
    if m.group("lvl") == "WARN":
        _warn(out, msg, origin, m.group("ts"))
        return
    rec = _Rec(m, msg, origin, pid, tid)
    for form in _MESSAGE_FORMS:
        if form(out, st, rec):
            return
    out.facts["other_records"] = out.facts.get("other_records", 0) + 1


def _op_line(out: Parsed, st: _State, r: _Rec) -> bool:
    """A traced collective or point-to-point call (`AllReduce: opCount 3 ... comm 0x.. [nranks=8] ...`)."""
    msg = r.msg
    if not (msg.startswith(("AllReduce:", "AllGather:", "ReduceScatter:", "Broadcast:", "Reduce:", "Send:", "Recv:",
                            "AllToAll:", "SendRecv:", "Gather:", "Scatter:")) or ": opCount " in msg[:40]):
        return False
    c = _COLL.match(msg)
    if not c:
        return False
    ptr = c.group("ptr")
    op = normalise_op(c.group("op")) or c.group("op")
    peer = int(c.group("root")) if op in ("send", "recv", "broadcast", "reduce") else None
    out.events.append(OpEvent(
        comm=st.comm_of(r.pid, ptr), comm_rank=st.ptr_rank.get((r.pid, ptr)), op=op,
        seq=int(c.group("oc"), 16), origin=r.origin, seq_kind="opCount", state="enqueued",
        count=int(c.group("count")), dtype=DTYPES.get(int(c.group("dt")), c.group("dt")), peer=peer,
        source="nccl-log", time_ns=stamp_ns(r.m.group("ts"))))
    return True


def _init_line(out: Parsed, st: _State, r: _Rec) -> bool:
    c = "Init " in r.msg and " nranks " in r.msg and _INIT.search(r.msg)
    if not c:
        return False
    _init(out, st, c, r.msg, r.origin, r.tid)
    return True


def _nranks_line(out: Parsed, st: _State, r: _Rec) -> bool:
    """`comm 0x.. rank 3 nRanks 8 ...`: which comm this thread's next topology lines are about."""
    c = _NRANKS.match(r.msg)
    if not c:
        return False
    st.last_ptr[(r.pid, r.tid)] = c.group("ptr")
    st.ptr_rank.setdefault((r.pid, c.group("ptr")), int(c.group("rank")))
    return True


def _ring_line(out: Parsed, st: _State, r: _Rec) -> bool:
    if not r.msg.startswith("Ring "):
        return False
    c = _RING.match(r.msg)
    if c:
        _edges(out, st, r.pid, r.tid, r.origin, "ring", int(c.group("ch")),
               [(int(c.group("prev")), int(c.group("me"))), (int(c.group("me")), int(c.group("next")))])
        return True
    c = _CONN.match(r.msg)
    if c:
        _edges(out, st, r.pid, r.tid, r.origin, "channel", int(c.group("ch")), [(int(c.group("a")), int(c.group("b")))])
        return True
    return False


def _tree_line(out: Parsed, st: _State, r: _Rec) -> bool:
    c = r.msg.startswith("Tree ") and _TREE.match(r.msg)
    if not c:
        return False
    me, up = int(c.group("me")), int(c.group("up"))
    pairs = [(me, up)] + [(int(d), me) for d in c.group("down").split("/")]
    _edges(out, st, r.pid, r.tid, r.origin, "tree", int(c.group("ch")), pairs)
    return True


def _trees_old_line(out: Parsed, st: _State, r: _Rec) -> bool:
    """Older NCCL's one `Trees [0] a->b->c/d/e ...` line for all channels."""
    c = "Trees" in r.msg and _TREES_OLD.search(r.msg)
    if not c:
        return False
    for t in _TREE_OLD_ONE.finditer(c.group(1)):
        me, up = int(t.group("me")), int(t.group("up"))
        pairs = [(me, up)] + [(int(d), me) for d in t.group("down").split("/")]
        _edges(out, st, r.pid, r.tid, r.origin, "tree", int(t.group("ch")), pairs)
    return True


def _channel_line(out: Parsed, st: _State, r: _Rec) -> bool:
    if not r.msg.startswith("Channel "):
        return False
    c = _CONN.match(r.msg)
    if c:
        a, b = int(c.group("a")), int(c.group("b"))
        _edges(out, st, r.pid, r.tid, r.origin, "channel", int(c.group("ch")), [(a, b)])
        return True
    c = _RING_LIST.match(r.msg)
    if c:
        ranks = [int(x) for x in c.group("ranks").split()]
        pairs = list(zip(ranks, ranks[1:] + ranks[:1])) if len(ranks) > 1 else []
        _edges(out, st, r.pid, r.tid, r.origin, "ring", int(c.group("ch")), pairs)
        return True
    return False


def _version_line(out: Parsed, st: _State, r: _Rec) -> bool:
    """NCCL's version banner: read even when its version is not (the line is no other record)."""
    if not (r.msg.startswith("NCCL version") or "NCCL version" in r.msg[:20]):
        return False
    c = _VERSION.search(r.msg)
    if c:
        out.facts["nccl_version"] = c.group("v")
    return True


def _trail_line(out: Parsed, st: _State, r: _Rec) -> bool:
    """One line of an error's trail (`... -> 2`): counted, the first kept."""
    if not _TRAIL.match(r.msg):
        return False
    out.facts["error_trails"] = out.facts.get("error_trails", 0) + 1
    out.facts.setdefault("first_trail", r.msg[:120])
    return True


def _finished_line(out: Parsed, st: _State, r: _Rec) -> bool:
    """A comm's `Abort COMPLETE` / `Destroy COMPLETE`: kept; an abort is an event."""
    msg = r.msg
    if not ("Abort COMPLETE" in msg or "Destroy COMPLETE" in msg):
        return False
    out.facts.setdefault("finished_comms", []).append(msg)
    c = _ABORT.search(msg)
    if c:
        out.events.append(ErrorEvent(kind="nccl-abort", message=msg, origin=r.origin, source="nccl-log",
                                     data=CommAborted(c.group("ptr"), int(c.group("rank")), int(c.group("nranks")))))
    return True


def _service_closed_line(out: Parsed, st: _State, r: _Rec) -> bool:
    c = _SERVICE_CLOSED.search(r.msg)
    if not c:
        return False
    # a local peer's proxy connection went away: that peer process ended or aborted
    out.events.append(ErrorEvent(kind="peer-closed", message=r.msg, origin=r.origin, source="nccl-log",
                                 data=LocalPeer(int(c.group("lr")))))
    return True


def _net_address_line(out: Parsed, st: _State, r: _Rec) -> bool:
    ev = nccl_net.addresses(r.msg, r.origin)  # the addresses this process uses: who a peer's address is
    if ev is None:
        return False
    out.events.append(ev)
    return True


#: NCCL INFO messages by form, in the order _record tries them
_MESSAGE_FORMS: tuple[Callable[[Parsed, _State, _Rec], bool], ...] = (
    _op_line, _init_line, _nranks_line, _ring_line, _tree_line, _trees_old_line, _channel_line, _version_line,
    _trail_line, _finished_line, _service_closed_line, _net_address_line,
)


def _init(out: Parsed, st: _State, c: re.Match, msg: str, origin: Origin, tid: int) -> None:
    pid, ptr = origin.pid, c.group("ptr")
    rest = c.group("rest") or ""
    cid = _COMMID.search(rest)
    parent = _PARENT.search(rest)
    key = (pid, ptr)
    if cid:
        comm = cid.group(1)
    elif parent:
        # Split communicator: same parent and color -> same comm on every member. Not splitCount:
        # it counts the splits this process took part in (seen, NCCL 2.28.9: one group was
        # splitCount 2 on one member and 1 on the other, whose process was in fewer groups).
        comm = f"{st.comm_of(pid, parent.group(1))}/color{parent.group(3)}"
    else:
        comm = st.ptr_to_comm.get(key, f"ptr:{pid}:{ptr}")
    st.ptr_to_comm[key] = comm
    st.ptr_rank[key] = int(c.group("rank"))
    st.last_ptr[(pid, tid)] = ptr
    if key in st.members:
        if cid:  # a later line with the real commId wins over a derived key
            st.members[key].comm = comm
        else:
            st.ptr_to_comm[key] = st.members[key].comm
        return
    member = CommMember(comm=comm, comm_rank=int(c.group("rank")), nranks=int(c.group("nranks")), origin=origin,
                        comm_ptr=ptr, parent=st.comm_of(pid, parent.group(1)) if parent else None, source="nccl-log")
    st.members[key] = member
    out.events.append(member)


def _edges(out: Parsed, st: _State, pid: int, tid: int, origin: Origin, kind: str, channel: int,
           pairs: list[tuple[int, int]]) -> None:
    ptr = st.last_ptr.get((pid, tid))
    if ptr is None:  # topology printed on another thread than init: take the pid's latest comm
        ptr = next((p for (q, _), p in reversed(list(st.last_ptr.items())) if q == pid), None)
    comm = st.comm_of(pid, ptr) if ptr else f"pid:{pid}"
    for a, b in pairs:
        if a >= 0 and b >= 0 and a != b:
            out.events.append(TopoEdge(comm=comm, src=a, dst=b, kind=kind, origin=origin, channel=channel))


def _warn(out: Parsed, msg: str, origin: Origin, ts: str | None) -> None:
    for ev in pasted_host.match_line(msg, origin):  # 'Cuda failure ...', driver/runtime mismatch: typed too
        ev.source, ev.timestamp = "nccl-log", ts
        out.events.append(ev)
    m = _IB.search(msg)
    if m:
        out.events.append(ErrorEvent(kind="ib-completion", message=msg, origin=origin, peer_addr=m.group("peer"),
                                     timestamp=ts, source="nccl-log"))
        return
    m = _CLOSED.search(msg)
    if m:
        out.events.append(ErrorEvent(kind="connection-closed", message=msg, origin=origin, peer_addr=m.group("peer"),
                                     timestamp=ts, source="nccl-log"))
        return
    if (ev := nccl_net.size_mismatch(msg, origin, ts)) is not None:  # the peer's size and its own, typed
        out.events.append(ev)
        return
    kind = ErrorKind.NCCL_TIMEOUT if "timeout" in msg.lower() or "timed out" in msg.lower() else ErrorKind.NCCL_WARN
    out.events.append(ErrorEvent(kind=kind, message=msg, origin=origin, timestamp=ts, source="nccl-log"))


def _labelled_ranks(out: Parsed, wrap_ranks: set[int] = frozenset()) -> None:
    """Name the global ranks the lines' prefixes carry (Open MPI `[1,N]<stdout>:`, Slurm `N: `, `[rankN]:`).

    Why: an NCCL log merged by mpirun or srun carries each process's rank in its prefix, not in
    NCCL's own records (whose bracket is a device); without this the file's ranks count as silent.
    A comm rank already chosen for a one-process file stays; labels only add what it lacks. Records that
    make no event (an error trail `init.cu:915 -> 2`) still show their rank printed lines (`wrap_ranks`).
    """
    labelled = sorted(set(wrap_ranks) | {e.origin.rank for e in out.events if getattr(e, "origin", None) is not None
                                         and e.origin.rank is not None})
    if len(labelled) > 1:
        out.facts["ranks"] = labelled
        out.facts.pop("rank", None)
    elif labelled:
        out.facts.setdefault("rank", labelled[0])


def _ranks_by_device(out: Parsed, world_members: list[CommMember]) -> bool:
    """One process that holds different ranks of world-sized communicators on different devices drives
    several GPUs (nccl-tests `-g N`, ncclCommInitAll): it holds one rank per device, so each record takes
    the rank of its device (NCCL's bracket) and the file names no single rank. True when that is the case.
    (Before 2.19 an init line has no commId, so each device's communicator is only known by its pointer:
    the members are matched by size, not by comm.)

    Why: taking the first init's rank for the whole file put rank 1's lines (device 1) on rank 0
    and called rank 1 silent (nccl-tests #124, one process on two GPUs).
    """
    procs = {(m.origin.host, m.origin.pid) for m in world_members}
    if len(procs) != 1:  # members of several processes (a merged log): each process has its own rank
        return False
    proc = procs.pop()
    by_device: dict[int, int] = {}
    for m in world_members:
        if m.origin.device is not None:
            by_device.setdefault(m.origin.device, m.comm_rank)
    if len(set(by_device.values())) < 2:
        return False
    for ev in out.events:
        origin = getattr(ev, "origin", None)
        if (origin is not None and origin.rank is None and origin.device in by_device
                and (origin.host, origin.pid) == proc):
            origin.rank = by_device[origin.device]
    return True


def _finish(out: Parsed, st: _State) -> None:
    """Resolve comm pointers seen before their init line, and name the process's global rank.

    PyTorch initialises the default (world) group first, so the process's global rank
    is its rank in the first largest communicator it joined.
    """
    for ev in out.events:
        if isinstance(ev, (OpEvent, TopoEdge)) and ev.comm.startswith("ptr:"):
            _, pid, ptr = ev.comm.split(":", 2)
            key = (int(pid), ptr)
            if key in st.ptr_to_comm:
                ev.comm = st.ptr_to_comm[key]
                if isinstance(ev, OpEvent) and ev.comm_rank is None:
                    ev.comm_rank = st.ptr_rank.get(key)
    members = [e for e in out.events if isinstance(e, CommMember)]
    if members and len({m.origin.pid for m in members}) > 1:  # several processes in one file: no single rank
        out.facts["world_size"] = max(m.nranks or 0 for m in members)
    elif members:
        biggest = max(m.nranks or 0 for m in members)
        world = next(m for m in members if (m.nranks or 0) == biggest)
        out.facts["world_size"] = biggest
        out.facts["world_comm"] = world.comm
        if not _ranks_by_device(out, [m for m in members if (m.nranks or 0) == biggest]):
            out.facts["rank"] = world.comm_rank
    _labelled_ranks(out, st.wrap_ranks)
    for key, seen in (("hosts", st.seen_hosts), ("pids", st.seen_pids)):
        if seen:
            vals = sorted(seen)
            out.facts[key] = vals
            if len(vals) == 1:
                out.facts[key[:-1]] = vals[0]

"""PyTorch c10d messages in rank stdout/stderr: watchdog, PG status, dump signals.

Why: the waiting ranks' watchdog lines say which collective (SeqNum, OpType) of which
process group timed out and how far each rank got (last enqueued / completed); the
culprit, asked to dump, often prints only its own smaller counters. Forms by era
(field notes): `[E ProcessGroupNCCL.cpp:737] [Rank r]` (before 2.0), NumelIn/NumelOut
(2.1), `[rankN]:[E ...]` (2.3), timestamped with 9-digit fractions (later). PG tags:
`[PG 1 Rank 0]`, `[PG 0 (default_pg) Rank 7]`, `[PG ID 11 PG GUID 119 Rank 1]`,
`[PG ID 4 PG GUID 20(mesh_tp) Rank 1]`. `[rankN]` is the global rank; `Rank r` is the
rank inside the group. Gloo errors are matched in parsers.readers.gloo.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Callable

from parsers.input.ints import as_int
from parsers.model.events import (TYPED_DATA, BarrierWait, C10dSaid, CollectiveSide, CollectiveStack,
                                  CollectiveTimeout, DesyncReport, DumpAsked, ErrorEvent, ErrorKind, Fingerprint,
                                  Heartbeat, NcclFailure, NetFailure, Origin, Progress, StatedTimeout, StoreWait,
                                  TorchFrame, normalise_op)

#: glog header, bracketed (`[E1206 18:44:12.7152 ProcessGroupNCCL.cpp:607] `, `[E ProcessGroupNCCL.cpp:737] `)
#: or full (`I1028 12:13:38.405081 632355 ProcessGroupNCCL.cpp:843] `, torch 1.12/1.13)
#: a glog header: bracketed anywhere in the line, or bare at its start (two patterns, not one alternation: the
#: bracketed one then starts with a literal '[' the engine jumps to, instead of trying every position)
_GLOG = re.compile(r"\[(?P<lvl>[EWIF])(?P<md>\d{3,4})? ?(?P<time>\d\d:\d\d:\d\d\.\d++)? ?(?:\d++ )?"
                   r"(?P<src>[\w.]+:\d+)\] ")
_GLOG_BARE = re.compile(r"(?P<lvl>[EWIF])(?P<md>\d{4}) (?P<time>\d\d:\d\d:\d\d\.\d+) \d+ (?P<src>[\w./]+:\d+)\] ")
#: the group's name is bounded: a search restarts at every '[PG 0(' of a long line, and an open `[^)]*` scanned
#: to the line's end from each (quadratic). Real names are short ('default_pg', 'mesh_ulysses': 12 characters
#: the longest in tests/fixtures); 256 is 20 times that
_PG = re.compile(
    r"\[PG (?:ID )?(?P<pg>\d+)(?: PG GUID ?(?P<guid>[\w:]*+))?\s*+(?:\((?P<name>[^)]{0,256})\))?\s*Rank (?P<r>\d+)\]"
)
_PLAIN_RANK = re.compile(r"\[Rank (?P<r>\d+)\]")
_WORK = r"Work\w*\((?:SeqNum=(?P<seq>\d++), )?OpType=(?P<op>\w++)(?:, NumelIn=(?P<nin>\d++), NumelOut=(?P<nout>\d++))?"
#: `:** ` too: a user's markdown bold around the phrase, kept when the line is pasted (sglang #3932:
#: `[Rank 4] **Watchdog caught collective operation timeout:** WorkNCCL(SeqNum=151721, ...`).
#: What lies between the op and 'Timeout(ms)=' is bounded (', ' in every real line; 256 leaves room for fields
#: a later torch may add): an open `.*?` scanned to the line's end from every copy of the head on one long
#: line, which is quadratic (issue 31)
_WATCHDOG = re.compile(
    r"Watchdog caught collective operation timeout:(?:\*\*)? " + _WORK + r".{0,256}?Timeout\(ms\)=(?P<tmo>\d+)\)"
    r"(?: ran for (?P<ran>\d+) milliseconds)?"
)
#: the gap before 'raised' bounded as in _WATCHDOG (', Timeout(ms)=1000000) ': 23 characters the longest real one)
_ASYNC = re.compile(r"Collective " + _WORK + r".{0,256}?raised the following async exception: (?P<what>.*)")
_FAILURE = re.compile(
    r"failure detected by watchdog at work sequence id: (?P<seq>\d+) PG status: last enqueued work: (?P<enq>-?\d+),"
    r" last completed work: (?P<done>-?\d+)"
)
_DETECTED = re.compile(r"(?:detected by watchdog at work|Timeout at NCCL work): (?P<seq>-?\d+)")
_LAST = re.compile(r"last enqueued NCCL work: (?P<enq>-?\d+), last completed NCCL work: (?P<done>-?\d+)", re.I)
#: 'monitoring thread' to 'timed out'/'stuck' bounded to 512 characters (a sentence; no fixture has this form): an
#: open `.*` scanned to the line's end from every 'monitoring thread' of a long line (quadratic)
_HEARTBEAT = re.compile(r"[Hh]eartbeat monitor timed out|monitoring thread.{0,512}(?:timed out|stuck)"
                        r"|watchdog got stuck")
_TERMINATE = re.compile(r"Terminating the process after attempting to dump debug info")
_DUMP = re.compile(
    r"Received a (?:dump signal|global timeout)|dump signal|Dumping (?:nccl|fr) trace|[Ff]light ?[Rr]ecorder"
    r"|dump debug info|dumps? to finish"
)
#: whose timeout made a rank dump: 'due to a collective timeout from  rank 107' (another rank, a global
#: rank: the dump request goes through the store), or 'from this local rank' (its own)
_DUMP_FROM = re.compile(r"collective timeout from\s+rank (?P<r>\d{1,7})\b")
#: torch 2.5+: the watchdog found no Flight Recorder entry for the timed-out work (the recorder is off):
#: a fact about the evidence, not a dump and not an error of the rank
_FR_OFF = re.compile(r"Stack trace of the failed collective not found")
#: torch 2.5+ with the Flight Recorder on: the Python stack that enqueued the timed-out work, one frame a line
#: below the heading, innermost first ('#2 train_step from /work/tee_worker.py:24'), then a blank line
_FR_STACK = re.compile(r"Stack trace of the failed collective:\s*$")
_FR_FRAME = re.compile(r"^#(?P<i>\d{1,4}) (?P<func>\S{1,256}) from (?P<file>\S.{0,1023}):(?P<line>\d{1,9})$")
COLLECTIVE_STACK = ErrorKind.COLLECTIVE_STACK  #: the heading's event; its data["frames"] fill from the lines below
MAX_STACK_FRAMES = 64
_PENDING = re.compile(r"workMetaList_\.size\(\) ?= ?(?P<n>\d+)")
_STORE = re.compile(r"DistStoreError: (?:Timed out after (?P<secs>\d+) seconds waiting for (?:clients|workers)\. "
                    r"(?P<joined>\d+)/(?P<expected>\d+) (?:clients|workers) joined|(?P<other>.+))")
#: PyTorch 1.x's rendezvous after the store (distributed_c10d._store_based_barrier): each rank adds 1 to a key and
#: polls until the count is the world size. 'Timed out initializing process group in store based barrier on rank: 0,
#: for key: store_based_barrier_key:1 (world_size=4, worker_count=16, timeout=0:30:00)' (PseCo #15, metaseq #52);
#: worker_count is the count the key holds, which a reused store can push past world_size
_STORE_BARRIER = re.compile(r"Timed out initializing process group in store based barrier on rank: (?P<rank>\d{1,9}), "
                            r"for key: \S{1,200} \(world_size=(?P<expected>\d{1,9}), worker_count=(?P<joined>\d{1,9})")
_NCCL_ERROR = re.compile(r"NCCL error(?: in: (?P<where>\S+),|:) (?P<what>.*?)(?:, NCCL version (?P<v>[\w.+-]+))?"
                         r"(?:, Traceback \(most recent call last\):)?$")
#: where a bare 'NCCL error: <what>' (no 'in: file:line') is the error itself and not prose: at the start of the
#: line, as an exception's message ('RuntimeError: NCCL error: unhandled cuda error', vLLM's and SGLang's pynccl
#: wrappers), or as vLLM's worker report ('Exception in worker VllmWorkerProcess while processing method
#: init_device: NCCL error: ...')
_NCCL_ERROR_AT = re.compile(r"^(?:NCCL error|(?:\w+\.)*\w*(?:Error|Exception): NCCL error"
                            r"|Exception in worker \S+ while processing method \w+: NCCL error)")
_TERMINATE_CALLED = re.compile(r"terminate called after throwing an instance of '(?P<type>[^']+)'")
_RAY_UNHANDLED = re.compile(r"Unhandled exception: (?P<type>[\w:]+)\.")
#: exceptions of distributed runtimes named by their type at the line's start; Horovod's HorovodInternalError
#: carries the failed NCCL call ('horovod.common.exceptions.HorovodInternalError: ncclAllReduce failed: unhandled
#: cuda error', horovod #3618)
_PY_EXC = re.compile(r"^(?P<type>(?:\w+\.)*(?:DistBackendError|DistStoreError|DistNetworkError|DistError"
                     r"|ChildFailedError|HorovodInternalError))\b")
#: c10d's own internal assert raised as a plain RuntimeError ('RuntimeError: ncclComm != nullptr INTERNAL ASSERT FAILED
#: at "/pytorch/torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp":4043, please report a bug to PyTorch. Parent
#: communicator missing in eager initialization mode.', awslabs/keys_values' ring-attention note): an exception of
#: that rank
#: torch.distributed asked for a backend its build lacks: 'RuntimeError: Distributed package doesn't have NCCL built in'
#: (facebookresearch/xformers#464, in pytest's summary line)
_NO_BACKEND = re.compile(r"^(?P<type>RuntimeError): Distributed package doesn't have (?:NCCL|Gloo|MPI|UCC) built in")
_C10D_ASSERT = re.compile(r"^(?P<type>RuntimeError): [^\n]{0,400}? INTERNAL ASSERT FAILED at \"[^\"\n]{0,400}/c10d/")
#: NCCL's result code as PyTorch prints it under the error ('ncclUnhandledCudaError: Call to CUDA function failed.',
#: 'ncclInvalidUsage: This usually reflects invalid usage of NCCL library.': two codes do not end in Error)
_NCCL_CODE = re.compile(r"^(?P<code>nccl(?:[A-Z]\w*Error|InvalidUsage|InvalidArgument)): (?P<what>.*)")
#: a network plugin's failed request, as NCCL passes it up and PyTorch prints it under 'Last error:'
#: (aws-ofi-nccl, NCCL 2.28.8:
#: 'NET/OFI Request 0x7f14cc5b60c0 completed with error. RC: 113. Error: 2 (UNDELIVERABLE).')
#: The error's name is bounded (libfabric's fi_strerror text: 'UNDELIVERABLE', 13 characters in the real line; 256):
#: an open `[^)]*` scanned to the line's end from every copy of the head on one long line (quadratic)
_NET_PLUGIN = re.compile(r"NET/(?P<net>\w+) Request \S+ completed with error\. RC: (?P<rc>-?\d+)\."
                         r"(?: Error: (?P<err>-?\d+) \((?P<what>[^)]{0,256})\))?")
#: NCCL's socket error as PyTorch prints it under 'Last error:' (NVIDIA/nccl#2076, NCCL 2.21.5: 'socketProgressOpt:
#: Call to recv from 172....<33759> failed : Connection reset by peer'): the peer address is the one that went away
_SOCKET_DETAIL = re.compile(r"^socketProgress(?:Opt)?: Call to (?P<what>recv|send) (?:from|to) (?P<peer>\S{1,300}) "
                            r"failed : (?P<why>.{1,200})$")
#: ProcessGroupWrapper (TORCH_DISTRIBUTED_DEBUG=DETAIL) checks every collective across ranks. Forms: torch 1.12
#: 'CollectiveFingerPrint(OpType=ALLREDUCE, ...' (the other side sometimes only 'REDUCE.'), later with
#: TensorShape/TensorDtypes, 2.x with 'SequenceNumber=18, ' first (barrier: 'SequenceNumber=1OpType=BARRIER')
_FINGERPRINT = (r"CollectiveFingerPrint\((?:SequenceNumber=(?P<{p}seq>\d{{1,12}}),? ?)?OpType=(?P<{p}op>\w{{1,64}})"
                r"(?:, TensorShape=\[(?P<{p}shape>[\d, ]{{0,200}})\])?")
_RUNNING = re.compile(r"Running collective: " + _FINGERPRINT.format(p=""))
#: The rest of the first fingerprint (dtypes, device types: 206 characters for one tensor in the longest real line,
#: ms-swift #9443) is bounded to 4096, room for some twenty tensors' TensorOptions: an open `.*?` scanned to the
#: line's end from every copy of the head on one long line (quadratic)
_WRAPPER_MISMATCH = re.compile(
    r"Detected mismatch between collectives on ranks\. Rank (?P<a>\d{1,9}) is running collective: (?:"
    + _FINGERPRINT.format(p="a_") + r"|(?P<a_bare>[A-Z_]{1,64})\b).{0,4096}?"
    r", but Rank (?P<b>\d{1,9}) is running collective: (?:"
    + _FINGERPRINT.format(p="b_") + r"|(?P<b_bare>[A-Z_]{1,64})\b)"
)
#: torch 1.10's one-sided form: the raising rank's own fingerprint, no other side ('Rank 0 is running inconsistent
#: collective: CollectiveFingerPrint(OpType=BROADCAST, TensorShape=[4], ...', speechbrain #1166)
_WRAPPER_INCONSISTENT = re.compile(
    r"Detected mismatch between collectives on ranks\. Rank (?P<a>\d{1,9}) is running inconsistent collective: "
    + _FINGERPRINT.format(p="a_")
)
#: TORCH_NCCL_DESYNC_DEBUG's report (the timing-out rank reads every rank's last collective from the store,
#: TraceUtils.h): the ranks it calls lagging, 'ranks [47] are the lagging ranks that caused this timeout. They
#: never joined any collectives', '[47] joined but didn't finish collective #41207 (count from 1)', '[7] finished
#: collective #182, but didn't join collective #183 (count from 1)'; then its snapshot, one line per state and op,
#: '[0, 1, 2] started ALLREDUCE' (pytorch/pytorch#152623). Rank lists are ', '-joined.
_RANK_LIST = r"\[(?P<ranks>\d{1,7}(?:, \d{1,7}){0,4095})\]"
_DESYNC_LAGGING = re.compile(
    r"(?:ranks )?" + _RANK_LIST + r" (?:(?P<never>are the lagging ranks that caused this timeout)"
    r"|(?P<inside>joined but didn't finish) collective #(?P<in_seq>\d{1,12})"
    r"|finished collective #(?P<fin_seq>\d{1,12}), but didn't join collective #\d{1,12})"
)
_DESYNC_STATE = re.compile(r"^" + _RANK_LIST + r" (?P<state>started|finished) (?P<op>_?[A-Z][A-Z_]{0,63})$")
MAX_DESYNC_RANKS = 4096  #: ranks one desync line may list (bounded: hostile input)
_ASPECTS = re.compile(r"Collectives differ in the following aspects: ?(?P<what>.{1,300})")
_FRAME = re.compile(r'File "(?P<file>[^"]*torch/distributed/[^"]*)",? line (?P<line>\d+), in (?P<fn>\w+)')
_PG_TIMEOUT = re.compile(r"^TIMEOUT\(ms\): (?P<ms>\d+)\s*$")
_MARKERS = ("ProcessGroup", "Rank ", "CollectiveFingerPrint", "NCCL work", "eartbeat", "Watchdog", "DistStoreError",
            "NCCL error",
            "terminate called", "Unhandled exception", "torch/distributed", "TIMEOUT(ms)", "c10d", "Error", "nccl",
            "collective #", "] started ", "] finished ", "socketProgress", "monitoredBarrier", "destroy")
#: monitored_barrier's report (ProcessGroupGloo.cpp, torch 1.9+; gloo runs it for NCCL jobs too): the ranks that did
#: not arrive, named by the rank that waited ('[Rank 0]: Ranks 1, 3 failed to pass monitoredBarrier in 3000 ms',
#: one line per rank first, then the list when wait_all_ranks=True)
_BARRIER_ABSENT = re.compile(r"\bRanks? (?P<ranks>\d{1,7}(?:, \d{1,7}){0,4095}) failed to pass monitoredBarrier in "
                             r"(?P<ms>\d{1,12}) ms")
#: a rank that arrived, then lost its wait for rank 0's answer: it points at the reporting rank's log
_BARRIER_WAIT = re.compile(r"successfully reached monitoredBarrier, but received errors .{0,40}?"
                           r"from rank (?P<peer>\d{1,7})")
#: torch 2.4+'s teardown warnings ('destroy_process_group() was not called before program exit, which can leak
#: resources', 'process group has NOT been destroyed before we destruct ProcessGroupNCCL'): printed by ranks that
#: finished, at exit; never an error
_TEARDOWN = re.compile(r"destroy_process_group\(\) was not called before program exit|process group has NOT been "
                       r"destroyed before")
_LEVEL_KIND = {"E": ErrorKind.C10D_ERROR, "F": ErrorKind.C10D_ERROR, "W": ErrorKind.C10D_WARNING,
               "I": ErrorKind.C10D_INFO}


def unnamed_group(rank: int) -> str:
    """The key of a group a line does not name, for global rank `rank`.

    Why: `[rank13]:[E..] [Rank 1] Watchdog caught ...` (no PG tag, prime-rl #3186) is the WorkNCCL of a
    group where global rank 13 is rank 1: not the default group. Keyed per rank, so two ranks' lines of
    unnamed groups are never compared as if they were one group (which would invent mismatches)."""
    return f"pg:unnamed@{rank}"


def group_key(pg: str | None, desc: str | None) -> str | None:
    """The comm key of a process group from its id and description, as every reader of PyTorch's
    own text names it (PG tags here, the Flight Recorder analyzer's `group info: 0:default_pg`):
    the default group is 'pg:0', a described group goes by its description (FR's group name),
    else by its id; None when the text gives neither."""
    if pg == "0" or desc == "default_pg":
        return "pg:0"
    if desc and desc != "undefined":
        return f"pg:{desc}"
    return f"pg:{pg}" if pg is not None else None


def _pg_key(m: re.Match | None) -> tuple[str | None, int | None, str | None]:
    """(comm key, rank in group, group name) from a PG tag; the key matches FR's pg names."""
    if m is None:
        return None, None, None
    name = m.group("name")
    return group_key(m.group("guid") or m.group("pg"), name), int(m.group("r")), name


def _identity(text: str, origin: Origin) -> tuple[Origin, str | None, int | None]:
    """(origin with the global rank filled in, comm key, rank in the group) for one line.

    `[rankN]:` (already in origin) names the global rank and wins, but over the default group's own
    `[PG 0 .. Rank r]`, which is the global rank by definition (a prefix that disagrees is per node). Without it, a
    plain `[Rank N]` is taken as the global rank (torch before 2.2 printed only that, and it is
    the default group's rank); a `[PG .. Rank r]` tag gives the group rank, which is the
    global rank only for the default group. Where both are on one line (torch 2.2 and
    later: `[PG ID 2 PG GUID 5(mesh_ulysses) Rank 0] ... [Rank 0] Watchdog caught ...`),
    the plain tag is the WorkNCCL's own prefix, the rank in that same group, so it names
    the global rank only when the group is the default one.
    """
    pgm = _PG.search(text) if "[PG " in text else None
    comm, group_rank, _ = _pg_key(pgm)
    plain = None
    for m in (_PLAIN_RANK.finditer(text) if "[Rank " in text else ()):
        if pgm is None or not (pgm.start() <= m.start() < pgm.end()):
            plain = int(m.group("r"))
            break
    if group_rank is None:
        group_rank = plain
    if origin.rank is not None and comm == "pg:0" and group_rank is not None and group_rank != origin.rank:
        # the default group's own rank is the global rank; a `[rankN]:` that disagrees is a per-node label
        # (torchtitan-style output that keeps each node's local rank 0 in its prefix, issue 42)
        origin = replace(origin, rank=group_rank)
    if origin.rank is None:
        if pgm is not None:  # a group tag says whose rank the plain tag is
            rank = group_rank if comm == "pg:0" else None
        else:
            rank = plain
        if rank is not None:
            origin = replace(origin, rank=rank)
    return origin, comm, group_rank


def _glog(text: str) -> tuple[str | None, str | None, str | None]:
    """(level, timestamp, source file:line) of a glog header anywhere in the line."""
    m = _GLOG_BARE.match(text)  # at the start, so before any bracketed header
    if m:
        return m.group("lvl"), f"{m.group('md')} {m.group('time')}", m.group("src")
    m = _GLOG.search(text)
    if not m:
        return None, None, None
    ts = f"{m.group('md') or ''} {m.group('time') or ''}".strip() or None
    return m.group("lvl"), ts, m.group("src")


class _Line:
    """One prefix-stripped line being read: what its header and tags say (glog level, time and source; group,
    rank in it) and the events found in it so far.

    Why: the matchers below are a table of small functions that share this one view of the line, instead of
    one function that tried every pattern in turn (166 lines)."""

    __slots__ = ("text", "origin", "comm", "group", "group_rank", "msg", "lvl", "ts", "src", "events")

    def __init__(self, text: str, origin: Origin) -> None:
        self.text = text
        self.lvl, self.ts, self.src = _glog(text)
        self.origin, self.comm, self.group_rank = _identity(text, origin)
        if (self.comm is None and self.group_rank is not None and self.origin.rank is not None
                and self.group_rank != self.origin.rank):
            self.comm = unnamed_group(self.origin.rank)
        self.group = self.comm or "pg:0"  #: where a record about a collective belongs: no PG tag is the default group
        self.msg = text.strip()
        self.events: list = []

    def err(self, kind: str, **kw) -> ErrorEvent:
        """Add an error event of this line (its typed data, or the kind's empty one, with the rank in the group)."""
        data: C10dSaid | None = kw.pop("data", None)
        if data is None:
            data = TYPED_DATA[ErrorKind(kind)]()
        if self.group_rank is not None and data.group_rank is None:
            data = replace(data, group_rank=self.group_rank)
        ev = ErrorEvent(kind=kind, message=self.msg, origin=self.origin, comm=kw.pop("comm", self.comm),
                        timestamp=self.ts, source="c10d", data=data, **kw)
        self.events.append(ev)
        return ev

    def progress(self, enq: int, done: int) -> None:
        """Add the group's counters as this line gives them (last enqueued, last completed)."""
        self.events.append(Progress(comm=self.group, origin=self.origin, last_enqueued=enq, last_completed=done,
                                    comm_rank=self.group_rank, source="c10d"))


def match_line(text: str, origin: Origin) -> list:
    """Events in one prefix-stripped line; [] when it is no c10d message this reader knows.

    One line can carry several facts (Ray's `Unhandled exception: T. what(): [..] Watchdog
    caught ...` is an exception and a timeout), so matchers add to one list: each of _MATCHERS in turn,
    until one says the line is read; a line none of them reads is a plain c10d record of its glog level.
    """
    if not any(m in text for m in _MARKERS):
        return []
    ln = _Line(text, origin)
    for matcher in _MATCHERS:
        if matcher(ln):
            return ln.events
    if ln.events:
        return ln.events
    if ln.lvl is not None and ln.src and ("ProcessGroup" in ln.src or "TCPStore" in ln.src or "NCCLUtils" in ln.src):
        ln.err(_LEVEL_KIND[ln.lvl])
    elif "[c10d" in text:
        ln.err("c10d-info")
    return ln.events


# The matchers: each runs its pattern only where the pattern's own literal words are in the line (a cheap `in`
# first: a log of 100,000 watchdog lines ran ~25 searches a line; benchmarks/fuzz_structured.py found it past 5 s),
# adds its events, and returns True when the line is read (no later matcher runs).

def _python_exception(ln: _Line) -> bool:
    """A C++ or Python exception's type (`terminate called after throwing an instance of 'T'`); never ends the line."""
    text = ln.text
    m = (("terminate called" in text and _TERMINATE_CALLED.search(text))
         or ("Unhandled exception" in text and _RAY_UNHANDLED.search(text))
         or ("Error" in text and _PY_EXC.search(text))
         or ("INTERNAL ASSERT" in text and _C10D_ASSERT.search(text))
         or ("built in" in text and _NO_BACKEND.search(text)))
    if m:
        ln.err("python-exception", data=NcclFailure(type=unglue(demangle(m.group("type")))))
    return False


def _monitored_barrier(ln: _Line) -> bool:
    return "monitoredBarrier" in ln.text and _barrier(ln.text, ln.err)


def _kind_when(keyword: str, pattern: re.Pattern, kind: ErrorKind) -> Callable[[_Line], bool]:
    """A matcher for a line that only says its kind: `keyword` in the text (a cheap test first), then `pattern`
    (teardown, terminate, Flight Recorder off had the same five lines each)."""
    def matcher(ln: _Line) -> bool:
        if keyword in ln.text and pattern.search(ln.text):
            ln.err(kind)
            return True
        return False
    return matcher


_teardown = _kind_when("destroy", _TEARDOWN, ErrorKind.C10D_TEARDOWN)


def _wrapper_mismatch(ln: _Line) -> bool:
    m = "Detected mismatch" in ln.text and _WRAPPER_MISMATCH.search(ln.text)
    if not m:
        return False
    sides = _wrapper_sides(m, ln.text)
    if ln.origin.rank is None and ln.comm is None:
        # 'Rank a is running collective: ..., but Rank b ...' is raised by rank a itself, of the group it
        # wraps; with no [rankN]: and no PG tag that is the default group's rank, as a plain [Rank N] is
        # (speechbrain #2401: 'Rank 1 is running ... ALLREDUCE ..., but Rank 0 is running ... BROADCAST')
        ln.origin = replace(ln.origin, rank=sides["sides"][0]["rank"])
    ln.err("collective-mismatch", comm=ln.group, data=Fingerprint(sides=[CollectiveSide(**s) for s in sides["sides"]],
                                                                  aspects=sides["aspects"]))
    return True


def _wrapper_inconsistent(ln: _Line) -> bool:
    m = "Detected mismatch" in ln.text and _WRAPPER_INCONSISTENT.search(ln.text)
    if not m:
        return False
    side = CollectiveSide(int(m.group("a")), normalise_op(m.group("a_op")), _int(m.group("a_seq")),
                          _numel(m.group("a_shape")))
    ln.err("collective-mismatch", comm=ln.group, data=Fingerprint(sides=[side]))
    return True


def _fingerprint(ln: _Line) -> bool:
    m = "Running collective" in ln.text and _RUNNING.search(ln.text)
    if not m:
        return False
    ln.err("c10d-fingerprint", comm=ln.group, seq=_int(m.group("seq")), op=normalise_op(m.group("op")),
           data=Fingerprint(numel=_numel(m.group("shape"))))
    return True


def _desync_lagging(ln: _Line) -> bool:
    m = ("collective #" in ln.text or "lagging ranks" in ln.text) and _DESYNC_LAGGING.search(ln.text)
    if not m:
        return False
    state = "never-joined" if m.group("never") else ("inside" if m.group("inside") else "finished-before")
    # the report counts collectives from 1 in its own numbering, not SeqNum: kept apart from seq
    ln.err("desync-lagging", comm=ln.group, data=DesyncReport(lagging=_ranks(m.group("ranks")), state=state,
                                                              collective=_int(m.group("in_seq") or m.group("fin_seq"))))
    return True


def _desync_state(ln: _Line) -> bool:
    """One line of the desync report's snapshot: which ranks were last seen starting or finishing which op."""
    m = ("] started " in ln.text or "] finished " in ln.text) and _DESYNC_STATE.match(ln.text.strip())
    if not m:
        return False
    ln.err("desync-state", comm=ln.group, data=DesyncReport(ranks=_ranks(m.group("ranks")), state=m.group("state"),
                                                            last_op=normalise_op(m.group("op"))))
    return True


def _watchdog(ln: _Line) -> bool:
    m = "Watchdog caught" in ln.text and _WATCHDOG.search(ln.text)
    if not m:
        return False
    seq = int(m.group("seq")) if m.group("seq") else None  # before torch 1.13 there was no SeqNum
    ln.err("watchdog-timeout", comm=ln.group, seq=seq, op=normalise_op(m.group("op")),
           data=CollectiveTimeout(numel_in=_int(m.group("nin")), numel_out=_int(m.group("nout")),
                                  timeout_ms=_int(m.group("tmo")), ran_ms=_int(m.group("ran"))))
    if seq is not None:
        ln.progress(seq, seq - 1)
    return True


def _async_error(ln: _Line) -> bool:
    m = "async exception" in ln.text and _ASYNC.search(ln.text)
    if not m:
        return False
    v = _NCCL_ERROR.search(m.group("what").rstrip())
    ln.err("nccl-error", comm=ln.group, seq=_int(m.group("seq")), op=normalise_op(m.group("op")),
           data=NcclFailure(nccl_version=nccl_version(v.group("v")) if v else None))
    return True


def _failure_detected(ln: _Line) -> bool:
    m = "failure detected by watchdog" in ln.text and _FAILURE.search(ln.text)
    if not m:
        return False
    ln.err("failure-detected", comm=ln.group, seq=int(m.group("seq")))
    ln.progress(int(m.group("enq")), int(m.group("done")))
    return True


def _last_counters(ln: _Line) -> bool:
    text = ln.text
    m = ("nqueued" in text or "NQUEUED" in text) and _LAST.search(text)  # _LAST ignores case
    if not m:
        return False
    d = _DETECTED.search(text)
    if d:
        ln.err("failure-detected", comm=ln.group, seq=int(d.group("seq")))
    ln.progress(int(m.group("enq")), int(m.group("done")))
    if _DUMP.search(text):
        ln.err("dump-signal", data=DumpAsked(from_rank=_dump_from(text)))
    return True


def _heartbeat(ln: _Line) -> bool:
    text = ln.text
    if not (("eartbeat monitor" in text or "monitoring thread" in text or "watchdog got stuck" in text)
            and _HEARTBEAT.search(text)):
        return False
    p = _PENDING.search(text)
    ln.err("heartbeat", data=Heartbeat(pending_works=int(p.group("n")) if p else None))
    return True


_terminate = _kind_when("Terminating the process", _TERMINATE, ErrorKind.TERMINATE)
_fr_disabled = _kind_when("Stack trace of the failed collective", _FR_OFF, ErrorKind.FR_DISABLED)


def _fr_stack(ln: _Line) -> bool:
    if "Stack trace of the failed collective" in ln.text and _FR_STACK.search(ln.text):
        ln.err(COLLECTIVE_STACK, data=CollectiveStack(frames=[]))
        return True
    return False


def _dump_signal(ln: _Line) -> bool:
    text = ln.text
    if ("ump" in text or "light" in text or "global timeout" in text) and _DUMP.search(text) and (
            ln.lvl is not None or "ProcessGroupNCCL" in text):
        ln.err("dump-signal", data=DumpAsked(from_rank=_dump_from(text)))
        return True
    return False


def _store_error(ln: _Line) -> bool:
    m = "DistStoreError" in ln.text and _STORE.search(ln.text)
    if not m:
        return False
    ln.err("store-timeout", data=StoreWait(joined=_int(m.group("joined")), expected=_int(m.group("expected")),
                                           seconds=_int(m.group("secs"))))
    return True


def _store_barrier(ln: _Line) -> bool:
    m = "store based barrier" in ln.text and _STORE_BARRIER.search(ln.text)
    if not m:
        return False
    if ln.origin.rank is None:  # the line names the global rank that waited
        ln.origin = replace(ln.origin, rank=int(m.group("rank")))
    ln.err("store-timeout", data=StoreWait(joined=int(m.group("joined")), expected=int(m.group("expected"))))
    return True


def _nccl_error(ln: _Line) -> bool:
    text = ln.text
    # the pattern ends at `$`: trailing blanks stripped here, linearly
    m = "NCCL error" in text and _NCCL_ERROR.search(text.rstrip())
    if m and ("NCCL error in:" in text or _NCCL_ERROR_AT.match(text.strip())):
        ln.err("nccl-error", data=NcclFailure(nccl_version=nccl_version(m.group("v")), where=m.group("where")))
        return True
    return False


def _nccl_code(ln: _Line) -> bool:
    m = ln.text.lstrip().startswith("nccl") and _NCCL_CODE.match(ln.text.strip())
    if not m:
        return False
    ln.err("nccl-error", data=NcclFailure(code=m.group("code")))
    return True


def _net_plugin(ln: _Line) -> bool:
    m = "NET/" in ln.text and _NET_PLUGIN.search(ln.text)
    if not m:
        return False
    ln.err("net-error", data=NetFailure(net=m.group("net"), rc=int(m.group("rc")), error=m.group("what")))
    return True


def _socket_detail(ln: _Line) -> bool:
    m = _SOCKET_DETAIL.match(ln.text.strip()) if ln.text.lstrip().startswith("socketProgress") else None
    if not m:
        return False
    ln.err("connection-reset" if "reset by peer" in m.group("why") else "net-error",
           data=NetFailure(call=m.group("what"), error=m.group("why")))
    ln.events[-1].peer_addr = m.group("peer")
    return True


def _python_frame(ln: _Line) -> bool:
    m = "torch/distributed/" in ln.text and _FRAME.search(ln.text)
    if not m:
        return False
    ln.err("python-frame", data=TorchFrame(function=m.group("fn"), file=m.group("file"), line=int(m.group("line"))))
    ln.events[-1].message = m.group("fn")  # the record's text is the function name
    return True


def _pg_timeout(ln: _Line) -> bool:
    m = "TIMEOUT(ms)" in ln.text and _PG_TIMEOUT.match(ln.text.strip())
    if not m:
        return False
    ln.err("pg-timeout", data=StatedTimeout(timeout_ms=int(m.group("ms"))))
    return True


#: the c10d matchers in the order they are tried (an earlier, more specific form wins: a wrapper's mismatch
#: before its fingerprint, the counters' line before a dump request it also carries)
_MATCHERS: tuple[Callable[[_Line], bool], ...] = (
    _python_exception, _monitored_barrier, _teardown, _wrapper_mismatch, _wrapper_inconsistent, _fingerprint,
    _desync_lagging, _desync_state, _watchdog, _async_error, _failure_detected, _last_counters, _heartbeat,
    _terminate, _fr_disabled, _fr_stack, _dump_signal, _store_error, _store_barrier, _nccl_error, _nccl_code,
    _net_plugin, _socket_detail, _python_frame, _pg_timeout,
)


def _barrier(text: str, err) -> bool:
    """monitored_barrier's own lines: 'barrier-absent' (the ranks it names did not arrive; said by the rank that
    waited for them, the reporter, not the culprit) or 'barrier-wait' (a rank that arrived lost its wait for the
    reporter's answer). True when the line was one of them."""
    m = _BARRIER_ABSENT.search(text)
    if m:
        err("barrier-absent", data=StatedTimeout(absent=_ranks(m.group("ranks")), timeout_ms=int(m.group("ms"))))
        return True
    m = _BARRIER_WAIT.search(text)
    if m:
        err("barrier-wait", data=BarrierWait(peer=int(m.group("peer"))))
        return True
    return False


def _dump_from(text: str) -> int | None:
    """The rank whose collective timeout asked this rank to dump, when the line names another rank."""
    m = _DUMP_FROM.search(text)
    return int(m.group("r")) if m else None


def _wrapper_sides(m: re.Match, text: str) -> dict:
    """What ProcessGroupWrapper's check says each side ran: the reporting rank (`Rank a`, the
    process that raised) and the one it differs from (`Rank b`), each (op, seq, numel), plus
    the aspects torch 2.x names ('Sequence number: 1vs 0')."""
    sides = []
    for p in ("a_", "b_"):
        op = m.group(p + "op") or m.group(p + "bare")
        sides.append({"rank": int(m.group(p[0])), "op": normalise_op(op) if op else None,
                      "seq": _int(m.group(p + "seq")), "numel": _numel(m.group(p + "shape"))})
    a = _ASPECTS.search(text)
    return {"sides": sides, "aspects": " ".join(a.group("what").split()) if a else None}


def _ranks(listed: str) -> list[int]:
    """'0, 1, 2' -> [0, 1, 2], at most MAX_DESYNC_RANKS of them."""
    return [int(r) for r in listed.split(", ")[:MAX_DESYNC_RANKS]]


def _numel(shape: str | None) -> int | None:
    """'20, 10' -> 200; '' (a scalar) -> 1; None when the fingerprint printed no shape."""
    if shape is None:
        return None
    n = 1
    for part in shape.split(","):
        if part.strip():
            n *= int(part)
    return n


_MISDECODED = re.compile(r"(?P<a>2\d)\.(?P<b>\d)\.(?P<c>\d{1,2})")


def nccl_version(printed: str | None) -> str | None:
    """The NCCL version a PyTorch error line names, undoing old PyTorch's misreading of NCCL 2.9+.

    Why: NCCL 2.9 changed its version code to major*10000+minor*100+patch, and PyTorch of that
    time still split it as major*1000+minor*100+patch, so NCCL 2.9.9 was printed '20.9.9' and
    2.10.3 '21.0.3' (seen in NVIDIA/nccl#520). No NCCL major is 20 or more: such a triple is
    that code, read back the new way.
    """
    m = _MISDECODED.fullmatch(printed or "")
    if not m:
        return printed
    code = int(m.group("a")) * 1000 + int(m.group("b")) * 100 + int(m.group("c"))
    return f"{code // 10000}.{code % 10000 // 100}.{code % 100}"


def collective_frame(text: str) -> tuple[str, str, int] | None:
    """(function, file, line) of one line of a failed collective's stack ('#0 all_reduce from f.py:3068')."""
    m = _FR_FRAME.match(text.strip())
    return (m.group("func"), m.group("file"), int(m.group("line"))) if m else None


def _int(value: str | None) -> int | None:
    """A number a pattern matched (its digits are not bounded there), else None."""
    return as_int(value, text=True)


def unglue(name: str) -> str:
    """`torch.distributedtorch.distributed.DistBackendError` -> `torch.distributed.DistBackendError`.

    Why: two processes writing the same traceback line to one terminal interleave it; the type then
    starts with a piece of the other copy's module path (NVIDIA/nccl#1241, two ranks of one node).
    A leading dotted prefix that the rest repeats, up to a dot, is that piece.
    """
    for i in range(1, len(name) // 2 + 1):
        head, rest = name[:i], name[i:]
        if "." in head and rest.startswith(head) and rest[i:i + 1] == ".":  # a torn piece is a module path
            return rest
    return name


def demangle(name: str) -> str:
    """`N3c1016DistBackendErrorE` -> `c10::DistBackendError` (Itanium nested names, as Ray prints them);
    other names are returned as they are."""
    m = re.fullmatch(r"N((?:\d+\w+?)+)E", name)
    if not m:
        if name.startswith("St") and name[2:3].isdigit():  # St13runtime_error
            return "std::" + re.sub(r"^\d+", "", name[2:])
        return name
    parts, rest = [], m.group(1)
    while rest:
        d = re.match(r"\d+", rest)
        if not d:
            return name
        n = int(d.group(0))
        parts.append(rest[d.end():d.end() + n])
        rest = rest[d.end() + n:]
    return "::".join(parts)

"""Decode the recorder's state file (nccl_patches/), live or copied into a bundle.

The read stage of the recorder: forensics/collectors/recorder.py copies the files, this decodes
them, parsers/judges/recorder.py judges them (one module per stage, one name for the component).

The recorder (a profiler plugin, or the LD_PRELOAD shim for older NCCL) keeps one
file per communicator in shared memory. This module reads it from another process
without signalling the owner, so it works while the owner is hung or SIGSTOPped.

Records are guarded by seqlock generation counters: a live file is read record by
record and a record that changes under us is re-read. A copied file cannot be
re-read, so a record whose generation is odd there is marked `consistent=False`.

The layout mirrors nccl_patches/include/recorder_format.h; the two must change
together (bump the format version). Files of an unknown, newer version, truncated
files and foreign files are rejected with RecorderFormatError and a clear message.
"""

from __future__ import annotations

import mmap
import os
import struct
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

from parsers.model.events import MAX_RANKS
from parsers.input.errors import FileFormatError
from parsers.input.walk import walk_files

MAGIC = b"HFNCREC\0"
FORMAT_VERSION = 1
HEADER_SIZE = 512
COLL_SIZE = 160
PROXY_SIZE = 256
STEP_SLOTS = 8
_READ_RETRIES = 8

WRITERS = {1: "profiler-plugin", 2: "preload-shim"}
COMM_STATES = {1: "active", 2: "finalized"}
KINDS = {0: "empty", 1: "coll", 2: "p2p"}
PROXY_STATES = {0: "free", 1: "active", 2: "done"}

#: NCCL's proxy step states (ncclProfilerProxyStep*), as stored in the file.
STEP_STATES = {
    0: "Started",
    8: "SendGPUWait",
    9: "SendWait",
    10: "RecvWait",
    11: "RecvFlushWait",
    12: "RecvGPUWait",
    20: "SendPeerWait",
}

#: header flag: op start and completion stamps from CLOCK_REALTIME (RECORDER_FLAG_PRECISE_OP_TIMES)
FLAG_PRECISE_OP_TIMES = 1
#: header flag of files written until 2026-12-07: proxy records carry send_wait_us, the SUM of their steps'
#: times in SendWait, overlapping steps each counted (RECORDER_FLAG_SEND_WAIT)
FLAG_SEND_WAIT = 2
#: header flag: proxy records carry send_wait_union_us, the time at least one of their steps was in SendWait
#: (RECORDER_FLAG_SEND_WAIT_UNION; the same field offset as FLAG_SEND_WAIT's, another meaning)
FLAG_SEND_WAIT_UNION = 16
#: header flag (with FLAG_SEND_WAIT_UNION): where an op's steps entered SendWait one after another (each span
#: one step), one such span in `RecorderState.send_wait_every` was timed and each other counts as the mean of
#: the op's timed one-step spans; spans of two steps or more are all timed (RECORDER_FLAG_SEND_WAIT_SAMPLED)
FLAG_SEND_WAIT_SAMPLED = 32
#: header flag: the copy written beside the NCCL logs as the process died (RECORDER_FLAG_DEATH_COPY)
FLAG_DEATH_COPY = 4
#: header flag: the copy written beside the NCCL logs at a clean finalize, header and ring only
#: (RECORDER_FLAG_FINALIZE_COPY): what a rank that finished and exited called
FLAG_FINALIZE_COPY = 8

# Header: see recorder_format.h for offsets. '<' = little-endian, no padding.
_HEADER_FIELDS = (
    "magic format_version header_size file_size coll_rec_size coll_ring_len proxy_rec_size proxy_slots "
    "coll_ring_offset proxy_offset writer_kind abi_version pid comm_state comm_id rank nranks nnodes env_rank "
    "start_ns heartbeat_ns heartbeat_count coll_next proxy_next last_event_ns dropped_proxy finalize_ns "
    "event_mask heartbeat_ms"
).split()
_HEADER_MAIN = struct.Struct("<8sIIQIIIIIIIIiIQiiiiQQQQQQQQII")  # 160 bytes
_HEADER_TAIL = struct.Struct("<64s64s128s32sIIQ")  # at 160: host hostid comm_name writer comm_index flags p2p_next
_COLL = struct.Struct("<IBBBxQQQiIIIIIQQQQ24s16s16s8sQ")
_PROXY = struct.Struct("<IIQQQiiBBBBiiiiiQQQQ16siIQ")
#: an op's step slots in one unpack (at 128, after the op's fields), not eight: a 44-op file decodes in 0.58 ms
#: where it took 0.64 (a fleet's host digests decode one a rank)
_STEPS = struct.Struct("<" + "iBBBxQ" * STEP_SLOTS)  # a slot: step state done x ts_ns

assert _HEADER_MAIN.size == 160
assert _HEADER_TAIL.size == 304
assert _COLL.size == COLL_SIZE
assert _PROXY.size == 128
assert _STEPS.size == 16 * STEP_SLOTS


class RecorderFormatError(FileFormatError):
    """The file is not a recorder state file this reader understands; the message says why."""


@dataclass
class CollRecord:
    """One collective or p2p operation of the ring, oldest overwritten first."""

    index: int  #: record number in its communicator
    kind: str  #: 'coll' or 'p2p'
    seq: int  #: NCCL seqNumber (per collective type); p2p: the recorder's own counter
    func: str
    count: int
    dtype: str
    algo: str
    proto: str
    n_channels: int
    n_warps: int
    root_or_peer: int
    proxy_started: int
    proxy_done: int
    kernel_started: int
    kernel_done: int
    start_ns: int
    enqueued_ns: int
    last_progress_ns: int
    complete_ns: int
    consistent: bool = True

    @property
    def state(self) -> str:
        """'complete' (inferred from the children), 'in-flight' (enqueued) or 'enqueuing'."""
        if self.complete_ns:
            return "complete"
        return "in-flight" if self.enqueued_ns else "enqueuing"

    @property
    def label(self) -> str:
        return f"{self.func} seq {self.seq}"


@dataclass
class StepRecord:
    """One of the last 8 steps of a proxy op."""

    step: int
    state: str
    done: bool
    #: time of its latest change, on the event clock (a few ms): "how long ago", not sub-ms (until
    #: 2026-12-07's evening a send step's was on the precise clock where it entered or left SendWait)
    ts_ns: int


@dataclass
class ProxyOpRecord:
    """A proxy operation (network send or receive on one channel with one peer)."""

    op_index: int
    status: str  #: 'active' (in flight) or 'done'
    coll_index: int | None
    coll_seq: int | None
    func: str
    rank: int  #: rank that posted the op
    pid: int  #: process that posted it (PXN: another process of the node)
    peer: int
    channel: int
    is_send: bool
    last_state: str  #: latest step state: 'RecvWait', 'SendPeerWait', ...
    in_progress: bool
    n_steps: int
    chunk_size: int
    steps_started: int
    steps_done: int
    last_step: int
    start_ns: int
    last_progress_ns: int
    stop_ns: int
    trans_bytes: int
    steps: list[StepRecord] = field(default_factory=list)
    consistent: bool = True
    #: old files (FLAG_SEND_WAIT): microseconds its steps spent in SendWait (data on the network), summed over
    #: steps, so steps on the network together each count; None otherwise and for a receive
    send_wait_us: int | None = None
    #: current files (FLAG_SEND_WAIT_UNION): microseconds during which at least one of its steps was in
    #: SendWait, the op's time on the network (the spans' sub-us rests carried; before 2026-12-07's evening
    #: each span was cut to whole us, up to 1 us low per span); where the header has FLAG_SEND_WAIT_SAMPLED,
    #: an estimate in ops whose steps went one at a time (RecorderState.send_wait_every says how sampled);
    #: None otherwise and for a receive
    send_wait_union_us: int | None = None

    @property
    def active(self) -> bool:
        return self.status == "active"

    @property
    def direction(self) -> str:
        return "send" if self.is_send else "recv"


@dataclass
class RecorderState:
    """Everything one state file says about one communicator of one process."""

    path: str
    format_version: int
    writer: str
    abi_version: int
    pid: int
    comm_state: str
    comm_id: int
    rank: int
    nranks: int
    nnodes: int
    env_rank: int | None
    start_ns: int
    heartbeat_ns: int
    heartbeat_count: int
    heartbeat_ms: int
    coll_next: int
    proxy_next: int
    p2p_next: int
    last_event_ns: int
    dropped_proxy: int
    finalize_ns: int
    event_mask: int
    host: str
    hostid: str
    comm_name: str
    writer_name: str
    comm_index: int
    flags: int = 0  #: RECORDER_FLAG_* of recorder_format.h
    #: one one-step SendWait span in this many timed (FLAG_SEND_WAIT_SAMPLED; 1: every span, as in older files)
    send_wait_every: int = 1
    colls: list[CollRecord] = field(default_factory=list)  #: oldest first
    proxy_ops: list[ProxyOpRecord] = field(default_factory=list)  #: by op_index
    observed_ns: int | None = None  #: when the file was read (live) or copied (bundle), if known
    observed_is_copy: bool = False  #: observed_ns is a collector's copy time, not this read's
    #: what the file says that its own header contradicts (a rank outside its communicator, peers past its
    #: nranks): read all the same, and said where it is read (a changed or damaged header)
    notes: list[str] = field(default_factory=list)

    @property
    def comm_hex(self) -> str:
        """The communicator's id as hex, unpadded like NCCL prints ids. This is NCCL's
        commHash (what profiler plugins receive); NCCL's INFO lines print a different
        hash of the same unique id as `commId`, so join recorder and log data through
        ranks (see parsers.judges.recorder.comm_rank_table), not through this string."""
        return f"0x{self.comm_id:x}"

    @property
    def job_rank(self) -> int:
        """The rank in the job: RANK as the process saw it, else its rank in this communicator
        (they agree in the world communicator, the only one a RANK-less process can be placed by)."""
        return self.env_rank if self.env_rank is not None else self.rank

    @property
    def precise_op_times(self) -> bool:
        """Whether `CollRecord.start_ns` and `complete_ns` come from the nanosecond clock; older
        writers stamped them with the coarse one (1-4 ms ticks)."""
        return bool(self.flags & FLAG_PRECISE_OP_TIMES)

    @property
    def death_copy(self) -> bool:
        """Whether this is the copy the recorder wrote beside the NCCL logs as its process died (issue 39): its
        heartbeat is the moment of the copy, and the copies of a job are written as each rank dies, so an
        older beat here says when that rank died, not that it stopped running."""
        return bool(self.flags & FLAG_DEATH_COPY)

    @property
    def finalize_copy(self) -> bool:
        """Whether this is the copy the recorder wrote beside the NCCL logs at a clean finalize (issue 39): its
        operations' ring without the proxy ops (all stopped), so a rank that finished its own call and exited 0
        still says what it called."""
        return bool(self.flags & FLAG_FINALIZE_COPY)

    @property
    def in_flight_ops(self) -> list[ProxyOpRecord]:
        return [op for op in self.proxy_ops if op.active]

    @property
    def incomplete_colls(self) -> list[CollRecord]:
        return [c for c in self.colls if c.state != "complete"]

    def heartbeat_age_s(self, now_ns: int | None = None) -> float:
        """Seconds between the last heartbeat and `now_ns` (default: when it was observed)."""
        ref = now_ns if now_ns is not None else (self.observed_ns or time.time_ns())
        return max(0.0, (ref - self.heartbeat_ns) / 1e9)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["comm_hex"] = self.comm_hex
        return data


def _cstr(raw: bytes) -> str:
    return raw.split(b"\0", 1)[0].decode("utf-8", "replace")


def _check_header(buf: bytes | mmap.mmap, size: int, source: str) -> dict[str, Any]:
    """Validate the header against the file's size; return its fields."""
    if size < HEADER_SIZE:
        raise RecorderFormatError(
            f"{source}: truncated recorder file ({size} bytes; a valid one has at least {HEADER_SIZE})"
        )
    magic = bytes(buf[0:8])
    if magic != MAGIC:
        if magic == b"\0" * 8:
            raise RecorderFormatError(f"{source}: recorder header not written yet (the writer was still starting)")
        raise RecorderFormatError(f"{source}: not a hang-forensics NCCL recorder file (magic {magic!r})")
    values = _HEADER_MAIN.unpack_from(buf, 0)
    hdr = dict(zip(_HEADER_FIELDS, values))
    version = hdr["format_version"]
    if version > FORMAT_VERSION:
        raise RecorderFormatError(
            f"{source}: recorder format version {version} is newer than this reader "
            f"(it knows up to {FORMAT_VERSION}); upgrade hang-forensics to read it"
        )
    if version < 1:
        raise RecorderFormatError(f"{source}: recorder format version {version} is not valid")
    expect = {"header_size": HEADER_SIZE, "coll_rec_size": COLL_SIZE, "proxy_rec_size": PROXY_SIZE}
    for key, want in expect.items():
        if hdr[key] != want:
            raise RecorderFormatError(f"{source}: {key} is {hdr[key]}, format {version} has {want}: corrupt file")
    if hdr["nranks"] > MAX_RANKS or hdr["rank"] >= MAX_RANKS:
        # judges size a table by nranks: 2^31-1 from a damaged header is no communicator (MAX_RANKS);
        # -1 is the plugin's own 'not known yet
        raise RecorderFormatError(f"{source}: rank {hdr['rank']} of {hdr['nranks']} is no communicator's: corrupt file")
    ring_end = hdr["coll_ring_offset"] + hdr["coll_ring_len"] * COLL_SIZE
    proxy_end = hdr["proxy_offset"] + hdr["proxy_slots"] * PROXY_SIZE
    if hdr["coll_ring_offset"] < HEADER_SIZE or hdr["proxy_offset"] < ring_end or proxy_end > hdr["file_size"]:
        raise RecorderFormatError(f"{source}: record areas do not fit the declared file size: corrupt file")
    if size < hdr["file_size"]:
        raise RecorderFormatError(
            f"{source}: truncated recorder file ({size} of {hdr['file_size']} bytes): copy it again whole"
        )
    tail = _HEADER_TAIL.unpack_from(buf, 160)
    hdr.update(
        host=_cstr(tail[0]),
        hostid=_cstr(tail[1]),
        comm_name=_cstr(tail[2]),
        writer_name=_cstr(tail[3]),
        comm_index=tail[4],
        flags=tail[5],
        p2p_next=tail[6],
    )
    # the header's send_wait_every at 464 (reserved, zero, in files that do not set FLAG_SEND_WAIT_SAMPLED)
    every = struct.unpack_from("<I", buf, 464)[0] if tail[5] & FLAG_SEND_WAIT_SAMPLED else 1
    hdr["send_wait_every"] = max(1, every)
    return hdr


def _stable(buf: bytes | mmap.mmap, offset: int, decode: Callable[[int], Any], live: bool) -> tuple[Any, bool]:
    """Decode the record at `offset` under its seqlock; (value, consistent)."""
    value = None
    for _ in range(_READ_RETRIES if live else 1):
        (gen1,) = struct.unpack_from("<I", buf, offset)
        value = decode(offset)
        (gen2,) = struct.unpack_from("<I", buf, offset)
        if gen1 == gen2 and not gen1 & 1:
            return value, True
    return value, False


def _decode_coll(buf: bytes | mmap.mmap, off: int) -> CollRecord:
    v = _COLL.unpack_from(buf, off)
    return CollRecord(
        kind=KINDS.get(v[1], f"kind{v[1]}"),
        n_channels=v[2],
        n_warps=v[3],
        index=v[4],
        seq=v[5],
        count=v[6],
        root_or_peer=v[7],
        proxy_started=v[8],
        proxy_done=v[9],
        kernel_started=v[10],
        kernel_done=v[11],
        start_ns=v[13],
        enqueued_ns=v[14],
        last_progress_ns=v[15],
        complete_ns=v[16],
        func=_cstr(v[17]),
        dtype=_cstr(v[18]),
        algo=_cstr(v[19]),
        proto=_cstr(v[20]),
    )


def _decode_proxy(buf: bytes | mmap.mmap, off: int, flags: int = 0) -> ProxyOpRecord:
    """One proxy record; `flags`: the header's, which say what the field at 116 means (FLAG_SEND_WAIT*)."""
    v = _PROXY.unpack_from(buf, off)
    unknown = 0xFFFFFFFFFFFFFFFF
    steps = []
    slots = _STEPS.unpack_from(buf, off + 128)
    for i in range(0, 5 * STEP_SLOTS, 5):
        if slots[i] >= 0:
            state = slots[i + 1]
            steps.append(StepRecord(step=slots[i], state=STEP_STATES.get(state, f"state{state}"),
                                    done=bool(slots[i + 2]), ts_ns=slots[i + 4]))
    steps.sort(key=lambda s: s.step)
    return ProxyOpRecord(
        status=PROXY_STATES.get(v[1], f"state{v[1]}"),
        coll_index=None if v[2] == unknown else v[2],
        coll_seq=None if v[3] == unknown else v[3],
        op_index=v[4],
        pid=v[5],
        peer=v[6],
        channel=v[7],
        is_send=bool(v[8]),
        last_state=STEP_STATES.get(v[9], f"state{v[9]}"),
        in_progress=bool(v[10]),
        n_steps=v[11],
        chunk_size=v[12],
        steps_started=v[13],
        steps_done=v[14],
        last_step=v[15],
        start_ns=v[16],
        last_progress_ns=v[17],
        stop_ns=v[18],
        trans_bytes=v[19],
        func=_cstr(v[20]),
        rank=v[21],
        steps=steps,
        send_wait_us=v[22] if flags & FLAG_SEND_WAIT and v[8] else None,
        send_wait_union_us=v[22] if flags & FLAG_SEND_WAIT_UNION and v[8] else None,
    )


def decode_recorder(
    buf: bytes | mmap.mmap, source: str = "<data>", live: bool = False, observed_ns: int | None = None,
    copied: bool = False,
) -> RecorderState:
    """Decode a whole state file held in `buf` (bytes, or a live read-only mmap); `copied`: observed_ns
    is when a collector copied the file (else when it was read)."""
    hdr = _check_header(buf, len(buf), source)
    colls: list[CollRecord] = []
    n, ring = hdr["coll_next"], hdr["coll_ring_len"]
    for k in range(max(0, n - ring), n):
        off = hdr["coll_ring_offset"] + (k % ring) * COLL_SIZE
        rec, ok = _stable(buf, off, lambda o: _decode_coll(buf, o), live)
        if rec.index != k or rec.kind == "empty":
            continue  # overwritten by a newer op while we read, or never written
        rec.consistent = ok
        colls.append(rec)
    ops: list[ProxyOpRecord] = []
    flags = hdr["flags"]
    for i in range(hdr["proxy_slots"]):
        off = hdr["proxy_offset"] + i * PROXY_SIZE
        (status,) = struct.unpack_from("<I", buf, off + 4)
        if status == 0:
            continue
        op, ok = _stable(buf, off, lambda o: _decode_proxy(buf, o, flags), live)
        op.consistent = ok
        ops.append(op)
    ops.sort(key=lambda o: o.op_index)
    env_rank = hdr["env_rank"]
    notes = _header_notes(hdr, ops)
    return RecorderState(
        path=source,
        format_version=hdr["format_version"],
        writer=WRITERS.get(hdr["writer_kind"], f"writer{hdr['writer_kind']}"),
        abi_version=hdr["abi_version"],
        pid=hdr["pid"],
        comm_state=COMM_STATES.get(hdr["comm_state"], f"state{hdr['comm_state']}"),
        comm_id=hdr["comm_id"],
        rank=hdr["rank"],
        nranks=hdr["nranks"],
        nnodes=hdr["nnodes"],
        env_rank=None if env_rank < 0 else env_rank,
        start_ns=hdr["start_ns"],
        heartbeat_ns=hdr["heartbeat_ns"],
        heartbeat_count=hdr["heartbeat_count"],
        heartbeat_ms=hdr["heartbeat_ms"],
        coll_next=hdr["coll_next"],
        proxy_next=hdr["proxy_next"],
        p2p_next=hdr["p2p_next"],
        last_event_ns=hdr["last_event_ns"],
        dropped_proxy=hdr["dropped_proxy"],
        finalize_ns=hdr["finalize_ns"],
        event_mask=hdr["event_mask"],
        host=hdr["host"],
        hostid=hdr["hostid"],
        comm_name=hdr["comm_name"],
        writer_name=hdr["writer_name"],
        comm_index=hdr["comm_index"],
        flags=hdr["flags"],
        send_wait_every=hdr["send_wait_every"],
        colls=colls,
        proxy_ops=ops,
        observed_ns=observed_ns,
        observed_is_copy=copied,
        notes=notes,
    )


def _header_notes(hdr: dict[str, Any], ops: list[ProxyOpRecord]) -> list[str]:
    """What the records and the header say against each other: the file is read, and this said with it
    (the plugin writes rank and nranks -1 until the communicator is known: not a contradiction)."""
    rank, nranks = hdr["rank"], hdr["nranks"]
    notes = []
    if nranks > 0 and not 0 <= rank < nranks:
        notes.append(f"the header's rank {rank} is outside its communicator of {nranks} ranks (a changed header?)")
    elif nranks <= 0 and rank >= 0:
        notes.append(f"the header gives rank {rank} but {nranks} ranks (a changed header?)")
    past = sum(1 for op in ops if nranks > 0 and not (0 <= op.peer < nranks and 0 <= op.rank < nranks))
    if past:
        notes.append(f"{past} proxy ops name a rank or peer outside the header's {max(nranks, 0)} ranks")
    return notes


def read_recorder_file(path: str | os.PathLike[str], observed_ns: int | None = None) -> RecorderState:
    """Read a state file. A live file is mapped read-only: the owner is never signalled.

    `observed_ns` is when the file's content was current (a bundle copy: its copy
    time); for a file read here it defaults to now.
    """
    source = str(path)
    try:
        with open(path, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            if size < HEADER_SIZE:
                _check_header(fh.read(), size, source)  # raises with the right message
            with mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as view:
                when = observed_ns if observed_ns is not None else time.time_ns()
                return decode_recorder(view, source, live=True, observed_ns=when, copied=observed_ns is not None)
    except OSError as err:
        raise RecorderFormatError(f"{source}: cannot read recorder file: {err.strerror or err}") from err


def is_recorder_file(path: str | os.PathLike[str]) -> bool:
    """True when the file starts with the recorder's magic (cheap check for discovery)."""
    try:
        with open(path, "rb") as fh:
            return fh.read(8) == MAGIC
    except OSError:
        return False


def read_recorder_dir(directory: str | os.PathLike[str]) -> tuple[list[RecorderState], list[str]]:
    """Every state file under `directory` (walked iteratively, depth-bounded): (states, problems as messages)."""
    states: list[RecorderState] = []
    problems: list[str] = []
    for path in sorted(walk_files(Path(directory), "nccl-recorder.*.bin", cut=problems)):
        try:
            states.append(read_recorder_file(path))
        except RecorderFormatError as err:
            problems.append(str(err))
    return states, problems

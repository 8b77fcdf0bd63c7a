"""A real recorder state file said again for another rank of a larger communicator (issue 43's scale bundles).

Why: a bundle of 100,000 ranks (benchmarks/bundle_scale.py) or a capture replicated to a fleet
(tests/support/replicate.py) must carry recorder files as a real collection does, and the recorder's
records are binary (nccl_patches' recorder_format.h, read by parsers/readers/recorder.py). A captured file
keeps its records, times and states; only who wrote it changes: the header's pid, rank, world size, env rank,
host and communicator id, and in each proxy op the posting pid and rank and the peer (moved by its ring
offset: a rank that waited on its ring neighbour waits on its new neighbour).
"""

from __future__ import annotations

import struct

#: header offsets (parsers/readers/recorder.py `_HEADER_MAIN`, little-endian): proxy_slots (I) 36,
#: proxy_offset (I) 44, pid (i) 56, comm_id (Q) 64, rank (i) 72, nranks (i) 76, env_rank (i) 84; host (64s) 160
_SLOTS_AT, _PROXY_AT, _PID_AT, _COMM_AT, _RANK_AT, _NRANKS_AT, _ENV_RANK_AT, _HOST_AT = 36, 44, 56, 64, 72, 76, 84, 160
#: a proxy op record (`_PROXY`): pid (i) at 32, peer (i) at 36, rank (i) at 112; 128 bytes, then its step slots
_OP_PID, _OP_PEER, _OP_RANK, PROXY_SIZE = 32, 36, 112, 128
_STEP_SLOTS, _STEP_SIZE = 8, 16


def header(data: bytes) -> tuple[int, int, int]:
    """(rank, nranks, pid) the file's header says."""
    (pid,) = struct.unpack_from("<i", data, _PID_AT)
    rank, nranks = struct.unpack_from("<ii", data, _RANK_AT)
    return rank, nranks, pid


def _ring(peer: int, old: tuple[int, int], new: tuple[int, int]) -> int:
    """`peer` of rank old[0] in a world of old[1], at the same ring offset from rank new[0] in a world of new[1]."""
    if peer < 0 or old[1] <= 0:
        return peer
    offset = (peer - old[0] + old[1] // 2) % old[1] - old[1] // 2
    return (new[0] + offset) % new[1]


def used_ops(data: bytes) -> list[int]:
    """The offsets of the proxy op records of `data` that are not all zero (a slot never written is left as it is:
    most of a ring is empty, and rewriting every slot cost most of a copy's time)."""
    (slots,) = struct.unpack_from("<I", data, _SLOTS_AT)
    (at,) = struct.unpack_from("<I", data, _PROXY_AT)
    stride = PROXY_SIZE + _STEP_SLOTS * _STEP_SIZE
    empty = bytes(PROXY_SIZE)
    return [off for off in range(at, at + min(slots, (len(data) - at) // stride) * stride, stride)
            if data[off:off + PROXY_SIZE] != empty]


def recorder_as(data: bytes, rank: int, nranks: int, pid: int, host: str, comm_id: int | None = None,
                peers: bool = True, ops: list[int] | None = None) -> bytes:
    """`data` (a recorder file) as written by `pid` on `host`, rank `rank` of `nranks`; `peers`: proxy ops'
    peers moved by their ring offset (else kept); `ops`: `used_ops(data)` where the caller has it (one template
    said again for thousands of copies: finding the used records was most of a copy's time)."""
    buf = bytearray(data)
    old_rank, old_n, old_pid = header(data)
    struct.pack_into("<i", buf, _PID_AT, pid)
    struct.pack_into("<ii", buf, _RANK_AT, rank, nranks)
    struct.pack_into("<i", buf, _ENV_RANK_AT, rank)
    struct.pack_into("64s", buf, _HOST_AT, host.encode()[:63])
    if comm_id is not None:
        struct.pack_into("<Q", buf, _COMM_AT, comm_id)
    for off in (used_ops(data) if ops is None else ops):
        op_pid, peer = struct.unpack_from("<ii", buf, off + _OP_PID)
        if op_pid == old_pid:
            struct.pack_into("<i", buf, off + _OP_PID, pid)
        struct.pack_into("<i", buf, off + _OP_RANK, rank)
        if peers:
            struct.pack_into("<i", buf, off + _OP_PEER, _ring(peer, (old_rank, old_n), (rank, nranks)))
    return bytes(buf)

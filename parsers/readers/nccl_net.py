"""NCCL's network lines that name an address: the addresses a process says it uses, and a size mismatch with a peer.

Why: a rank that loses a peer (gloo's `Connection closed by peer [10.1.2.3]:6541`, NCCL's `Connection closed by
remote peer node2<42830>`) or receives more than it posted (`NET/Socket : peer 10.1.2.3<45678> message truncated :
receiving 131072 bytes instead of 65536`) names that peer by address only. The address says who it is where another
line of the same files pairs it with a process: NCCL prints, per process, the interface and address it uses
(`Bootstrap : Using eth0:10.1.2.3<0>`, `NET/Socket : Using [0]eth0:10.1.2.3<0> [1]ib0:...`, `NET/IB : Using
[0]mlx5_0:1/IB [RO]; OOB eth0:10.1.2.3<0>`). Those lines are read here as `net-address` (information, never an
error), the mismatch as `size-mismatch` with both sizes and the peer; parsers/judges/peer_address.py maps them.

Shapes, from NCCL's sources and public logs: 2.12+ `NET/Socket : peer <addr> message truncated : receiving X bytes
instead of Y` (the receiver: X is what the peer sent, Y what it posted); before 2.12 the same without the peer;
IB 2.12+ `NET/IB : req 0/1 tag 0 peer 10.10.23.6<58683> collective mismatch error, local size 496640 remote size
65536` (the sender: local is what it sends, remote what the peer posted); IB before 2.12 `NET/IB : collective
mismatch error local size 546816 remote 524288 addr ...` (no peer).
"""

from __future__ import annotations

import re

from parsers.model.events import ErrorEvent, ErrorKind, NetAddresses, Origin, Truncated

#: one interface and address: `[0]eth0:10.1.2.3<0>` or `eth0:10.1.2.3<0>` (an IPv6 address with a `%zone`); the
#: interface name is at most 15 characters on Linux, an address text at most 64 here (bounded: issue 31)
_IFADDR = re.compile(r"(?:\[\d{1,3}\])?(?P<iface>[A-Za-z][\w.-]{0,31}):(?P<addr>[0-9A-Za-z.:%_-]{1,64})<\d{1,6}>")
#: the lines that state the addresses a process uses (the OOB part of NET/IB's line is its socket address)
_USING = re.compile(r"^(?:Bootstrap|NET/Socket) : Using |; OOB ")
_TRUNCATED = re.compile(r"NET/\w{1,16} : (?:peer (?P<peer>\S{1,300}) )?message truncated : receiving (?P<got>\d{1,20}) "
                        r"bytes instead of (?P<posted>\d{1,20})")
_IB_MISMATCH = re.compile(r"NET/\w{1,16} : (?:req \d{1,9}/\d{1,9} tag \w{1,16} peer (?P<peer>\S{1,300}) )?collective "
                          r"mismatch error,? local size (?P<local>\d{1,20}) remote(?: size)? (?P<remote>\d{1,20})")
#: most addresses one line states (a host has a few interfaces; a hostile line could list thousands)
MAX_ADDRESSES = 16


def addresses(msg: str, origin: Origin) -> ErrorEvent | None:
    """A `net-address` event for a line that states the addresses its process uses, else None."""
    if "Using " not in msg or _USING.search(msg) is None:
        return None
    start = msg.find("; OOB ") if "; OOB " in msg else 0
    found = [(m.group("iface"), m.group("addr")) for _, m in zip(range(MAX_ADDRESSES), _IFADDR.finditer(msg, start))]
    if not found:
        return None
    return ErrorEvent(kind=ErrorKind.NET_ADDRESS, message=msg, origin=origin, source="nccl-log",
                      data=NetAddresses([a for _, a in found], [i for i, _ in found]))


def size_mismatch(msg: str, origin: Origin, ts: str | None) -> ErrorEvent | None:
    """A `size-mismatch` event for NCCL's truncated-message and collective-mismatch warnings, else None: `sent` is
    what the sending side sent, `posted` what the receiving side posted, `side` which of the two printed it."""
    m = _TRUNCATED.search(msg)
    if m:
        data = Truncated("receiver", sent=int(m.group("got")), posted=int(m.group("posted")))
    else:
        m = _IB_MISMATCH.search(msg)
        if m is None:
            return None
        data = Truncated("sender", sent=int(m.group("local")), posted=int(m.group("remote")))
    return ErrorEvent(kind=ErrorKind.SIZE_MISMATCH, message=msg, origin=origin, timestamp=ts, source="nccl-log",
                      peer_addr=m.group("peer"), data=data)

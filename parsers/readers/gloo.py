"""Gloo errors as they reach a rank's stderr (usually inside a Python RuntimeError).

Why: on gloo the only words a waiting rank leaves are its timeout (`Timed out waiting
15000ms for recv operation to complete`) or, when a peer died, `Connection closed by
peer [127.0.0.1]:7064` / `Read error [..]:port: Connection reset by peer`. A timeout
says "I was waiting"; a closed connection says "someone I talk to is gone".
"""

from __future__ import annotations

import re

from parsers.model.events import ErrorEvent, ErrorKind, Origin

_TIMEOUT = re.compile(r"Timed out waiting (?P<ms>\d+)ms for (?P<what>recv|send) operation to complete")
#: The peer's address is bounded to 256 characters (a host name is at most 253, an IPv6 address with a zone fewer;
#: '127.0.0.1' in our captures): an open `[^\]]+` scanned to the line's end from every copy of the head on one
#: long line, which is quadratic (issue 31)
_CLOSED = re.compile(r"Connection closed by peer \[(?P<addr>[^\]]{1,256})\]:(?P<port>\d+)")
_RESET = re.compile(r"(?:Read|Write) error \[(?P<addr>[^\]]{1,256})\]:(?P<port>\d+): Connection reset by peer")
#: NCCL's own wording, as PyTorch repeats it under 'Last error:'
#: (2.14: 'Net : Connection closed by remote peer h<port>')
_NCCL_CLOSED = re.compile(r"Connection closed by remote peer (?P<peer>\S+)")
#: gloo's source file below transport/ ('tcp/unbound_buffer.cc', 21 characters the longest) bounded to 256, for
#: the same reason
_OTHER = re.compile(r"gloo/transport/\S{1,256}:\d+\] (?P<msg>.*)")


def match_line(text: str, origin: Origin) -> list:
    """Events in one prefix-stripped line; [] if no gloo error is in it."""
    if "gloo" not in text and "Timed out waiting" not in text and "by peer" not in text and "remote peer" not in text:
        return []
    m = _NCCL_CLOSED.search(text)
    if m:
        return [ErrorEvent(kind=ErrorKind.CONNECTION_CLOSED, message=text.strip(), origin=origin,
                           peer_addr=m.group("peer"),
                           source="nccl-last-error")]
    m = _TIMEOUT.search(text)
    if m:
        return [ErrorEvent(kind=ErrorKind.GLOO_TIMEOUT, message=text.strip(), origin=origin, op=m.group("what"),
                           source="gloo")]
    m = _CLOSED.search(text)
    if m:
        return [ErrorEvent(kind=ErrorKind.CONNECTION_CLOSED, message=text.strip(), origin=origin,
                           peer_addr=f"{m.group('addr')}:{m.group('port')}", source="gloo")]
    m = _RESET.search(text)
    if m:
        return [ErrorEvent(kind=ErrorKind.CONNECTION_RESET, message=text.strip(), origin=origin,
                           peer_addr=f"{m.group('addr')}:{m.group('port')}", source="gloo")]
    m = _OTHER.search(text)
    if m:
        return [ErrorEvent(kind=ErrorKind.GLOO_ERROR, message=text.strip(), origin=origin, source="gloo")]
    return []

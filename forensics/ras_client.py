"""Client for NCCL's RAS text protocol (NCCL 2.24+), the live view of a hung job.

Why our own client: the PyPI NCCL wheels do not ship `ncclras`, and a hang must be
diagnosable where only Python is installed. Protocol (field notes, NCCL client
source): connect to NCCL_RAS_ADDR (default localhost:28028), send
`CLIENT PROTOCOL 2`, read `SERVER PROTOCOL <n>`; optionally `TIMEOUT <s>` and
`SET FORMAT json` (2.28.7+), each answered `OK`; then `STATUS` or `VERBOSE STATUS`
and read the report until the server closes the connection.
"""

from __future__ import annotations

import socket
import time
from dataclasses import dataclass
from parsers.input.errors import ToolError

DEFAULT_ADDR = "localhost:28028"
PROTOCOL = 2
#: a protocol line (greeting, OK) is a few words; more is not a RAS server
MAX_LINE = 4096
#: a VERBOSE STATUS of a 4,000-rank job is a few MB; what passes this is kept and said cut
MAX_REPORT = 64 << 20
#: a report trickled slower than this is kept as far as it came (each read alone has `timeout`)
MAX_REPORT_S = 120.0


class RasError(ToolError):
    """RAS could not be asked: nothing listens, the peer spoke something else, or it timed out."""

    def __init__(self, message: str, unreachable: bool = False) -> None:
        super().__init__(message)
        self.unreachable = unreachable


@dataclass
class RasAnswer:
    """The raw report and what the exchange looked like."""

    addr: str
    command: str
    fmt: str
    server_protocol: str
    text: str
    seconds: float
    cut: str | None = None  #: why the report ends early (too large, too slow), when it does


def parse_addr(addr: str) -> tuple[str, int]:
    """'host:port', '[v6]:port', 'host' (default port) -> (host, port)."""
    addr = addr.strip() or DEFAULT_ADDR
    if addr.startswith("["):
        host, _, rest = addr[1:].partition("]")
        port = rest.lstrip(":") or "28028"
    elif addr.count(":") == 1:
        host, port = addr.split(":")
    else:
        host, port = addr, "28028"
    try:
        return host or "localhost", int(port)
    except ValueError:
        raise RasError(f"bad RAS address {addr!r}: port must be a number") from None


class _Deadline:
    """The one end time of a whole query: each socket wait is the shorter of `per_read` and what is left.

    A peer that sends one byte every few seconds answers every single read in time;
    only an overall end stops it.
    """

    def __init__(self, per_read: float, seconds: float) -> None:
        self.per_read = per_read
        self.end = time.monotonic() + max(0.0, seconds)

    def arm(self, sock: socket.socket) -> None:
        left = self.end - time.monotonic()
        if left <= 0:
            raise socket.timeout("overall deadline")
        sock.settimeout(min(self.per_read, left))

    def passed(self) -> bool:
        return time.monotonic() >= self.end


def _read_line(sock: socket.socket, deadline: _Deadline | None = None) -> str:
    """One protocol line, a byte at a time (the report that follows must stay in the socket)."""
    buf = bytearray()
    while not buf.endswith(b"\n"):
        if len(buf) >= MAX_LINE:
            raise RasError(f"the peer sent a line of over {MAX_LINE} bytes where RAS sends a few words: not RAS")
        if deadline is not None:
            deadline.arm(sock)
        chunk = sock.recv(1)
        if not chunk:
            break
        buf += chunk
    return buf.decode(errors="replace")


def query(addr: str = DEFAULT_ADDR, verbose: bool = False, json_format: bool = False, timeout: float = 10.0,
          ras_timeout: int | None = None, max_bytes: int = MAX_REPORT, max_seconds: float = MAX_REPORT_S,
          deadline: float | None = None) -> RasAnswer:
    """Ask one RAS server for its status report. Raises RasError; never waits past `timeout` for one read,
    nor reads past `max_bytes` or `max_seconds` in all: whatever answers at the address may be hostile.

    `deadline` (time.monotonic() seconds) ends the whole exchange, connect and greeting included: past
    it, a report that started is kept as far as it came, and one that did not is a RasError."""
    host, port = parse_addr(addr)
    start = time.monotonic()
    end = min(start + max_seconds, deadline) if deadline is not None else start + max_seconds
    clock = _Deadline(timeout, end - start)
    try:
        sock = socket.create_connection((host, port), timeout=max(0.001, min(timeout, end - start)))
    except (ConnectionRefusedError, socket.gaierror, OSError) as err:
        raise RasError(f"nothing answers at {host}:{port} ({err.strerror or err}); is an NCCL job (2.24+) running "
                       f"on this host with RAS enabled (NCCL_RAS_ENABLE=1, NCCL_RAS_ADDR)?", unreachable=True) from None
    try:
        with sock:
            clock.arm(sock)
            sock.sendall(f"CLIENT PROTOCOL {PROTOCOL}\n".encode())
            greeting = _read_line(sock, clock)
            if not greeting.upper().startswith("SERVER PROTOCOL "):
                raise RasError(f"{host}:{port} is not an NCCL RAS server (it answered {greeting.strip()[:80]!r})")
            if ras_timeout is not None:
                _set(sock, f"TIMEOUT {int(ras_timeout)}", clock)
            if json_format:
                _set(sock, "SET FORMAT json", clock)
            command = "VERBOSE STATUS" if verbose else "STATUS"
            clock.arm(sock)
            sock.sendall(command.encode() + b"\n")
            report, cut = _read_report(sock, max_bytes, clock)
    except socket.timeout:
        if clock.passed():
            raise RasError(f"RAS at {host}:{port} did not finish answering within the query's "
                           f"{end - start:.3g} s") from None
        raise RasError(f"RAS at {host}:{port} did not answer within {timeout:g} s") from None
    except ConnectionError as err:
        raise RasError(f"RAS at {host}:{port} dropped the connection: {err}") from None
    return RasAnswer(addr=f"{host}:{port}", command=command, fmt="json" if json_format else "text",
                     server_protocol=greeting.split()[-1] if greeting.split() else "?",
                     text=report.decode(errors="replace"), seconds=time.monotonic() - start, cut=cut)


def _read_report(sock: socket.socket, max_bytes: int, deadline: _Deadline) -> tuple[bytes, str | None]:
    """The report until the server closes; (what came, why it was cut or None) past either bound."""
    chunks: list[bytes] = []
    size = 0
    while True:
        if deadline.passed():
            if not chunks:
                raise socket.timeout("overall deadline")
            return b"".join(chunks), "the server was still sending when the time for the whole report ran out"
        try:
            deadline.arm(sock)
            chunk = sock.recv(65536)
        except socket.timeout:
            if not chunks:
                raise
            if deadline.passed():
                return b"".join(chunks), "the server was still sending when the time for the whole report ran out"
            return b"".join(chunks), f"the server stopped sending for {sock.gettimeout():g} s before the report's end"
        if not chunk:
            return b"".join(chunks), None
        if size + len(chunk) > max_bytes:
            chunks.append(chunk[:max_bytes - size])
            return b"".join(chunks), f"the report passed {max_bytes} bytes; what follows was not read"
        chunks.append(chunk)
        size += len(chunk)


def _set(sock: socket.socket, line: str, deadline: _Deadline | None = None) -> None:
    if deadline is not None:
        deadline.arm(sock)
    sock.sendall(line.encode() + b"\n")
    reply = _read_line(sock, deadline)
    if reply.strip().upper() != "OK":
        raise RasError(f"RAS refused {line!r}: {reply.strip()[:200]!r} (SET FORMAT json needs NCCL 2.28.7+)")

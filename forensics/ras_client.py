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

DEFAULT_ADDR = "localhost:28028"
PROTOCOL = 2


class RasError(Exception):
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


def _read_line(sock: socket.socket) -> str:
    buf = b""
    while not buf.endswith(b"\n"):
        chunk = sock.recv(1)
        if not chunk:
            break
        buf += chunk
    return buf.decode(errors="replace")


def query(addr: str = DEFAULT_ADDR, verbose: bool = False, json_format: bool = False, timeout: float = 10.0,
          ras_timeout: int | None = None) -> RasAnswer:
    """Ask one RAS server for its status report. Raises RasError; never hangs past `timeout` per read."""
    host, port = parse_addr(addr)
    start = time.monotonic()
    try:
        sock = socket.create_connection((host, port), timeout=timeout)
    except (ConnectionRefusedError, socket.gaierror, OSError) as err:
        raise RasError(f"nothing answers at {host}:{port} ({err.strerror or err}); is an NCCL job (2.24+) running "
                       f"on this host with RAS enabled (NCCL_RAS_ENABLE=1, NCCL_RAS_ADDR)?", unreachable=True) from None
    try:
        with sock:
            sock.sendall(f"CLIENT PROTOCOL {PROTOCOL}\n".encode())
            greeting = _read_line(sock)
            if not greeting.upper().startswith("SERVER PROTOCOL "):
                raise RasError(f"{host}:{port} is not an NCCL RAS server (it answered {greeting.strip()[:80]!r})")
            if ras_timeout is not None:
                _set(sock, f"TIMEOUT {int(ras_timeout)}")
            if json_format:
                _set(sock, "SET FORMAT json")
            command = "VERBOSE STATUS" if verbose else "STATUS"
            sock.sendall(command.encode() + b"\n")
            chunks = []
            while True:
                chunk = sock.recv(65536)
                if not chunk:
                    break
                chunks.append(chunk)
    except socket.timeout:
        raise RasError(f"RAS at {host}:{port} did not answer within {timeout:g} s") from None
    except ConnectionError as err:
        raise RasError(f"RAS at {host}:{port} dropped the connection: {err}") from None
    return RasAnswer(addr=f"{host}:{port}", command=command, fmt="json" if json_format else "text",
                     server_protocol=greeting.split()[-1] if greeting.split() else "?",
                     text=b"".join(chunks).decode(errors="replace"), seconds=time.monotonic() - start)


def _set(sock: socket.socket, line: str) -> None:
    sock.sendall(line.encode() + b"\n")
    reply = _read_line(sock)
    if reply.strip().upper() != "OK":
        raise RasError(f"RAS refused {line!r}: {reply.strip()[:200]!r} (SET FORMAT json needs NCCL 2.28.7+)")

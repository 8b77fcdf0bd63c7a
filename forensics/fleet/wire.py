"""The framing of a host's answer on the ssh/srun stdout: one header, the archive in base64, one trailer.

Line-based on purpose: ClusterShell (and its tree-mode gateways) and srun --label hand
output over line by line, and anything else a login prints (motd, warnings) is
simply not a frame line and is ignored.

    FORENSICS-FLEET 1 BEGIN {"host": ..., "status": ..., ...}
    <base64 of the bundle .tar.gz, up to 65,536 characters a line>
    FORENSICS-FLEET 1 END <sha256 of the archive>

Long lines on purpose: ClusterShell hands each line to the event handler through
several Python calls (a signature check by inspect among them), so a 24 KB host answer
in 76-character lines cost ~310 events. Measured with benchmarks/standin_ssh, 1,024 hosts:
the orchestrator's CPU for the transport went from 7.0 s to 1.7 s (about 16 us a line)
with 64 KiB lines. The decoder joins lines of any length, so older collectors still read.
"""

from __future__ import annotations

import base64
import hashlib
import json
from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator
from parsers.input.errors import BadInput

MAGIC = "FORENSICS-FLEET"
WIRE_VERSION = 1
_BEGIN = f"{MAGIC} {WIRE_VERSION} BEGIN "
_END = f"{MAGIC} {WIRE_VERSION} END "
LINE = 65536  #: base64 characters a line (a multiple of 4, so every line decodes on its own)


class WireError(BadInput):
    """A host's answer is absent, cut short or damaged."""


@dataclass
class Answer:
    """What one host sent back: its header and (when it collected anything) the archive bytes."""

    header: dict[str, Any] = field(default_factory=dict)
    archive: bytes | None = None


def encode(header: dict[str, Any], archive: bytes | None) -> Iterator[str]:
    """Lines (without newline) that carry `header` and `archive`."""
    yield _BEGIN + json.dumps(header, sort_keys=True)
    if archive is not None:
        text = base64.b64encode(archive).decode("ascii")
        for i in range(0, len(text), LINE):
            yield text[i : i + LINE]
    yield _END + (hashlib.sha256(archive).hexdigest() if archive is not None else "-")


def decode(lines: Iterable[str]) -> Answer:
    """The answer framed in `lines`; what is around it is skipped. Raises WireError when incomplete or damaged.

    The frame is found in the lines joined, not line by line: srun --label cuts a long line into pieces, each
    its own labelled line, and with --unbuffered it cuts wherever one of its reads ended (a loaded host cut the
    header mid-JSON, and its answer was lost as 'no answer'). Base64 holds no space and no '-', so the pieces of
    the archive, of the header and of the end line join back whatever the cuts."""
    text = "".join(line.rstrip("\r\n") for line in lines)
    start = text.find(_BEGIN)
    if start < 0:
        raise WireError("no answer")
    try:
        header, body = json.JSONDecoder().raw_decode(text, start + len(_BEGIN))
    except json.JSONDecodeError as err:
        raise WireError(f"damaged header ({err})") from err
    if not isinstance(header, dict):
        raise WireError("damaged header (not an object)")
    end = text.find(_END, body)
    if end < 0:
        raise WireError("answer cut short (no end line)")
    digest = text[end + len(_END):].lstrip()
    if digest.startswith("-"):
        return Answer(header=header, archive=None)
    try:
        archive = base64.b64decode("".join(text[body:end].split()), validate=True)
    except ValueError as err:
        raise WireError(f"damaged archive encoding ({err})") from err
    if hashlib.sha256(archive).hexdigest() != digest[:64]:
        raise WireError("archive checksum mismatch (output cut or mixed)")
    return Answer(header=header, archive=archive)

"""NCCL's own reason under a c10d NCCL error: the line after 'Last error:', joined to the error it explains.

Why: c10d prints `NCCL error in: ..., invalid usage ...`, NCCL's code (`ncclInvalidUsage: ...`), then
`Last error:` and NCCL's last WARN message on the next line ('Duplicate GPU detected : rank 1 and rank 0
both on CUDA device ac000', 'Bootstrap : no socket interface found'). That line is the cause; 'invalid usage'
is what c10d made of it. Ranks of one node share a terminal, so another process's traceback lines (frames,
their code lines, `^` markers) may fall between the heading and the reason (Megatron-LM#661): they are
skipped, per writer, and the reason is the next line of the same writer that is none of them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace

from parsers.model.events import ErrorEvent, ErrorKind, NcclReason, Origin

HEADING = "Last error:"
KIND = ErrorKind.NCCL_LAST_ERROR
#: a traceback's own lines: a frame, a line of only position markers, the traceback's heading
_TRACEBACK_LINE = re.compile(r'^(?:File "|Traceback \(most recent call last\)|[\^~]+$)')
#: kinds of the c10d events a 'Last error:' heading belongs to: the exception's line (its type, 'NCCL error in:')
#: and NCCL's code line below it
_NCCL_KINDS = (ErrorKind.NCCL_ERROR, ErrorKind.PYTHON_EXCEPTION)
MAX_EXPLAINED = 8  #: events of one error that one reason explains
MAX_REASON = 500  #: characters kept of the reason
#: a reason that only says a peer went away or was late ('socketProgressOpt: Call to recv from ... failed : Connection
#: reset by peer', NVIDIA/nccl#2076): the rank lost its peer; that is no cause of its own to head its error with
PEER_LOSS = re.compile(r"Connection (?:reset|closed|refused|timed out)|remote peer|[Tt]imed out|[Tt]imeout")


def own_reason(reason: str | None) -> bool:
    """True for a reason that is the rank's own cause (a duplicate GPU, no network interface, a truncated
    message), not a peer's loss."""
    return bool(reason) and not PEER_LOSS.search(reason)


@dataclass
class LastErrorBlock:
    """Per writer: the NCCL error a 'Last error:' heading follows, until its reason line comes."""

    #: writer -> the events of its last c10d NCCL error (its exception line, its code line) not yet explained
    errors: dict[tuple, list[ErrorEvent]] = field(default_factory=dict)
    waiting: dict[tuple, list[ErrorEvent]] = field(default_factory=dict)  #: writer -> the error awaiting its reason

    def saw(self, events: list, origin: Origin) -> None:
        """Remember the writer's NCCL error events among `events` (the heading's error is the one above it)."""
        for e in events:
            if type(e) is ErrorEvent and e.kind in _NCCL_KINDS:
                self.errors.setdefault(origin.writer, []).append(e)
                del self.errors[origin.writer][:-MAX_EXPLAINED]

    def feed(self, raw: str, text: str, origin: Origin) -> tuple[bool, list[ErrorEvent]]:
        """(taken, events): the heading is taken (understood, no event); the reason line gives a `nccl-last-error`
        event and fills `last_error` of the error it explains; `raw` (with its indentation) tells a traceback's
        code line from the reason, which c10d writes at column 0."""
        writer = origin.writer
        stripped = text.strip()
        if stripped == HEADING:
            self.waiting[writer] = self.errors.pop(writer, [])
            return True, []
        if writer not in self.waiting:
            return False, []
        if not stripped or stripped.startswith("Exception raised from"):  # NCCL had no message: c10d prints none
            del self.waiting[writer]
            return False, []
        if _TRACEBACK_LINE.match(stripped) or raw[:1].isspace() or text[:1].isspace():
            return False, []  # another process's traceback between the heading and the reason
        explained = self.waiting.pop(writer)
        reason = stripped[:MAX_REASON]
        for e in explained:  # nccl-error, python-exception: their data is an NcclFailure
            e.data = replace(e.data, last_error=reason)
        head = explained[0] if explained else None
        data = NcclReason(head.kind, head.origin.line) if head is not None else NcclReason()
        return False, [ErrorEvent(kind=KIND, message=reason, origin=origin, timestamp=head.timestamp if head else None,
                                  source="c10d", data=data)]

"""DistributedDataParallel's reducer errors, as a rank prints them.

Why a reader of its own: the reducer's 'Expected to have finished reduction in the prior iteration' error is
a fault of the model code on the rank that raises it (parameters that took no part in the loss), with the
remedy torch prints beside it, yet it is a plain RuntimeError spread over several lines, most of them
torch's own advice. The rank it is about is in its own words ('... did not receive grad for rank 3: ...'),
which a launcher's prefix may not carry at all (a pasted block), or carry as a node-local label.
"""

from __future__ import annotations

import re

from parsers.model.events import ErrorEvent, ErrorKind, Origin, UnusedParameters

KIND = ErrorKind.DDP_UNUSED_PARAMETERS
#: the error's head, after any exception type glued on by interleaved output ('RuntimeErrorExpected to ...')
_HEAD = re.compile(r"Expected to have finished reduction in the prior iteration before starting a new one")
#: the list of what got no gradient, naming the rank: parameter names (TORCH_DISTRIBUTED_DEBUG=INFO/DETAIL) or
#: indices (the default)
_WHICH = re.compile(r"Parameter(?P<what>s| indices) which did not receive grad for rank (?P<rank>\d{1,7}):?"
                    r"(?P<list>.{0,300})")
#: the advice lines of the same message (torch's reducer.cpp wording, both eras): understood, nothing to weigh
_ADVICE = re.compile(
    r"^\s*(?:making sure all `?forward`? function outputs participate in calculating loss"
    r"|If you already have done the above(?: two steps)?, then the distributed data parallel module wasn't able"
    r"|In addition, you can set the environment variable TORCH_DISTRIBUTED_DEBUG to either INFO or DETAIL)"
)


def match_line(text: str, origin: Origin) -> list:
    """The reducer's error or its list of parameters without gradient, as an event of the rank it names."""
    if "did not receive grad" in text:
        m = _WHICH.search(text)
        if m:
            rank = int(m.group("rank"))  # the rank the message is about: its own words win over a prefix
            what = "parameters" if m.group("what") == "s" else "parameter indices"
            return [ErrorEvent(kind=KIND, message=text.strip()[:500], source="ddp",
                               origin=Origin(origin.host, origin.pid, rank, origin.file, origin.line,
                                             local_rank=origin.local_rank),
                               data=UnusedParameters(what, m.group("list").strip()[:200]))]
    if "finished reduction" in text and _HEAD.search(text):
        return [ErrorEvent(kind=KIND, message=text.strip()[:500], origin=origin, source="ddp")]
    return []


def is_advice(text: str) -> bool:
    """A line of the reducer error's own advice (understood: nothing in it to weigh)."""
    return ("forward" in text or "TORCH_DISTRIBUTED_DEBUG" in text) and _ADVICE.match(text) is not None

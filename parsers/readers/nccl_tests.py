"""nccl-tests' own failure lines: the test program's report of the call that failed, and its trail.

Why: nccl-tests (all_reduce_perf and friends) print, per failing process, `<host>: Test NCCL failure
common.cu:1204 'unhandled cuda error (run with NCCL_DEBUG=INFO for details) / '` (or `Test CUDA
failure ... 'system not yet initialized'`), then ` .. <host> pid <pid>: Test failure common.cu:915`
for each frame it returns through. That is the test's own failure, on that host and pid, with the
NCCL or CUDA error it got: not a line of NCCL's log (NVIDIA/nccl-tests#322, #338).
"""

from __future__ import annotations

import re

from parsers.model.events import TYPED_DATA, ErrorEvent, ErrorKind, FailureTrail, Origin
from parsers.readers import pasted_host

_FAILURE = re.compile(r"^(?:(?P<host>[\w.-]{1,253}): )?Test (?P<what>NCCL|CUDA) failure "
                      r"(?P<src>[\w./-]{1,256}:\d{1,7}) '(?P<msg>[^']{0,2000})'?")
_TRAIL = re.compile(r"(?:^|(?<=\s))\.\. (?P<host>[\w.-]{1,253}) pid (?P<pid>\d{1,10}): Test failure "
                    r"(?P<src>[\w./-]{1,256}:\d{1,7})")


def match_line(text: str, origin: Origin) -> list:
    """nccl-tests' failure line (an `nccl-error` or `cuda-error` of that host) and its trail (`test-failure`,
    with the failing process's pid), else []."""
    if "Test " not in text:
        return []
    out = []
    m = _FAILURE.match(text)
    if m:
        msg = m.group("msg").rstrip(" /")
        host = m.group("host").split(".")[0] if m.group("host") else origin.host
        where = Origin(host, origin.pid, origin.rank, origin.file, origin.line)
        # what the call it made returned
        kind = ErrorKind.NCCL_ERROR if m.group("what") == "NCCL" else ErrorKind.CUDA_ERROR
        typed = pasted_host.match_line(msg, where) if kind == ErrorKind.CUDA_ERROR else []
        kind = typed[0].kind if typed else kind  # a CUDA error that says more ('driver version is insufficient')
        out.append(ErrorEvent(kind, f"Test {m.group('what')} failure {m.group('src')} '{msg}'", where,
                              source="nccl-tests", data=TYPED_DATA[kind](what=msg, where=m.group("src"), test=True)))
    # the trail, on its own line or joined to the failure line (a wrap repair that took it for a continuation)
    t = _TRAIL.search(text, m.end() if m else 0) if (m or text.startswith("..")) else None
    if t:
        where = Origin(t.group("host").split(".")[0], int(t.group("pid")), origin.rank, origin.file, origin.line)
        out.append(ErrorEvent(ErrorKind.TEST_FAILURE, f"Test failure {t.group('src')}", where, source="nccl-tests",
                              data=FailureTrail(where=t.group("src"), trail=True)))
    return out

"""Horovod's HorovodInternalError (the failed NCCL call and its reason) is an exception of a distributed
runtime, read as such, not a line that 'reports no error'.

Real lines: the corpus excerpt of horovod #3618 (two processes' tracebacks interleaved on A100s).
"""

from __future__ import annotations

from hf_testpaths import FIXTURES
from parsers.model.events import ErrorEvent, Origin
from parsers.readers import c10d
from parsers.readers.rank_log import parse_lines


def test_horovod_internal_error_is_read_with_its_message():
    with open(FIXTURES / "realworld" / "horovod-3618.log", encoding="utf-8") as fh:
        parsed = parse_lines(fh, "horovod-3618")
    errs = [e for e in parsed.events if isinstance(e, ErrorEvent)]
    assert [(e.kind, e.data.type) for e in errs] == [("python-exception",
                                                         "horovod.common.exceptions.HorovodInternalError")]
    # verbatim input: the exception's own message
    assert "ncclAllReduce failed: unhandled cuda error" in errs[0].message
    assert not parsed.unread


def test_its_raise_line_is_no_exception():
    assert c10d.match_line("raise HorovodInternalError(e)", Origin()) == []

"""A watchdog line pasted with the user's markdown bold around its phrase, on a real excerpt.

sglang #3932 (tests/fixtures/realworld/sglang-3932.log): `[Rank 4] **Watchdog caught collective operation
timeout:** WorkNCCL(SeqNum=151721, OpType=_ALLGATHER_BASE, NumelIn=8080, NumelOut=1` then, hard-wrapped,
`29280, Timeout(ms)=600000) ran for ...`: the line is a watchdog timeout, re-joined across the wrap.
"""

from __future__ import annotations

from hf_testpaths import FIXTURES
from parsers.model.events import ErrorEvent
from parsers.readers.rank_log import parse_lines

LOG = FIXTURES / "realworld" / "sglang-3932.log"


def _timeouts() -> list[ErrorEvent]:
    with open(LOG, encoding="utf-8") as fh:
        return [e for e in parse_lines(fh, LOG.name).events
                if isinstance(e, ErrorEvent) and e.kind == "watchdog-timeout"]


def test_bold_watchdog_phrase_is_a_timeout_rejoined_across_its_wrap():
    [ev] = _timeouts()
    assert (ev.origin.rank, ev.op, ev.seq) == (4, "allgather", 151721)
    assert ev.data.numel_out == 129280 and ev.data.timeout_ms == 600000  # both halves of the wrap


def test_the_bold_line_is_no_longer_a_generic_c10d_error():
    with open(LOG, encoding="utf-8") as fh:
        generic = [e for e in parse_lines(fh, LOG.name).events if isinstance(e, ErrorEvent) and e.kind == "c10d-error"]
    assert generic == []

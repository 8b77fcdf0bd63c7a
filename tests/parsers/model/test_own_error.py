"""`own_error`: what makes a rank odd by itself at scale (the digests' flags, the focus's choice of hosts).

A warning that every rank of a gloo job prints (a real capture: ProcessGroupGloo's 'Unable to resolve hostname')
is no error of the rank; the collective mismatch the same rank raised is."""

from __future__ import annotations

from hf_testpaths import FIXTURES
from parsers.model.events import ErrorEvent, ErrorKind, own_error
from parsers.readers.rank_log import parse_pairs

CAPTURE = FIXTURES / "detail" / "mismatch" / "node00" / "rank0.stderr"


def _errors() -> list[ErrorEvent]:
    lines = CAPTURE.read_text(errors="replace").splitlines()
    return [e for e in parse_pairs(enumerate(lines, 1), str(CAPTURE)).events if type(e) is ErrorEvent]


def test_a_c10d_warning_every_rank_prints_is_no_own_error():
    warnings = [e for e in _errors() if e.kind is ErrorKind.C10D_WARNING]
    # verbatim input: the capture's own warning text, found to be sure the case is the one described
    assert warnings and "Unable to resolve hostname" in warnings[0].message
    assert not any(own_error(e) for e in warnings)


def test_the_error_the_rank_raised_still_is():
    raised = [e for e in _errors() if e.kind is ErrorKind.COLLECTIVE_MISMATCH]
    assert raised and all(own_error(e) for e in raised)

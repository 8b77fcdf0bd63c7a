"""NCCL's `Last error:` lines under a c10d exception (issue 42 item 1, issue 39 item 3): joined to their exception
across another process's traceback lines and markers, and said first in its headline. Real excerpts only
(tests/fixtures/issue39/README.md gives each source)."""

from __future__ import annotations

from pathlib import Path

import pytest

from parsers.readers.exception import read_lines

EXCERPTS = Path(__file__).resolve().parents[2] / "fixtures" / "issue39" / "excerpts"


def excs(name: str):
    return read_lines((EXCERPTS / name).read_text().splitlines(), name).exceptions


@pytest.mark.parametrize("name,detail", [
    ("dfine-289.log", "Duplicate GPU detected : rank 0 and rank 1 both on CUDA device 2000"),
    ("mambair-39.log", "Duplicate GPU detected : rank 2 and rank 0 both on CUDA device 4000"),
    ("megatron-661.log", "Duplicate GPU detected : rank 7 and rank 0 both on CUDA device f000")])
def test_last_error_is_joined_and_heads_the_headline(name, detail):
    e = next(x for x in excs(name) if x.short_type == "DistBackendError")
    assert e.details["last_error"] == detail
    assert e.message.endswith(detail)  # the message stops at NCCL's one-line reason
    assert e.headline().startswith(f"torch.distributed.DistBackendError: {detail}; NCCL error in:")


def test_interleaved_traceback_lines_are_not_part_of_the_message():
    """Megatron-LM#661: another process's frame, code line and frame header fall after the reason."""
    e = next(x for x in excs("megatron-661.log") if x.short_type == "DistBackendError")
    assert "return func" not in e.message and 'File "' not in e.message
    assert e.message.count("\n") == 3  # NCCL error, ncclInvalidUsage, Last error:, the reason


def test_a_traceback_after_the_reason_is_still_read():
    """MambaIR#39: the next rank's traceback starts right under the reason; it stays a traceback."""
    assert len(excs("mambair-39.log")) == 1  # its exception line is past the excerpt's end


def test_other_messages_keep_their_indented_lines():
    """Only an NCCL error's message skips indented lines; another exception keeps them as before."""
    lines = ["RuntimeError: shapes differ", "  expected [4, 4]", "  got [4, 2]"]
    e = read_lines(lines).exceptions[0]
    # verbatim input: the message is the lines as read
    assert e.message == "shapes differ\nexpected [4, 4]\ngot [4, 2]" and "last_error" not in e.details

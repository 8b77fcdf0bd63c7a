"""NCCL's reason under 'Last error:' joined to the c10d error it explains, in a rank log (issue 42 item 1, issue 39
item 3): across another process's traceback lines and `^` markers; a peer's loss is no cause of the rank's own.
Real excerpts only (tests/fixtures/issue39/README.md and tests/fixtures/realworld/ give each source)."""

from __future__ import annotations

from pathlib import Path

import pytest

from parsers import knowledge
from forensics.report.words import analyze
from parsers.model.findings import ObservationKind
from parsers.readers import rank_log
from parsers.readers.last_error import KIND, own_reason

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
EXCERPTS = FIXTURES / "issue39" / "excerpts"
KB = knowledge.load(use_env=False)


def parsed(path: Path):
    return rank_log.parse_lines(path.read_text().splitlines(), path.name)


@pytest.mark.parametrize("name,reason,explained", [
    ("mftcoder-31.log", "Bootstrap : no socket interface found", {"python-exception", "nccl-error"}),
    ("megatron-661.log", "Duplicate GPU detected : rank 3 and rank 0 both on CUDA device f000", {"nccl-error"}),
    ("dfine-289.log", "Duplicate GPU detected : rank 0 and rank 1 both on CUDA device 2000",
     {"python-exception", "nccl-error"})])
def test_the_reason_is_joined_to_the_error_above_it(name, reason, explained):
    p = parsed(EXCERPTS / name)
    reasons = [e for e in p.events if getattr(e, "kind", "") == KIND]
    assert [e.message for e in reasons][:1] == [reason]
    joined = {e.kind for e in p.events if (getattr(e, "data", None) or {}).get("last_error") == reason}
    assert explained <= joined
    assert not [line for _, line in p.unread if "Last error:" in line or reason in line]  # both lines understood


def test_interleaved_traceback_lines_wait_for_the_reason():
    """Megatron-LM#661: the second error's reason follows another process's code line; both reasons are read."""
    p = parsed(EXCERPTS / "megatron-661.log")
    # verbatim input: the two reasons as the excerpt prints them
    assert [e.message for e in p.events if getattr(e, "kind", "") == KIND] == [
        "Duplicate GPU detected : rank 3 and rank 0 both on CUDA device f000",
        "Duplicate GPU detected : rank 7 and rank 0 both on CUDA device f000"]


def test_a_peers_loss_is_no_reason_of_its_own():
    """NVIDIA/nccl#2076: 'Connection reset by peer' under 'Last error:' keeps its own record and heads nothing."""
    p = parsed(FIXTURES / "realworld" / "nccl-2076.log")
    assert any(e.kind == "connection-reset" for e in p.events) and not any(e.kind == KIND for e in p.events)
    assert not own_reason("socketProgressOpt: Call to recv from 172....<33759> failed : Connection reset by peer")
    assert own_reason("Bootstrap : no socket interface found")


@pytest.mark.parametrize("name,said", [("mftcoder-31.log", "Bootstrap : no socket interface found"),
                                       ("megatron-661.log", "Duplicate GPU detected")])
def test_the_first_error_says_the_reason_first(name, said, tmp_path):
    (tmp_path / name).write_text((EXCERPTS / name).read_text())
    v = analyze(tmp_path, KB).verdict
    first = next(o.facts for o in v.observations if o.kind == ObservationKind.FIRST_ERROR)
    assert said in first.error.message.split(";")[0], v.text


def test_an_empty_last_error_names_nothing():
    """pytorch#149984: 'Last error:' then a blank line and c10d's 'Exception raised from ...': NCCL had no message."""
    p = parsed(FIXTURES / "realworld" / "pytorch-149984.log")
    assert not any(getattr(e, "kind", "") == KIND for e in p.events)
    assert not any((getattr(e, "data", None) or {}).get("last_error") for e in p.events)

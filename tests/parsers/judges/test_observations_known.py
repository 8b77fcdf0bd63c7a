"""Issue 42 item 2 and 4: a known failure found anywhere reaches the verdict before the generic first error;
a flushed InfiniBand work request is a symptom (its peer and meaning said), never a reason to drain a host.

Real excerpts (tests/fixtures/realworld/): verl-161, dfine-289, megatron-661 and nemo-rl-3155 (Duplicate GPU on a
Last-error continuation, interleaved tracebacks, a Ray worker's NCCL WARN), mmdet3d-488 (DDP's error with no rank),
nccl-1814 (status 12 then status 5 from one peer), nccl-1419 (nothing known: the generic error stays).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from forensics.report.words import analyze
from forensics.report.words.facts import known as observed_facts, observed
from parsers import knowledge
from parsers.judges import observations
from parsers.model.findings import KnownFact, ObservationKind

CORPUS = Path(__file__).resolve().parents[2] / "fixtures" / "realworld"
KB = knowledge.load(use_env=False)


def _verdict(tmp_path: Path, stem: str, lines: list[str] | None = None):
    if lines is None:
        shutil.copy(CORPUS / f"{stem}.log", tmp_path)
    else:
        (tmp_path / f"{stem}.log").write_text("\n".join(lines) + "\n")
    return analyze(tmp_path, KB)


@pytest.mark.parametrize("stem", ["verl-161", "dfine-289", "megatron-661", "nemo-rl-3155"])
def test_duplicate_gpu_is_the_summary_not_the_generic_error(tmp_path, stem):
    v = _verdict(tmp_path, stem).verdict
    assert v.culprit is None  # the job's device assignment, no rank's fault
    first = v.observations[0]  # what the summary says: the known failure, not 'first error: <its exception>'
    assert first.kind is ObservationKind.KNOWN and not first.facts.symptom
    assert first.facts.title == KB.get("nccl-duplicate-gpu").title
    assert observed(first) in v.summary


def test_ddp_error_without_a_rank_says_torchs_advice(tmp_path):
    v = _verdict(tmp_path, "mmdet3d-488").verdict
    first = v.observations[0]
    entry = KB.get("ddp-unused-parameters")
    assert first.kind is ObservationKind.KNOWN and first.facts.who is None  # no rank in these words
    assert (first.facts.meaning, first.facts.action) == (entry.meaning, knowledge.ACTION_TEXT["fix-code"])
    assert "find_unused_parameters=True" in entry.meaning and observed(first) in v.summary


def test_nothing_known_keeps_the_generic_error(tmp_path):
    v = _verdict(tmp_path, "nccl-1419").verdict
    assert "one error: process-signal" in v.summary
    assert not [o for o in v.observations if o.kind is ObservationKind.KNOWN]


def test_a_flushed_request_alone_is_a_symptom_never_a_drain(tmp_path):
    lines = [ln for ln in (CORPUS / "nccl-1814.log").read_text().splitlines() if "status=12" not in ln]
    assert any("status=5" in ln for ln in lines)
    result = _verdict(tmp_path, "nccl-1814", lines)
    v = result.verdict
    assert v.culprit is None
    assert all(h.status not in ("suspect", "exclude") for h in result.hosts)
    [fact] = [o.facts for o in v.observations if isinstance(o.facts, KnownFact)]
    assert fact.symptom and fact.peer == "172.36.143.59<44206>" and fact.host == "hostname-test"
    assert fact.meaning == KB.get("nccl-ib-completion-flushed").meaning and observed_facts(fact) in v.text
    assert knowledge.ACTION_TEXT["exclude-host-and-restart"] not in v.text  # no advice to drain from a symptom


def test_the_retry_exceeded_before_the_flush_still_makes_the_host_suspect(tmp_path):
    result = _verdict(tmp_path, "nccl-1814")
    [host] = [h for h in result.hosts if h.status == "suspect"]
    assert host.host == "hostname-test" and {g.entry.id for g in host.reasons} == {"nccl-ib-completion-error"}
    assert any(isinstance(o.facts, KnownFact) and o.facts.symptom for o in result.verdict.observations)


def test_each_entry_is_said_once_with_its_count(tmp_path):
    v = _verdict(tmp_path, "megatron-661").verdict  # two Duplicate GPU lines, ranks 3 and 7 against rank 0
    known = [o.facts for o in v.observations if isinstance(o.facts, KnownFact)]
    assert len(known) == 1 <= observations.KNOWN_LIMIT and known[0].count == 2

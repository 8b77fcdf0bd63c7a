"""Recorder copies in a logs folder, read post-mortem (issue 39): a rank's copy written as it died is no frozen
process. Real capture: tests/fixtures/issue39/env/ordermismatch-s39 (NCCL 2.28.9; ranks 6 and 7 aborted on
'message truncated' 12 s after the error and copied their state; rank 5 called broadcast where the others
called all_reduce)."""

from __future__ import annotations

import json
import struct
import tarfile
from pathlib import Path

from forensics.report.words import analyze
from parsers.model.findings import ReasonClass
from parsers.readers.recorder import FLAG_DEATH_COPY, read_recorder_dir

ENV = Path(__file__).resolve().parents[2] / "fixtures" / "issue39" / "env"
FLAGS_AT = 452  #: the header's flags (nccl_patches/include/recorder_format.h)


def unpack(tmp_path: Path, name: str) -> Path:
    with tarfile.open(ENV / f"{name}-logs.tar.gz") as tar:
        tar.extractall(tmp_path, filter="data")
    return tmp_path / "logs"


def test_copies_marked_as_the_plugin_marks_them_leave_the_mismatch_its_culprit(tmp_path):
    """These copies predate RECORDER_FLAG_DEATH_COPY (the plugin now sets it in every copy, tests/nccl_patches/
    test_harness_state_copy.py): marked here as it would, the older copy (12 s) is no longer 'frozen'."""
    logs = unpack(tmp_path, "ordermismatch-s39")
    for f in logs.rglob("nccl-recorder.*.bin"):
        data = bytearray(f.read_bytes())
        struct.pack_into("<I", data, FLAGS_AT, struct.unpack_from("<I", data, FLAGS_AT)[0] | FLAG_DEATH_COPY)
        f.write_bytes(bytes(data))
    states, problems = read_recorder_dir(logs)
    assert problems == [] and len(states) == 2 and all(s.death_copy for s in states)
    verdict = analyze(logs).verdict
    want = json.loads((ENV / "ordermismatch-s39-truth.json").read_text())["culprit_ranks"]
    assert verdict.culprit is not None and [verdict.culprit.rank] == want
    assert verdict.culprit.reason_class == ReasonClass.MISMATCH
    assert not any(s.reason_class in (ReasonClass.FROZEN, ReasonClass.FROZEN_IN_OP) for s in verdict.suspects)

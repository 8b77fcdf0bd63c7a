"""One meaning per class name across forensics/, parsers/ and nccl_patches/ (issue 29).

Progress, Artifact and Frame each named two or three different things; now one each (the evidence model's:
parsers.model.events.Progress, parsers.gather.evidence.Artifact, parsers.model.stacks.Frame). The names still
shared are listed here, each with its reason, so a new clash fails this test instead of growing the list unseen.
Every class counts, nested ones too."""

from __future__ import annotations

import ast
from collections import defaultdict

from hf_testpaths import REPO

#: class names still defined in more than one module, each with the reason it may be, and where
#: (empty: svg's Box is Rect, the recorder judge's RankProgress is RankInStall)
STILL_SHARED: dict[str, tuple[str, list[str]]] = {}


def _classes() -> dict[str, list[str]]:
    found: dict[str, list[str]] = defaultdict(list)
    for pkg in ("forensics", "parsers", "nccl_patches"):
        for path in sorted((REPO / pkg).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.ClassDef):
                    found[node.name].append(str(path.relative_to(REPO)))
    return found


def test_progress_artifact_and_frame_each_name_one_class():
    found = _classes()
    assert found["Progress"] == ["parsers/model/events.py"]
    assert found["Artifact"] == ["parsers/gather/evidence.py"]
    assert found["Frame"] == ["parsers/model/stacks.py"]
    assert found["ProgressReporter"] == ["forensics/collect/progress.py"]
    assert found["ProgressDecision"] == ["parsers/judges/progress.py"]
    assert found["JobArtifact"] == ["parsers/model/manifest.py"]
    assert found["TracebackFrame"] == ["parsers/readers/exception.py"]


def test_no_class_name_is_shared_without_its_reason():
    shared = {name: where for name, where in _classes().items() if len(where) > 1}
    assert sorted(shared) == sorted(STILL_SHARED), "a new shared name, or one listed that is shared no more"
    for name, (reason, where) in STILL_SHARED.items():
        assert len(shared[name]) == len(where) and len(reason) > 40, name  # (paths: as written, before the moves)


def test_the_renamed_pairs_each_name_one_class():
    """Answer, DumpBlock, Finding, Observation, Settings, Box and RankProgress each named two things (issue 29): now
    one each."""
    found = _classes()
    assert found["Answer"] == ["forensics/fleet/wire.py"] and found["AnswerOnce"] == ["forensics/fleet/remote.py"]
    assert found["FaulthandlerBlock"] == ["parsers/readers/faulthandler.py"]
    assert found["PySpyBlock"] == ["parsers/readers/pyspy_text.py"] and "DumpBlock" not in found
    assert len(found["Finding"]) == 1 and found["StepFinding"] == ["parsers/steps/classify.py"]
    assert len(found["Observation"]) == 1 and found["JobResult"] == ["forensics/bisect/decode.py"]
    assert found["Settings"] == ["parsers/steps/classify.py"]
    assert found["BisectSettings"] == ["forensics/bisect/engine.py"]
    assert found["Box"] == ["forensics/report/stacktree.py"] and found["Rect"] == ["forensics/report/svg.py"]
    assert found["RankProgress"] == ["parsers/judges/logs/tables.py"]
    assert found["RankInStall"] == ["parsers/judges/recorder.py"]

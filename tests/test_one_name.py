"""One meaning per class name across forensics/, parsers/ and nccl_patches/ (issue 29).

Progress, Artifact and Frame each named two or three different things; now one each (the evidence model's:
parsers.model.events.Progress, parsers.evidence.Artifact, parsers.model.stacks.Frame). The names still
shared are listed here, so a new clash fails this test instead of growing the list unseen."""

from __future__ import annotations

import ast
from collections import defaultdict

from hf_testpaths import REPO

#: class names still defined in more than one module (each to be given one meaning, issue 29)
STILL_SHARED = {"Answer", "Box", "DumpBlock", "Finding", "Observation", "RankProgress", "Settings"}


def _classes() -> dict[str, list[str]]:
    found: dict[str, list[str]] = defaultdict(list)
    for pkg in ("forensics", "parsers", "nccl_patches"):
        for path in sorted((REPO / pkg).rglob("*.py")):
            for node in ast.parse(path.read_text()).body:
                if isinstance(node, ast.ClassDef):
                    found[node.name].append(str(path.relative_to(REPO)))
    return found


def test_progress_artifact_and_frame_each_name_one_class():
    found = _classes()
    assert found["Progress"] == ["parsers/model/events.py"]
    assert found["Artifact"] == ["parsers/evidence.py"]
    assert found["Frame"] == ["parsers/model/stacks.py"]
    assert found["ProgressReporter"] == ["forensics/collect/progress.py"]
    assert found["ProgressDecision"] == ["parsers/judges/progress.py"]
    assert found["JobArtifact"] == ["parsers/model/manifest.py"]
    assert found["TracebackFrame"] == ["parsers/readers/exception.py"]


def test_no_new_class_name_is_shared():
    shared = {name for name, where in _classes().items() if len(where) > 1}
    assert shared <= STILL_SHARED, sorted(shared - STILL_SHARED)

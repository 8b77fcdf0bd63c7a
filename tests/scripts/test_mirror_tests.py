"""scripts/mirror_tests.py: the rewrites a moved test needs (paths from __file__, imports of helpers, the
integration mark) give the same files and marks from the new place. The check of the whole tree is
tests/test_layout.py."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from hf_testpaths import REPO
from script_module import load_script


@pytest.fixture(scope="module")
def mt():
    return load_script("mirror_tests")


def _points_to(expr: str, file: Path) -> Path:
    """Evaluate a Path(__file__) expression as if written in `file` (repository-relative)."""
    return eval(expr, {"Path": Path, "__file__": str(REPO / file)}).relative_to(REPO)


@pytest.mark.parametrize("old,new", [
    ("tests/unit/parsers/test_x.py", "tests/parsers/readers/test_x.py"),
    ("tests/integration/fleet/test_x.py", "tests/forensics/test_x.py"),
    ("tests/unit/knowledge/kb_helpers.py", "tests/support/kb_helpers.py"),
    ("tests/unit/foundation/test_x.py", "tests/test_x.py"),
])
def test_file_paths_reach_the_same_places_from_the_new_one(mt, old, new):
    old, new = Path(old), Path(new)
    source = ('REPO = Path(__file__).resolve().parents[3]\n'
              'FIX = Path(__file__).parents[2] / "fixtures" / "gloo"\n'
              'UP = Path(__file__).resolve().parent.parent.parent / "fixtures"\n'
              'JOB = Path(__file__).with_name("spawn_job.py")\n'
              'WORK = Path(__file__).resolve().parent / "steps_workload.py"\n')
    helpers = {old.parent / "spawn_job.py": Path("tests/support/spawn_job.py"),
               old.parent / "steps_workload.py": Path("tests/support/steps_workload.py")}
    notes: list[str] = []
    moved = mt.rewrite_file_paths(source, old, new, {old: new, **helpers}, notes)
    before = [ast.get_source_segment(source, n.value) for n in ast.parse(source).body]
    after = [ast.get_source_segment(moved, n.value) for n in ast.parse(moved).body]
    expected = [Path("."), Path("tests/fixtures/gloo"), Path("tests/fixtures"),
                Path("tests/support/spawn_job.py"), Path("tests/support/steps_workload.py")]
    assert [_points_to(e, old) for e in before][:3] == expected[:3]  # the old code, from the old place
    assert [_points_to(e, new) for e in after] == expected, moved  # the new code, from the new place
    assert notes == []


def test_helper_imports_become_bare_and_test_imports_follow_the_test(mt):
    moves = {Path("tests/unit/realworld/_load.py"): Path("tests/support/_load.py"),
             Path("tests/unit/fleet/test_merge.py"): Path("tests/forensics/bundle/test_merge.py")}
    text = ("from tests.unit.realworld._load import load\n"
            "    from tests.unit.fleet.test_merge import host_bundle\n")
    # verbatim input: lines of code, rewritten
    assert mt.rewrite_imports(text, moves) == ("from _load import load\n"
                                               "    from tests.forensics.bundle.test_merge import host_bundle\n")


def test_a_path_named_in_prose_follows_its_file_even_on_a_later_run(mt):
    moves = {Path("tests/unit/harden/test_redact.py"): Path("tests/parsers/test_redact.py")}
    where = {"test_fuzz_found.py": Path("tests/parsers/test_fuzz_found.py")}  # moved by an earlier run
    text = "see tests/unit/harden/test_redact.py and tests/unit/harden/test_fuzz_found.py, not tests/unit/x/gone.py"
    assert mt.rewrite_path_mentions(text, moves, where) == (
        "see tests/parsers/test_redact.py and tests/parsers/test_fuzz_found.py, not tests/unit/x/gone.py")


@pytest.mark.parametrize("source", [
    '"""Doc."""\n\nimport os\n\nX = 1\n',
    '"""Doc."""\n\nimport pytest\n\npytestmark = pytest.mark.skipif(True, reason="é")  # why\n\nX = 1\n',
    'import pytest\n\npytestmark = [pytest.mark.timeout(5),\n              pytest.mark.slow]\n',
    'import pytest\n\npytestmark = pytest.mark.integration\n',
])
def test_a_module_leaving_tests_integration_is_marked_once(mt, source):
    marked = mt.add_integration_mark(source)
    tree = ast.parse(marked)
    (mark,) = [n for n in tree.body if isinstance(n, ast.Assign) and n.targets[0].id == "pytestmark"]
    segment = ast.get_source_segment(marked, mark.value)
    assert "pytest.mark.integration" in segment and segment.count("integration") == 1
    assert any(isinstance(n, ast.Import) and n.names[0].name == "pytest" for n in tree.body)
    assert mt.add_integration_mark(marked) == marked  # once: a second run changes nothing
    if "skipif" in source:
        assert "pytest.mark.skipif(True" in segment and "# why" in marked
    if "timeout" in source:
        assert "pytest.mark.timeout(5)" in segment and "pytest.mark.slow" in segment


def test_a_test_is_placed_by_its_module_and_an_unknown_one_by_its_imports(mt, tmp_path):
    assert (mt.target_of(Path("tests/unit/parsers/test_c10d_gloo.py"))[0]
            == Path("tests/parsers/readers/test_c10d_gloo.py"))
    stray = tmp_path / "test_brand_new_flight_recorder.py"
    stray.write_text("from parsers.pipeline.analyze import analyze\nfrom parsers.judges.logs import correlate\n"
                     "from parsers.readers.flight_recorder import parse\n")

    target, why = mt.target_of(stray)
    assert target == Path("tests/parsers/readers/test_brand_new_flight_recorder.py"), why  # its name says which
    lost = tmp_path / "test_nothing.py"
    lost.write_text("import os\n")
    assert mt.target_of(lost)[0] is None

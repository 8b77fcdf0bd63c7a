"""The tests mirror the source tree (issue 29): each test file sits in tests/<folder of the module it is
about>/ (tests/parsers/readers/ for parsers/readers/*.py), helpers in tests/support/, a test of the whole
repository in tests/ itself. scripts/mirror_tests.py --check names any file astray, and the script
without --check moves it."""

from __future__ import annotations

import subprocess
import sys

from hf_testpaths import REPO


def test_every_test_file_sits_where_the_module_it_tests_does():
    done = subprocess.run([sys.executable, str(REPO / "scripts" / "mirror_tests.py"), "--check"],
                          capture_output=True, text=True, timeout=120, cwd=REPO)
    assert done.returncode == 0, (done.stdout[-4000:] + done.stderr[-2000:]
                                  + "\n(python scripts/mirror_tests.py moves them)")


def test_no_python_file_is_left_in_the_phase_folders():
    left = [p for phase in ("unit", "integration") for p in (REPO / "tests" / phase).rglob("*.py")]
    assert left == [], left


"""Shared fixtures: real hung gloo jobs that are always stopped, whatever the test does."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Callable, Iterator

import pytest

# tests/support holds the helper modules of the tests (scripts/mirror_tests.py put them there): on sys.path,
# so `from regex_pumps import ...` works from any folder; its *_fixtures.py modules are fixture plugins.
SUPPORT = Path(__file__).resolve().parent / "support"
if str(SUPPORT) not in sys.path:
    sys.path.insert(0, str(SUPPORT))
pytest_plugins = sorted(p.stem for p in SUPPORT.glob("*_fixtures.py"))

from hf_testpaths import FIXTURES, REPO  # noqa: E402, F401 - after sys.path gets tests/support; re-exported
from proc_stat import state_letter  # noqa: E402 - after sys.path gets tests/support

# A reader's exception outside the declared data errors is a bug of ours: raised in tests, not recorded as a
# file's problem (parsers.gather.evidence.STRICT_ENV). Subprocesses started by tests inherit it.
os.environ.setdefault("FORENSICS_STRICT_READERS", "1")


@pytest.fixture
def proc_state() -> Callable[[int], str | None]:
    """State letter of a pid from /proc, or None when it is gone."""
    return state_letter


@pytest.fixture
def hung_job(tmp_path: Path) -> Iterator[Callable]:
    """Factory: hung_job(fault, ranks=4, culprit=2) starts a real gloo job and waits for its hang.

    Every job started here is stopped at teardown (SIGCONT + SIGKILL), pass or fail.
    """
    pytest.importorskip("torch")
    from forensics.demo.launcher import start_job, stop_job, wait_for_hang

    jobs = []

    def make(fault: str, ranks: int = 4, culprit: int = 2):
        job = start_job(tmp_path / f"job{len(jobs)}", ranks, fault, culprit)
        jobs.append(job)
        wait_for_hang(job, timeout=120)
        return job

    yield make
    for job in jobs:
        stop_job(job)


@pytest.fixture
def forensics_cli() -> list[str]:
    """argv prefix that runs this checkout's CLI with the test's Python."""
    return [sys.executable, "-m", "forensics"]


@pytest.fixture
def cli_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    return env


_INTEGRATION = Path(__file__).resolve().parent / "integration"
#: fixtures that start real processes or build with gcc: a test using one is an integration test
_PROCESS_FIXTURES = frozenset({"hung_job", "plugin", "harness"})


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """A test module that starts real processes (gloo jobs, py-spy/gdb on live targets, sshd, slurm stand-ins,
    gcc, torchrun, mp.spawn) carries `pytestmark = pytest.mark.integration` itself: the tests mirror the source
    tree, so no folder says it (scripts/mirror_tests.py marked each module it moved out of tests/integration).
    Marked here: every test that uses a fixture of _PROCESS_FIXTURES, and any test still under
    tests/integration (a branch's test that the script has not moved yet).
    `pytest -m "not integration"` is then the fast lane (README)."""

    mark = pytest.mark.integration
    for item in items:
        if _INTEGRATION in item.path.resolve().parents or _PROCESS_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(mark)

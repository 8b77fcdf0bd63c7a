"""Recorder integration tests: the shared plugin/harness fixtures, and hanging ranks that are always killed."""

import pytest

from recorder_fixtures import harness, plugin, state_dir  # noqa: F401 - pytest fixtures


@pytest.fixture
def ranks():
    """Hanging harness ranks registered here are always killed, whatever the test does."""
    started = []
    yield started
    for r in started:
        r.kill()

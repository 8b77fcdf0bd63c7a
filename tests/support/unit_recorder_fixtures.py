"""Recorder unit tests use the shared plugin/harness fixtures."""

from recorder_fixtures import harness, plugin, state_dir  # noqa: F401 - pytest fixtures

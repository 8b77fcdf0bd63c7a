"""Fixtures shared by the unit and integration recorder tests: the real plugin and the C
harness, built with gcc. Imported by both recorder conftest.py files."""

from __future__ import annotations

from pathlib import Path

import pytest

from forensics import recorder_build
from nccl_patches.harness import build_harness


@pytest.fixture(scope="session")
def plugin() -> Path:
    """The plugin, built by the package's own build helper."""
    return recorder_build.build()


@pytest.fixture(scope="session")
def harness(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_harness(tmp_path_factory.mktemp("harness"))


@pytest.fixture
def state_dir(tmp_path: Path) -> Path:
    """A private FORENSICS_RECORDER_DIR (never the shared /dev/shm)."""
    d = tmp_path / "shm"
    d.mkdir()
    return d

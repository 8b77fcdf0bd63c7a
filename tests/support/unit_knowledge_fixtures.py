"""Fixtures of the knowledge-base tests."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def kb():
    from parsers import knowledge

    return knowledge.load(use_env=False)

"""Paths shared by tests. A module of its own: several conftest.py files exist, so
'from conftest import ...' would pick whichever was imported first."""

from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO / "tests" / "fixtures"

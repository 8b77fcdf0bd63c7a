"""No function in the repository's Python is over 80 lines (issue 43: house rule 'small functions').

Why a test: the rule was kept by hand and five functions had grown past it (a line matcher of 166 lines, a log
dispatcher of 174); long hand-written dispatch is now tables of small functions. This walks every .py file of
the repository (the code, scripts, benchmarks, the tests and their support) and names each function, method or
nested function whose definition spans more than MAX_LINES lines, decorators excluded."""

from __future__ import annotations

import ast
from pathlib import Path

from hf_testpaths import REPO

MAX_LINES = 80
#: folders that are not the project's code: the venv, build output, version control
SKIP = {".venv", ".git", "build", "dist", "node_modules", "__pycache__"}


def long_functions(source: str, name: str) -> list[str]:
    """'file:line name (N lines)' for each function in `source` longer than MAX_LINES lines."""
    found = []
    for node in ast.walk(ast.parse(source, filename=name)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            lines = node.end_lineno - node.lineno + 1
            if lines > MAX_LINES:
                found.append(f"{name}:{node.lineno} {node.name} ({lines} lines)")
    return found


def python_files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*.py")
                  if not any(part in SKIP or part.endswith(".egg-info") for part in p.relative_to(root).parts))


def test_no_function_is_over_80_lines():
    files = python_files(REPO)
    assert len(files) > 300  # the walk found the repository, not an empty folder
    found = [hit for p in files for hit in long_functions(p.read_text(encoding="utf-8"), str(p.relative_to(REPO)))]
    assert found == [], "split these into smaller functions (or tables of them):\n" + "\n".join(found)


def test_the_check_sees_a_long_method_and_passes_a_short_one():
    body = "".join(f"        x{i} = {i}\n" for i in range(MAX_LINES - 1))
    assert long_functions(f"class C:\n    def m(self):\n{body}", "ok.py") == []  # exactly 80 lines: allowed
    long = f"class C:\n    def m(self):\n{body}        x = 0\n"
    assert long_functions(long, "long.py") == [f"long.py:2 m ({MAX_LINES + 1} lines)"]

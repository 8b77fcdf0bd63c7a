"""The linter and the type checker run inside the test suite, so `.ci/run` runs them (issue 43, item 4).

ruff checks the whole repository with the settings in pyproject.toml ([tool.ruff]: pycodestyle errors and
warnings, pyflakes, lines of at most 120 characters); mypy checks the model and the judges (parsers/model,
parsers/judges: [tool.mypy]).
Both are pinned in the `test` extra that scripts/setup.sh installs.

What is excused is listed in pyproject.toml, file by file, and must shrink: a file listed as excused from a
rule that it no longer breaks fails here until its entry is removed, so the list cannot outlive its reasons."""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib

from hf_testpaths import REPO

SETUP = "install the test tools: bash scripts/setup.sh (or pip install -e '.[test]')"


def _run(*argv: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", *argv], capture_output=True, text=True, timeout=timeout, cwd=REPO)


def _tool(name: str) -> None:
    done = _run(name, "--version", timeout=60)
    assert done.returncode == 0, f"{name} is not installed in this environment: {SETUP}\n{done.stderr[-2000:]}"


def test_ruff_finds_nothing_in_the_repository():
    _tool("ruff")
    done = _run("ruff", "check", "--no-cache", "--output-format", "concise", ".")
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]


def test_mypy_finds_nothing_in_the_model_and_the_judges(tmp_path):
    _tool("mypy")
    done = _run("mypy", "--cache-dir", str(tmp_path / "mypy"))
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]
    files = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["mypy"]["files"]
    assert {"parsers/model", "parsers/judges"} <= set(files), files


def _excused() -> dict[str, list[str]]:
    """pyproject.toml's per-file excuses that name one file (globs such as '*.ipynb' are rules, not debts)."""
    table = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["ruff"]["lint"]["per-file-ignores"]
    return {path: codes for path, codes in table.items() if not any(c in path for c in "*?[")}


def test_every_excused_file_still_breaks_the_rule_it_is_excused_from():
    _tool("ruff")
    excused = _excused()
    assert excused, "pyproject.toml lists no per-file excuse: then this test and its list can go"
    missing = [path for path in excused if not (REPO / path).is_file()]
    assert missing == [], f"excused files that do not exist (remove their entries): {missing}"
    codes = sorted({c for cs in excused.values() for c in cs})
    done = _run("ruff", "check", "--isolated", "--no-cache", "--line-length", "120", "--select", ",".join(codes),
                "--output-format", "json", *excused)
    found = {(str(REPO.joinpath(f["filename"]).relative_to(REPO)), f["code"]) for f in json.loads(done.stdout or "[]")}
    stale = [f"{path}: {code}" for path, cs in excused.items() for code in cs if (path, code) not in found]
    assert stale == [], "these files are clean of what pyproject.toml excuses them from; remove the entries:\n" + \
        "\n".join(stale)


def test_the_model_module_excused_from_mypy_still_has_errors(tmp_path):
    """[[tool.mypy.overrides]] ignore_errors is a debt too: once the module passes, the override must go."""
    _tool("mypy")
    overrides = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["mypy"].get("overrides", [])
    modules = [m for o in overrides if o.get("ignore_errors") for m in o["module"]]
    for module in modules:
        path = REPO.joinpath(*module.split(".")).with_suffix(".py")
        done = _run("mypy", "--config-file", "/dev/null", "--python-version", "3.11", "--ignore-missing-imports",
                    "--follow-imports", "silent", "--cache-dir", str(tmp_path / "mypy"), str(path))
        assert done.returncode == 1 and ": error:" in done.stdout, \
            f"{module} passes mypy now: remove its ignore_errors override from pyproject.toml\n{done.stdout[-2000:]}"

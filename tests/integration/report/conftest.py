"""Fixtures for the report tests: a real hang bundle, a Jupyter kernel, headless Chromium.

The bundle comes from a real run: `forensics demo` starts a 4-rank gloo job, one rank
stalls in its data loader, every rank is collected, the job is stopped.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
ARTIFACTS = ROOT / "test-artifacts" / "report"
CULPRIT = 2


@pytest.fixture(scope="session")
def artifacts_dir() -> Path:
    """test-artifacts/report/ (gitignored): screenshots and executed notebooks land here."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    return ARTIFACTS


@pytest.fixture(scope="session")
def demo_bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A bundle of a real hung 4-rank gloo job whose rank 2 sleeps in its data loader."""
    pytest.importorskip("torch")
    from forensics.collectors.base import CollectOptions
    from forensics.demo.run import run_demo

    out = tmp_path_factory.mktemp("report-demo") / "bundle"
    outcome = run_demo(out, ranks=4, fault="sleep", culprit=CULPRIT, options=CollectOptions(), quiet=True)
    assert outcome.correct, f"the demo itself misjudged the hang: {outcome.verdict.summary}"
    return out


@pytest.fixture(scope="session")
def kernel_name(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A kernelspec for this interpreter, installed into a temp JUPYTER_PATH (works on a fresh machine)."""
    pytest.importorskip("ipykernel")
    prefix = tmp_path_factory.mktemp("jupyter")
    name = "forensics-report-test"
    subprocess.run([sys.executable, "-m", "ipykernel", "install", "--prefix", str(prefix), "--name", name],
                   check=True, capture_output=True, timeout=120)
    share = prefix / "share" / "jupyter"
    old = os.environ.get("JUPYTER_PATH")
    os.environ["JUPYTER_PATH"] = str(share) + (os.pathsep + old if old else "")
    yield name
    if old is None:
        os.environ.pop("JUPYTER_PATH", None)
    else:
        os.environ["JUPYTER_PATH"] = old


def _find_chromium() -> str | None:
    return next((p for p in (shutil.which(n) for n in ("chromium", "chromium-browser")) if p), None)


@pytest.fixture(scope="session")
def chromium() -> str:
    """Path of Debian's chromium; installed with apt-get when missing (as root), else the test is skipped."""
    found = _find_chromium()
    if found:
        return found
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        pytest.skip("chromium is not installed and cannot be: apt-get needs root (run: apt-get install -y chromium)")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    lock = ["-o", "DPkg::Lock::Timeout=300"]
    install = subprocess.run(["apt-get", "install", "-y", *lock, "chromium"], env=env, capture_output=True, text=True, timeout=900)
    if install.returncode != 0:  # the package lists may be stale or absent
        subprocess.run(["apt-get", "update", *lock], env=env, capture_output=True, timeout=600)
        install = subprocess.run(["apt-get", "install", "-y", *lock, "chromium"], env=env, capture_output=True, text=True, timeout=900)
    found = _find_chromium()
    if not found:
        pytest.skip(f"apt-get could not install chromium: {install.stderr.strip()[-300:]}")
    return found

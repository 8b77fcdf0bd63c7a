"""The report end to end on a real hang: notebooks, the HTML report in headless Chromium, the CLI.

One module on purpose: every test here shares one real bundle (session fixture), made by
`forensics demo`: a 4-rank gloo job whose rank 2 stalls in its data loader, every rank
collected, the job stopped. (A conftest.py here would shadow the suite's own `conftest`
module, which other tests import by name.)

- every notebook in examples/ runs top to bottom with nbclient against that bundle;
- `forensics report` writes one HTML file that headless Chromium renders with the network
  cut (every host unresolvable, a dead proxy); the DOM must hold the verdict and the
  wait-for graph naming the culprit, and the screenshot, saved under test-artifacts/report/,
  must show the culprit's red.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Iterator

import pytest

ROOT = Path(__file__).resolve().parents[4]
ARTIFACTS = ROOT / "test-artifacts" / "report"
NOTEBOOKS = sorted((ROOT / "examples").glob("*.ipynb"))
CULPRIT = 2  #: the rank the demo_bundle fixture makes hang
CULPRIT_RGB = (0xD6, 0x27, 0x28)

pytestmark = pytest.mark.integration


def _env() -> dict[str, str]:
    """This process's environment with the checkout on PYTHONPATH (for the CLI and the kernel)."""
    return dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))


# --- fixtures ---------------------------------------------------------------------

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
def kernel_name(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
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
    install = subprocess.run(["apt-get", "install", "-y", *lock, "chromium"], env=env, capture_output=True, text=True,
                             timeout=900)
    if install.returncode != 0:  # the package lists may be stale or absent
        subprocess.run(["apt-get", "update", *lock], env=env, capture_output=True, timeout=600)
        install = subprocess.run(["apt-get", "install", "-y", *lock, "chromium"], env=env, capture_output=True,
                                 text=True, timeout=900)
    found = _find_chromium()
    if not found:
        pytest.skip(f"apt-get could not install chromium: {install.stderr.strip()[-300:]}")
    return found


# --- notebooks --------------------------------------------------------------------

def _execute(path: Path, kernel: str, env: dict[str, str], workdir: Path):
    """Run every cell of a notebook in a fresh kernel that inherits `env`; returns the executed notebook."""
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    nb = nbformat.read(path, as_version=4)
    saved = dict(os.environ)
    os.environ.update(env)  # the kernel inherits this environment
    try:
        client = nbclient.NotebookClient(nb, timeout=180, kernel_name=kernel,
                                         resources={"metadata": {"path": str(workdir)}})
        client.execute()  # raises CellExecutionError on the first failing cell
    finally:
        os.environ.clear()
        os.environ.update(saved)
    return nb


def _outputs(nb) -> list[dict]:
    return [out for cell in nb.cells if cell.cell_type == "code" for out in cell.get("outputs", [])]


def test_examples_exist():
    assert any(p.name == "postmortem.ipynb" for p in NOTEBOOKS), "examples/postmortem.ipynb is missing"


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_runs_on_a_real_bundle(notebook: Path, demo_bundle: Path, kernel_name: str, tmp_path: Path,
                                        artifacts_dir: Path):
    nb = _execute(notebook, kernel_name, dict(_env(), FORENSICS_BUNDLE=str(demo_bundle)), tmp_path)
    pytest.importorskip("nbformat").write(nb, artifacts_dir / f"{notebook.stem}.executed.ipynb")
    outputs = _outputs(nb)
    assert not [o for o in outputs if o.get("output_type") == "error"]
    if notebook.stem == "postmortem":
        svgs = [o for o in outputs if "image/svg+xml" in o.get("data", {})]
        assert len(svgs) >= 4, "the pictures did not render inline"
        html = "".join(o.get("data", {}).get("text/html", "") for o in outputs)
        assert "VERDICT" in html and f"rank {CULPRIT}" in html


def test_postmortem_notebook_makes_its_own_bundle(kernel_name: str, tmp_path: Path):
    """Without FORENSICS_BUNDLE the notebook runs the demo itself: the path a new user takes."""
    pytest.importorskip("torch")
    nb = _execute(ROOT / "examples" / "postmortem.ipynb", kernel_name, dict(_env(), FORENSICS_BUNDLE=""), tmp_path)
    text = "".join(str(o.get("text", "")) for o in _outputs(nb))
    assert "injected a 'sleep'" in text and "rank 2" in text


# --- HTML report in Chromium -------------------------------------------------------

def _chromium(binary: str, args: list[str], profile: Path, timeout: float = 90) -> subprocess.CompletedProcess:
    """Run headless chromium in its own session; on timeout kill that session only."""
    argv = [binary, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-extensions",
            "--disable-dev-shm-usage", f"--user-data-dir={profile}", "--proxy-server=127.0.0.1:9",
            "--host-resolver-rules=MAP * ~NOTFOUND", *args]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise
    return subprocess.CompletedProcess(argv, proc.returncode, out, err)


@pytest.fixture(scope="module")
def report(demo_bundle: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("report") / "report.html"
    run = subprocess.run([sys.executable, "-m", "forensics", "report", str(demo_bundle), "-o", str(out)],
                         capture_output=True, text=True, env=_env(), timeout=120)
    assert run.returncode == 0, run.stderr
    assert f"rank {CULPRIT}" in run.stdout
    return out


def test_report_is_self_contained(report: Path):
    text = report.read_text()
    assert "<script" not in text and "<link" not in text and "<img" not in text
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", text), "the report fetches something"
    assert "url(http" not in text and "@import" not in text


def test_chromium_renders_verdict_and_graph(report: Path, chromium: str, tmp_path: Path, artifacts_dir: Path):
    url = report.resolve().as_uri()
    dom = _chromium(chromium, ["--dump-dom", url], tmp_path / "profile-dom")
    assert dom.returncode == 0, dom.stderr[-2000:]
    html = dom.stdout
    (artifacts_dir / "report-dom.html").write_text(html)
    summary = re.search(r'id="verdict"[^>]*>\s*<div class="summary"[^>]*>(.*?)</div>', html, re.S)
    assert summary and summary.group(1).startswith(f"VERDICT: rank {CULPRIT} "), summary
    culprit = re.search(r'<span class="culprit" id="culprit"[^>]*>(.*?)</span>', html)
    assert culprit and culprit.group(1).startswith(f"rank {CULPRIT} ")
    graph = re.search(r'<div class="figure" id="waitfor-graph".*?</svg>', html, re.S)
    assert graph, "no wait-for graph in the rendered DOM"
    assert f"CULPRIT rank {CULPRIT}" in graph.group(0)
    for rank in (0, 1, 3):
        assert f"rank {rank}" in graph.group(0)

    shot = artifacts_dir / "report-screenshot.png"
    shot.unlink(missing_ok=True)
    res = _chromium(chromium, ["--hide-scrollbars", "--window-size=1300,2200", f"--screenshot={shot}", url],
                    tmp_path / "profile-shot")
    assert res.returncode == 0 and shot.is_file(), res.stderr[-2000:]
    from PIL import Image

    colors = Image.open(shot).convert("RGB").getcolors(maxcolors=1 << 24) or []
    red = sum(n for n, rgb in colors if all(abs(a - b) <= 24 for a, b in zip(rgb, CULPRIT_RGB)))
    assert red > 200, f"the culprit's red is not on screen ({red} pixels)"
    assert len(colors) > 20, "the screenshot looks blank"


# --- CLI ------------------------------------------------------------------------------

def test_report_from_archive_lands_beside_it(demo_bundle: Path, tmp_path: Path):
    from forensics.bundle.archive import make_archive

    archive = make_archive(demo_bundle, tmp_path / "hang.tar.gz")
    run = subprocess.run([sys.executable, "-m", "forensics", "report", str(archive)], capture_output=True, text=True,
                         env=_env(), timeout=120)
    assert run.returncode == 0, run.stderr
    out = tmp_path / "hang.html"
    assert out.is_file() and f"report: {out}" in run.stdout
    text = out.read_text()
    assert 'id="culprit"' in text and "rank 2 " in text


@pytest.mark.parametrize("fault", ["stop", "crash"])
def test_report_of_other_real_faults(fault: str, tmp_path: Path):
    """A stopped culprit and a crashed one (no process, no stack) are named and drawn too."""
    pytest.importorskip("torch")
    from forensics.collectors.base import CollectOptions
    from forensics.demo.run import run_demo
    from forensics.report.postmortem import load

    bundle = tmp_path / "bundle"
    outcome = run_demo(bundle, ranks=3, fault=fault, culprit=1, options=CollectOptions(), quiet=True)
    assert outcome.correct, outcome.verdict.summary
    pm = load(bundle)
    entry = next(e for e in pm.timeline_entries if e.rank == 1)
    others = [e for e in pm.timeline_entries if e.rank != 1]
    assert entry.culprit and all(entry.order < e.order for e in others)  # the culprit stopped earliest
    graph_svg = pm.show_graph().svg
    assert "CULPRIT rank 1" in graph_svg
    if fault == "crash":
        assert entry.station == "not placed" and "no stack: rank 1 " in pm.show_stack_tree().svg
    else:
        assert entry.state == "T"
    out = pm.report(tmp_path / "report.html")
    assert 'id="culprit"' in out.read_text()

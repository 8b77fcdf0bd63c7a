"""`forensics report` writes one HTML file that headless Chromium renders, offline, with the verdict and the graph.

The report of a real hang bundle is opened in Debian's chromium with the network cut
(every host name unresolvable, a dead proxy); the DOM it builds must hold the verdict
and the wait-for graph naming the culprit, and its screenshot, saved under
test-artifacts/report/, must show the culprit's red.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
CULPRIT = 2  #: the rank the demo_bundle fixture makes hang
pytestmark = pytest.mark.integration

CULPRIT_RGB = (0xD6, 0x27, 0x28)


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
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    run = subprocess.run([sys.executable, "-m", "forensics", "report", str(demo_bundle), "-o", str(out)],
                         capture_output=True, text=True, env=env, timeout=120)
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
    res = _chromium(chromium, ["--hide-scrollbars", "--window-size=1300,2200", f"--screenshot={shot}", url], tmp_path / "profile-shot")
    assert res.returncode == 0 and shot.is_file(), res.stderr[-2000:]
    from PIL import Image

    colors = Image.open(shot).convert("RGB").getcolors(maxcolors=1 << 24) or []
    red = sum(n for n, rgb in colors if all(abs(a - b) <= 24 for a, b in zip(rgb, CULPRIT_RGB)))
    assert red > 200, f"the culprit's red is not on screen ({red} pixels)"
    assert len(colors) > 20, "the screenshot looks blank"

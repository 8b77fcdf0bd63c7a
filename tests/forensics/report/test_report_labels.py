"""Report pictures from the base install: pure-SVG, and no label covers another.

Checked twice: on the label boxes the SVG canvas records (geometry), and in headless
Chromium, which lays the text out with a real font and reports each <text>'s box
(getBBox) through the DOM it dumps. Cases: a real 8-rank bundle, and synthetic
verdicts of 64 and 4,096 ranks (renderers only see a Verdict; see postmortem.synthetic).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from hf_testpaths import FIXTURES, REPO
from test_report_integration import _chromium, chromium  # noqa: F401 - chromium is a fixture

pytestmark = pytest.mark.integration
SIGSTOP_BUNDLE = FIXTURES / "nccl" / "sigstop" / "bundle"

#: run in the page after load: every pair of <text> boxes inside one <svg> that overlap, written into the DOM
PROBE = """<script>
window.addEventListener('load', () => {
  const out = [];
  let count = 0;
  document.querySelectorAll('svg').forEach((svg, s) => {
    const boxes = [...svg.querySelectorAll('text')].filter(t => t.textContent.trim()).map(t => {
      const b = t.getBBox(); return {t: t.textContent, x0: b.x, y0: b.y, x1: b.x + b.width, y1: b.y + b.height};
    });
    count += boxes.length;
    for (let i = 0; i < boxes.length; i++) for (let j = i + 1; j < boxes.length; j++) {
      const a = boxes[i], b = boxes[j];
      const w = Math.min(a.x1, b.x1) - Math.max(a.x0, b.x0), h = Math.min(a.y1, b.y1) - Math.max(a.y0, b.y0);
      if (w > 1 && h > 1) out.push(s + ': ' + a.t + ' | ' + b.t);
    }
  });
  const pre = document.createElement('pre'); pre.id = 'overlaps';
  pre.textContent = 'labels=' + count + '\\n' + out.join('\\n');
  document.body.appendChild(pre);
});
</script>"""


def _synthetic(world: int):
    from forensics.report.postmortem.session import PostMortem
    from forensics.report.postmortem.synthetic import synthetic_verdict

    return PostMortem(synthetic_verdict(world=world, culprit=world // 3, stopped=world - 5, missing=world - 2,
                                        laggards=3),
                      f"synthetic-{world}")


def _pictures(pm):
    from forensics.report import graph, stacktree, timeline

    suspects = {s.rank for s in pm.verdict.suspects if s.rank is not None}
    return {
        "graph": graph.draw_waitfor(pm.waitfor),
        "tree": stacktree.draw_stack_tree(pm.merged_stack_tree, suspects, pm.culprit.rank if pm.culprit else None,
                                          note=pm.view.no_stack_note()),
        "timeline": timeline.draw_timeline(pm.timeline_entries, axis=pm.view.timeline_axis),
    }


def test_report_runs_without_matplotlib(tmp_path: Path):
    """The base install has no matplotlib: block its import and write a report of a real bundle."""
    blocker = tmp_path / "block"
    blocker.mkdir()
    (blocker / "matplotlib.py").write_text("raise ImportError('matplotlib is not installed here')\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(blocker), str(REPO)]))
    out = tmp_path / "r.html"
    done = subprocess.run([sys.executable, "-m", "forensics", "report", str(SIGSTOP_BUNDLE), "-o", str(out)],
                          capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    html = out.read_text()
    assert html.count("<svg") == 3 and "CULPRIT rank 3" in html


@pytest.mark.parametrize("world", [64, 4096])
def test_no_two_labels_overlap_geometrically(world: int):
    from forensics.report.svg import overlapping_labels

    pm = _synthetic(world)
    for name, canvas in _pictures(pm).items():
        assert len(canvas.labels) > 5, name
        assert overlapping_labels(canvas.labels) == [], name
        assert canvas.size[0] < 3000, (name, canvas.size)  # still a picture, not a scroll of ranks
    assert "CULPRIT rank" in _pictures(pm)["graph"].svg()


def test_real_bundle_labels_do_not_overlap():
    from forensics.report.postmortem import load
    from forensics.report.svg import overlapping_labels

    for name, canvas in _pictures(load(SIGSTOP_BUNDLE)).items():
        assert overlapping_labels(canvas.labels) == [], name


def test_logs_only_512_labels_do_not_overlap(tmp_path: Path):
    """Issue 27 item 5: the pictures of a logs-only post-mortem of 512 ranks (no stack: no tree)."""
    from forensics.report.postmortem import load
    from forensics.report.svg import overlapping_labels
    from logs_job import write_job

    pm = load(write_job(tmp_path / "job"))
    for name, canvas in _pictures(pm).items():
        if name != "tree":
            assert len(canvas.labels) > 5, name
        assert overlapping_labels(canvas.labels) == [], name


def _report_with_probe(pm, path: Path) -> Path:
    from forensics.report.html import build_report

    html = build_report(pm).replace("</body>", PROBE + "</body>")  # the probe is test-only: the report has no script
    path.write_text(html, encoding="utf-8")
    return path


@pytest.mark.parametrize("case", ["real-8", "logs-512", "synthetic-64", "synthetic-4096"])
def test_chromium_finds_no_overlapping_labels(case: str, chromium: str, tmp_path: Path):  # noqa: F811
    from forensics.report.postmortem import load
    from logs_job import write_job

    if case == "real-8":
        pm = load(SIGSTOP_BUNDLE)
    elif case == "logs-512":
        pm = load(write_job(tmp_path / "job"))
    else:
        pm = _synthetic(int(case.split("-")[1]))
    page = _report_with_probe(pm, tmp_path / f"{case}.html")
    dom = _chromium(chromium, ["--dump-dom", page.resolve().as_uri()], tmp_path / "profile")
    assert dom.returncode == 0, dom.stderr[-2000:]
    found = re.search(r'<pre id="overlaps">(.*?)</pre>', dom.stdout, re.S)
    assert found, "the probe did not run"
    lines = found.group(1).strip().splitlines()
    count = int(lines[0].split("=")[1])
    assert count > (10 if case == "logs-512" else 30), lines[0]  # logs only: no stack tree
    assert lines[1:] == [], "\n".join(lines[1:20])
    shot = REPO / "test-artifacts" / "report" / f"labels-{case}.png"
    shot.parent.mkdir(parents=True, exist_ok=True)
    res = _chromium(chromium,
                    ["--hide-scrollbars", "--window-size=1300,2600", f"--screenshot={shot}", page.resolve().as_uri()],
                    tmp_path / "profile-shot")
    assert res.returncode == 0 and shot.stat().st_size > 10_000

"""Issue 27 item 5: one view, built once, that text, JSON, HTML and the notebook render; and the HTML of a
logs-only post-mortem draws its ranks, its last operations and its wait edges.

Real input: tests/fixtures (captured NCCL and gloo jobs, step series of a straggler, a DETAIL mismatch)
and tests/logs_job.py (a 512-rank logs-only job in the capture's line formats).
"""

from __future__ import annotations

import ast
import html
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from hf_testpaths import FIXTURES, REPO
from logs_job import write_job
from facts import says
from forensics.report.postmortem import load
from forensics.report.html import build_report
from forensics.report.text import render_view
from forensics.report.view import build_view

CASES = {
    "culprit (real bundle)": FIXTURES / "nccl" / "sleep" / "bundle",
    "straggler (step series)": FIXTURES / "straggler" / "straggle",
    "leads, no culprit (DETAIL mismatch)": FIXTURES / "detail" / "mismatch",
    "mismatch culprit (loose NCCL folder)": FIXTURES / "nccl" / "mismatch",
}


def _outputs(path: Path):
    pm = load(path)
    view = pm.view
    return pm, view, render_view(view, width=0), json.loads(json.dumps(view.to_json(), default=str)), build_report(view)


@pytest.mark.parametrize("case", list(CASES))
def test_text_json_and_html_say_the_same_culprit_leads_and_stragglers(case: str):
    pm, view, text, data, page = _outputs(CASES[case])
    assert pm.view is view  # built once, kept
    said = {"culprit": [view.culprit.label] if view.culprit else [], "leads": view.leads,
            "stragglers": view.stragglers, "consequences": view.consequences}
    assert any(said.values()), f"{case}: nothing to compare"
    lines = text.splitlines()
    for kind, items in said.items():
        for item in items:
            assert item in text, (case, kind, item)
            assert html.escape(item) in page, (case, kind, item)
    assert data["leads"] == view.leads and data["stragglers"] == view.stragglers
    assert data["consequences"] == view.consequences
    assert [x[len("  slow: "):] for x in lines if x.startswith("  slow: ")] == view.stragglers  # derived once
    assert [x[len("  lead: "):] for x in lines if x.startswith("  lead: ")] == view.leads
    if view.culprit:
        assert data["culprit"]["rank"] == view.culprit.rank and data["advice"]["next_step"] == view.culprit.next_step
        assert f"next step: {view.culprit.next_step}" in text and html.escape(view.culprit.next_step) in page
    else:
        assert data["culprit"] is None and data["advice"] is None and "culprit:" not in text


def test_the_cli_json_and_text_come_from_the_same_view():
    """`forensics analyze` and `--json` on one input: the same lines, and the old keys are all still there."""
    path = str(CASES["straggler (step series)"])
    env = {"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"}
    run = lambda *a: subprocess.run([sys.executable, "-m", "forensics", "analyze", *a], capture_output=True,  # noqa: E731
                                    text=True, cwd=REPO, env=env, timeout=120)
    data, text = json.loads(run("--json", path).stdout), run(path).stdout
    for key in ("summary", "hang", "culprit", "suspects", "leads", "stragglers", "consequences", "shows",
                "missing_evidence", "sections", "agreeing_sources", "deadlock"):
        assert key in data, key
    assert data["stragglers"] and all(f"  slow: {s}" in text.splitlines() for s in data["stragglers"])
    assert all(f"  - {m}" in text.splitlines() for m in data["missing_folded"])


def test_a_logs_only_512_rank_report_draws_ranks_last_operations_and_edges(tmp_path: Path):
    pm = load(write_job(tmp_path / "job", world=512, culprit=347))
    page = build_report(pm.view)
    table = page[page.index('id="ranks-table"'):]
    table = table[:table.index("</table>")]
    rows = re.findall(r"<tr class=\"[^\"]*\">(.*?)</tr>", table)
    assert len(rows) == 500 and "12 more rows" in page  # the table's cap, not 'none'
    assert 'class="culprit"' in table[:table.index("</tr>", table.index("<tbody>")) + 5]  # culprit first past 64 ranks
    assert "<td>347</td><td>node043</td><td>20347</td>" in rows[0]
    assert "allreduce #9 (NCCL opCount of communicator 0xde6c834580d4135f)" in rows[0]
    assert "allreduce #10 (NCCL opCount" in rows[1]
    chart = page[page.index('id="timeline"'):page.index("</svg>", page.index('id="timeline"'))]
    assert ">#9<" in chart and ">#10<" in chart and "CULPRIT, missing-line" in chart
    assert "ranks 0-346,348-511 (511)" in chart
    graph = page[page.index('id="waitfor-graph"'):page.index("</svg>", page.index('id="waitfor-graph"'))]
    assert says([graph], "512 ranks", "2 classes", "logs") and "×511" in graph and "CULPRIT rank 347" in graph
    edges = page[page.index('id="edges-table"'):]
    assert "<td>0-346,348-511</td><td>347</td>" in edges[:edges.index("</table>")]
    assert pm.waitfor.number_of_edges() == 511 and pm.waitfor.number_of_nodes() == 512
    timeline = page[page.index('id="timeline-table"'):]
    assert "<p><i>none</i></p>" not in timeline[:200]
    assert "Ranks: none" not in page and says([page], "no stack", "logs only")
    # the text says the same as the chart, from the same view
    assert pm.view.logs_stop == ["[0-346,348-511] allreduce #10", "[347] allreduce #9"]
    text = render_view(pm.view, width=0).splitlines()
    assert says(text, "logs stop", "opCount", "0xde6c834580d4135f")
    assert "  [347] allreduce #9" in text and "[347] allreduce #9" in page[page.index('id="logs-stop"'):]


def test_a_mismatch_graph_holds_every_rank_even_without_wait_edges():
    """The gloo mismatch names rank 1 but no line says whom a rank waits on: every rank is a node, none an edge,
    and the picture says why (the old graph was one node)."""
    pm = load(FIXTURES / "gloo" / "mismatch")
    assert pm.culprit is not None and pm.culprit.rank == 1
    assert sorted(pm.waitfor.nodes) == [0, 1, 2, 3] and pm.waitfor.number_of_edges() == 0
    svg = pm.show_graph().svg
    assert "no wait edges" in svg and "CULPRIT rank 1" in svg
    stations = {e.rank: e.station for e in pm.timeline_entries}
    assert stations[1] == "allgather #11" and stations[0] == "allreduce #11"


def test_render_verdict_without_an_analysis_still_renders_the_view():
    """A bare Verdict (the demo, a synthetic one) goes through the same view."""
    from forensics.report.postmortem.synthetic import synthetic_verdict
    from forensics.report.text import render_verdict

    verdict = synthetic_verdict(8, culprit=5, stopped=None, missing=None)
    assert render_verdict(verdict, width=0) == render_view(build_view(verdict), width=0)


def test_the_report_never_imports_the_notebook_api():
    """No import circle postmortem <-> report, hidden or not: forensics/report imports nothing of
    forensics.report.postmortem."""
    for path in (REPO / "forensics" / "report").glob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            names = ([node.module or ""] if isinstance(node, ast.ImportFrom)
                     else [a.name for a in node.names] if isinstance(node, ast.Import) else [])
            assert not any(n.startswith("forensics.report.postmortem") for n in names), (path.name, names)

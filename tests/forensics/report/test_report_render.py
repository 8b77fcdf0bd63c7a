"""Rendering treats bundle text as data: markup is escaped, '$' is not maths, bad paths are clear errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import networkx as nx
import pytest



from forensics.errors import ForensicsError  # noqa: E402
from forensics.report.postmortem import load  # noqa: E402
from forensics.report.postmortem.session import PostMortem  # noqa: E402
from forensics.report.postmortem.synthetic import synthetic_verdict  # noqa: E402
from forensics.report.html import build_report  # noqa: E402

ROOT = Path(__file__).resolve().parents[3]
EVIL = "<script>alert(1)</script> $\\frac{a}{b}$ & co"


def _evil_verdict():
    verdict = synthetic_verdict(8, culprit=5, stopped=None, missing=None)
    for row in verdict.sections["ranks"]:
        if row["rank"] == 5:
            row["where"] = f"{EVIL} (x.py:3)"
            row["host"] = EVIL
    verdict.sections["stack_tree"]["children"][0]["frame"] = f"{EVIL} (y.py:1)"
    verdict.suspects[0].evidence.append(EVIL)
    verdict.summary = EVIL
    return verdict


def test_bundle_text_is_escaped_and_never_maths():
    html = build_report(PostMortem(_evil_verdict(), source=EVIL))
    assert "<script>" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "$\\frac{a}{b}$" in html  # kept literally, in tables and in the SVG text


def test_external_graph_is_accepted_and_marked():
    """A wait-for graph from elsewhere (the log correlation) replaces the stand-in."""
    verdict = synthetic_verdict(8, culprit=5, stopped=None, missing=None)
    ring = nx.DiGraph([(0, 1), (1, 2), (2, 5), (3, 5), (4, 5), (6, 7), (7, 5)])
    pm = PostMortem(verdict, source="synthetic", graph=ring)
    assert pm.waitfor.nodes[5]["culprit"] and pm.waitfor.has_edge(0, 1)
    assert "CULPRIT rank 5" in pm.show_graph().svg


def test_load_refuses_what_is_not_a_bundle(tmp_path: Path):
    with pytest.raises(ForensicsError, match="no such file"):
        load(tmp_path / "nope")
    (tmp_path / "logs").mkdir()
    with pytest.raises(ForensicsError, match="not a bundle"):
        load(tmp_path / "logs")
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "manifest.json").write_text("{not json")
    with pytest.raises(ForensicsError, match="corrupted manifest"):
        load(bad)


def test_a_loose_folder_loads_through_the_one_pipeline():
    """Issue 12 item 3: postmortem.load takes a folder of loose NCCL artifacts (no manifest), as analyze does."""
    pm = load(ROOT / "tests" / "fixtures" / "nccl" / "sleep")
    assert pm.culprit is not None and pm.culprit.rank == 5


def test_cli_bad_bundle_is_exit_2_and_writes_nothing(tmp_path: Path):
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "manifest.json").write_text(json.dumps({"format": "something-else"}))
    out = tmp_path / "r.html"
    run = subprocess.run([sys.executable, "-m", "forensics", "report", str(bad), "-o", str(out)],
                         capture_output=True, text=True, cwd=ROOT, timeout=120,
                         env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert run.returncode == 2, run.stderr
    assert "forensics report: error:" in run.stderr and "Traceback" not in run.stderr
    assert not out.exists()


def test_report_without_a_culprit_still_renders():
    from parsers.model import Verdict

    verdict = synthetic_verdict(8, culprit=5, stopped=None, missing=None)
    empty = Verdict(suspects=[], summary="no culprit named", sections=verdict.sections)
    html = build_report(PostMortem(empty, source="synthetic"))
    assert "no culprit named" in html and 'id="waitfor-graph"' in html and "CULPRIT" not in html


def test_big_reports_list_suspects_first():
    html = build_report(PostMortem(synthetic_verdict(256, culprit=200, stopped=None, missing=None), source="synthetic"))
    table = html[html.index('id="ranks-table"'):]
    first_row = table[table.index("<tbody>"):].split("</tr>")[0]
    assert 'class="culprit"' in first_row and "<td>200</td>" in first_row


def test_events_order_the_timeline_by_sequence_number():
    """Once log/recorder events are known, each rank keeps its highest seq and the chart uses it."""
    from forensics.report.timeline import lanes

    events = [{"rank": r, "seq": s, "op": "allreduce", "state": "completed", "source": "nccl-log"}
              for r in range(8) for s in range(1, 10 if r == 5 else 11)]
    pm = PostMortem(synthetic_verdict(8, culprit=5, stopped=None, missing=None), source="synthetic", events=events)
    seqs = {e.rank: e.seq for e in pm.timeline_entries}
    assert seqs[5] == 9 and all(seqs[r] == 10 for r in range(8) if r != 5)
    rows, columns, by_seq = lanes(pm.timeline_entries)
    assert by_seq and columns == ["#9", "#10"]
    assert [r.x for r in rows if r.culprit] == [0] and all(r.x == 1 for r in rows if not r.culprit)
    assert "collective sequence number" in pm.show_timeline().svg

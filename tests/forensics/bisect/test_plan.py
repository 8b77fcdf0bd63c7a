"""`forensics bisect --plan` (issue 41 item 7): every round the design fixes in advance as folded host sets, what
each outcome would decide (the engine's own decoding), nothing run or written; the report's lists folded."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from forensics.bisect.engine import Bisection, BisectSettings
from forensics.bisect.designs import Unit
from forensics.bisect.plan import plan, plan_lines
from forensics.bisect.report import render


def _options(n: int, design: str = "grid", **kw) -> dict:
    units = [Unit(f"node{i:03d}", (f"node{i:03d}",)) for i in range(1, n + 1)]
    return Bisection.new_config(units, BisectSettings(design=design, **kw), test="true {hosts}")


@pytest.mark.parametrize("n,rows", [(48, 6), (16, 4), (30, 5)])
def test_grid_plan_is_rows_then_columns_folded(n: int, rows: int) -> None:
    rounds, then = plan(_options(n))
    assert [r.kind for r in rounds] == ["rows", "columns"]
    assert len(rounds[0].groups) == rows
    first = rounds[0].groups[0]
    assert first.startswith("r1g1: node[001-") and "[" in first  # a folded set, not a list of names
    covered = sum(int(g.rsplit("(", 1)[1].split()[0]) for g in rounds[0].groups)
    assert covered == n
    # wording is the behaviour: the outcome line a person reads
    assert rounds[0].outcomes[0].startswith("if every job passes")
    assert "--max-rounds" in then


def test_outcomes_are_the_engines_decoding() -> None:
    """After a failed row, a failed column leaves their common host and the rest of that row and column
    undecided; everything outside them is cleared."""
    rounds, _ = plan(_options(48))
    col = next(o for o in rounds[1].outcomes if o.startswith("if only r2g1 "))
    assert col.endswith("undecided node[001-009,017,025,033,041]") and "cleared node[010-016," in col
    passed = next(o for o in rounds[1].outcomes if o.startswith("if every job passes"))
    # wording is the behaviour: the engine's decoding, said
    assert passed == "if every job passes: cleared node[009-048]; undecided node[001-008]"


def test_adaptive_plan_says_what_depends_on_results() -> None:
    lines = plan_lines(_options(16, design="adaptive"))
    assert lines[0].startswith("bisect plan: 16 hosts (node[001-016])")
    assert any(x.startswith("round 1 (") for x in lines) and not any(x.startswith("round 2 ") for x in lines)


def test_cli_plan_runs_nothing(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    done = subprocess.run([sys.executable, "-m", "forensics", "bisect", "--hosts", "node[001-012]", "--plan",
                           "--test", f"touch {marker}"], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("bisect plan: 12 hosts") and "round 2 (columns)" in done.stdout
    assert not marker.exists() and list(tmp_path.iterdir()) == []  # no job, no state folder
    refused = subprocess.run([sys.executable, "-m", "forensics", "bisect", "--hosts", "node[001-012]", "--plan",
                              "--host-check", "true"], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert refused.returncode == 2 and "--plan runs nothing" in refused.stderr


def test_report_folds_exclude_and_undecided() -> None:
    rep = {"confidence": 0.99,
           "bad": [{"unit": h, "hosts": [h], "p_bad": 0.999} for h in ("node007", "node031", "node032")],
           "undecided": [{"unit": f"node{i:03d}", "hosts": [f"node{i:03d}"], "p_bad": 0.02} for i in range(40, 48)],
           "cleared": 10, "hosts": 48, "design": "grid", "rounds": 0, "job_count": 0, "machine_seconds": 0,
           "exclude_list": "node007,node031,node032", "outcome": "stopped",
           "evidence": [{"unit": "node040", "rounds": [None]}], "evidence_truncated": 0}
    text = render(rep)
    assert "exclude: node[007,031-032]" in text
    assert "Undecided (8): node[040-047] P(bad)=0.020" in text
    assert "Evidence" not in text  # no job ran: no table of empty rows

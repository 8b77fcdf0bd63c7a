"""Host faults lead the verdict where they explain (issue 41 item 1): in text, --json, the HTML verdict box and the
notebook; folded host sets; the culprit's own host fault is the why and draining it the next step.

The job is tests/logs_job.py's logs-only post-mortem (its line formats captured for real) with a real Xid 79 line
(tests/fixtures/host/kernel/public-gpu-faults.log, from a public thread) in kernel.log of some hosts."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from forensics.report.html import verdict_html
from forensics.report.postmortem import load
from forensics.report.text import render_view
from forensics.report.view import build_view
from forensics.report.words import analyze
from forensics.report.words.hostfaults import (KERNEL_TIME_LINES, KERNEL_TIME_NOTES, exclude_list, folded, host_faults,
                                              kernel_time_lines)
from logs_job import host_of, write_job

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures"
XID79 = next(ln for ln in (FIXTURES / "host/kernel/public-gpu-faults.log").read_text().splitlines()
             if "79, GPU has fallen off the bus" in ln)


def _job(root: Path, world: int, culprit: int, faulty: list[str]) -> Path:
    write_job(root, world=world, culprit=culprit)
    for host in faulty:
        (root / host / "kernel.log").write_text(XID79 + "\n")
    return root


@pytest.mark.parametrize("world,culprit,faulty,shown", [
    (64, 43, ["node001", "node003", "node004"], "node[001,003-004]"),
    (32, 5, ["node002"], "node002"),
])
def test_faults_elsewhere_are_stated_with_their_action(tmp_path: Path, world, culprit, faulty, shown) -> None:
    view = build_view(analyze(_job(tmp_path, world, culprit, faulty)).verdict)
    text = render_view(view)
    line = next(x for x in text.splitlines() if x.startswith("  host fault:"))
    assert f"exclude {shown}" in line and "Xid 79" in line and "drain" in line
    assert text.index("host fault:") < text.index("culprit:")  # it leads
    assert f"rank {culprit} " in view.headline and "drain" not in view.headline  # the culprit's host is healthy
    data = view.to_json()
    assert data["exclude_list"] == shown and data["host_faults"][0]["hosts"] == faulty
    assert "host fault: exclude " + shown in verdict_html(view)
    assert sum("is to exclude" in x for x in text.splitlines()) == 0  # said once, not again as 'the evidence shows'


@pytest.mark.parametrize("world,culprit", [(64, 43), (16, 9)])
def test_fault_on_the_culprits_host_is_the_why(tmp_path: Path, world: int, culprit: int) -> None:
    own = host_of(culprit)
    view = build_view(analyze(_job(tmp_path, world, culprit, [own, "node000"])).verdict)
    c = view.culprit
    assert c.rank == culprit and c.host == own
    # verbatim input: the knowledge base's title of Xid 79
    assert own in c.meaning and "GPU has fallen off the bus" in c.meaning
    assert c.next_step.startswith(f"drain (exclude) {own}")
    assert f"drain {own}" in view.headline
    html = verdict_html(view)
    assert f"drain (exclude) {own}" in html and 'id="host-faults"' in html


def test_notebook_and_json_cli_say_the_same(tmp_path: Path) -> None:
    root = _job(tmp_path / "job", 32, 20, ["node002", "node003"])
    pm = load(root)
    assert [f["folded"] for f in pm.host_faults] == ["node[002-003]"]
    assert "host fault: exclude node[002-003]" in pm._repr_html_()
    out = subprocess.run([sys.executable, "-m", "forensics", "analyze", "--json", str(root)], capture_output=True,
                         text=True, timeout=300)
    data = json.loads(out.stdout)
    assert data["exclude_list"] == "node[002-003]" and data["host_faults"][0]["hardware"] is True


def test_folding_and_grouping() -> None:
    reports = [{"host": h, "status": "exclude",
                "reasons": [{"id": "xid-79", "title": "Xid 79", "action": "hardware-ticket",
                                                               "action_text": "open a hardware ticket"}]}
               for h in ("node007", "node031", "node032")]
    reports.append({"host": "node044", "status": "suspect", "reasons": [{"id": "ib-link-down", "title": "IB link down",
                                                                          "action": "hardware-ticket",
                                                                          "action_text": "open a ticket"}]})
    reports.append({"host": "node050", "status": "healthy", "reasons": []})
    faults = host_faults(reports)
    assert [f.folded for f in faults] == ["node[007,031-032]", "node044"]
    # wording is the behaviour: the folded host-fault line
    assert faults[0].said().startswith("exclude node[007,031-032] (3 hosts): Xid 79 -> drain (exclude) the hosts")
    assert exclude_list(faults) == "node[007,031-032]"
    # wording is the behaviour: the placeholder is said in words
    assert folded(["node1", "we ird", "unknown-host"]) == "node1,we ird,(host not in the evidence)"
    assert exclude_list(host_faults([dict(reports[0], host="unknown-host")])) == ""  # never a placeholder in a list


def test_kernel_time_lines_fold_hosts_that_say_the_same_and_stay_bounded() -> None:
    """The host judge's kernel-time sentences (its reports' `kernel_times`): hosts whose sentences are the same
    share a line; a fleet of hosts that each say their own is cut to KERNEL_TIME_LINES lines and a count."""
    unknown = "kernel: the job's start on this host is not known (no process start time): ..."
    reports = [{"host": f"node{n:03d}", "kernel_times": [unknown]} for n in range(1, 65)]
    reports.append({"host": "gpu7", "kernel_times": []})
    assert kernel_time_lines(reports) == [f"hosts node[001-064]: {unknown}"]
    notes = [f"kernel: entry-{k} at 15:55:01 UTC, ...: not counted [hosts/x/kernel.log:{k}]" for k in range(5)]
    own = [{"host": f"n{n}", "kernel_times": notes[:1] + [f"{notes[1]} ({n})"]} for n in range(10)]
    lines = kernel_time_lines(own + [{"host": "big", "kernel_times": notes}])
    assert len(lines) == KERNEL_TIME_LINES + 1 and lines[-1].startswith(f"… {10 + 1 - KERNEL_TIME_LINES} more hosts")
    many = kernel_time_lines([{"host": "big", "kernel_times": notes}])[0]
    assert many.count("kernel: entry-") == KERNEL_TIME_NOTES and many.endswith(
        f"; {len(notes) - KERNEL_TIME_NOTES} more (forensics hosts)")

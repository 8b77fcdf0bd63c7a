"""The first screen of analyze, written to a file, on the five inputs of issue 27's 'Show it'
(scripts/first_screens.sh): a stopped rank, a killed rank, a collective mismatch with no culprit named, a loose Xid
79 folder, a straggler. Each screen keeps its lines whole, says no placeholder host and none of the jargon the issue
lists, and puts the mismatch lead and the straggler on lines of their own under a summary of at most two sentences."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from hf_testpaths import REPO

pytestmark = pytest.mark.integration

EXPECTED_EXIT = {"stopped rank": 0, "killed rank": 0, "mismatch with no culprit named": 3, "loose Xid 79 folder": 3,
                 "straggler": 3}
JARGON = ("unknown-host", "pg:0", "fr-dump", "coverage partial", "position 4 of", " PID ", "pid PID")


@pytest.fixture(scope="module")
def screens() -> dict[str, tuple[int, list[str]]]:
    done = subprocess.run(["bash", str(REPO / "scripts" / "first_screens.sh")], capture_output=True, text=True,
                          timeout=600, env=dict(os.environ, PYTHON=sys.executable))
    assert done.returncode == 0, done.stderr
    found: dict[str, tuple[int, list[str]]] = {}
    for block in done.stdout.split("=== ")[1:]:
        head, *lines = block.rstrip("\n").splitlines()
        title = next(t for t in EXPECTED_EXIT if head.startswith(t))
        found[title] = (int(re.search(r"\(exit (\d+)\)$", head).group(1)), lines)
    assert sorted(found) == sorted(EXPECTED_EXIT)
    return found


def _sentences(text: str) -> int:
    return len([s for s in re.split(r"(?<=[.;!?])\s+(?=[A-Z])", text) if s.strip()])


@pytest.mark.parametrize("title", sorted(EXPECTED_EXIT))
def test_each_screen_is_whole_plain_and_exits_as_documented(screens, title: str):
    code, lines = screens[title]
    assert code == EXPECTED_EXIT[title]
    assert lines[0].startswith("VERDICT: ") and _sentences(lines[0]) <= 2, lines[0]
    assert not any(line.endswith("…") for line in lines), "a line was cut in a file"
    for word in JARGON:
        assert not any(word in line for line in lines), (word, title)


def test_the_mismatch_with_no_culprit_is_a_lead_line_of_its_own(screens):
    _, lines = screens["mismatch with no culprit named"]
    assert lines[0].startswith("VERDICT: no culprit named: ")
    assert "broadcast" not in lines[0]  # the lead is not buried in the summary...
    leads = [line for line in lines if line.startswith("  lead: ")]
    assert len(leads) == 1 and all(f in leads[0] for f in ("rank 2", "broadcast()", "#4", "default group")), leads


def test_the_other_screens_say_what_their_case_needs(screens):
    stopped = screens["stopped rank"][1]
    assert stopped[0].startswith("VERDICT: rank 3 (vm pid 686) ") and "stopped" in stopped[0]
    assert any("kill -CONT 686" in x for x in stopped)
    killed = screens["killed rank"][1]
    # said by its own absence (no process on the collected host), not by the dump it did not leave
    assert killed[0].startswith("VERDICT: rank 7 ") and "no process" in killed[0], killed[:2]
    assert any("no-dump:" in x and "rank 7" in x for x in killed), killed
    xid = screens["loose Xid 79 folder"][1]
    # verbatim input: the Xid 79 line's own words in the VERDICT; the host and its status beneath
    assert "GPU has fallen off the bus" in xid[0] and any("gpu-node-7" in x and "exclude" in x for x in xid)
    straggler = screens["straggler"][1]
    assert any(x.startswith("  slow: rank 2 ") for x in straggler[:6]), straggler[:6]

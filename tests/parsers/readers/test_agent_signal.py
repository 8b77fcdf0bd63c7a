"""torchelastic's agent signalled from outside ('Received 15 death signal, shutting down workers'), read on
the real excerpt of pytorch/pytorch#150916 and on a real torchrun here whose agent gets SIGTERM.

Why both: the excerpt is what a user pastes (torch 2.6); the live run checks the line and the pid in its
logging header on the torch installed here.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hf_testpaths import FIXTURES
from parsers.model.events import ErrorEvent
from parsers.readers.rank_log import parse_lines

EXCERPT = FIXTURES / "realworld" / "pytorch-150916.log"
WORKER = "import time\nprint('worker up', flush=True)\ntime.sleep(120)\n"


def _agent_signals(lines) -> list[tuple[int | None, object]]:
    return [(e.origin.pid, e.data.signal) for e in parse_lines(iter(lines), "x").events
            if isinstance(e, ErrorEvent) and e.kind == "agent-signal"]


def test_the_excerpt_names_the_agent_by_its_logging_header_pid():
    assert _agent_signals(EXCERPT.read_text(encoding="utf-8").splitlines(True)) == [(1359, 15)]


@pytest.mark.integration  # a real torchrun run
def test_a_real_agent_that_gets_sigterm_says_so_with_its_own_pid(tmp_path: Path):
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    torchrun = Path(sys.executable).with_name("torchrun")
    log = tmp_path / "agent.log"
    with open(log, "wb") as out:
        agent = subprocess.Popen([str(torchrun), "--standalone", "--nproc-per-node=1", str(script)],
                                 stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while b"worker up" not in log.read_bytes():
            assert time.monotonic() < deadline and agent.poll() is None, log.read_text(errors="replace")
            time.sleep(0.2)
        agent.send_signal(signal.SIGTERM)
        agent.wait(timeout=60)
    finally:
        if agent.poll() is None:
            os.killpg(agent.pid, signal.SIGKILL)
            agent.wait()
    text = log.read_text(errors="replace")
    assert _agent_signals(text.splitlines(True)) == [(agent.pid, 15)], text

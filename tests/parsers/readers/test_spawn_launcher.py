"""mp.spawn's own report of a failed worker (parsers.readers.launcher, exception), on real runs here.

torch.multiprocessing.spawn prints, in the parent's traceback, which process index failed and how:
'-- Process 1 terminated with the following error:' above the worker's traceback, or
'ProcessExitedException: process 1 terminated with signal SIGSEGV'; before that it stops the others
('Terminating process P via signal SIGTERM').
"""

from __future__ import annotations

import os
import resource
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from forensics.report.words import analyze
from parsers.readers import faulthandler, rank_log
from parsers.readers.exception import read_lines
from facts import observed, says

JOB = Path(__file__).resolve().parents[2] / "support" / "spawn_job.py"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _no_core() -> None:
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


@pytest.fixture(scope="module", params=["raise", "segv"])
def console(request) -> tuple[str, str]:
    pytest.importorskip("torch")
    env = dict(os.environ, PYTHONFAULTHANDLER="1", OMP_NUM_THREADS="1")
    proc = subprocess.run([sys.executable, str(JOB), request.param, str(_free_port())], capture_output=True, text=True,
                          env=env, timeout=120, preexec_fn=_no_core)
    assert proc.returncode == 1, proc.stderr[-2000:]
    return request.param, proc.stdout + proc.stderr


def _launcher(text: str) -> list:
    out = rank_log.parse_lines(text.splitlines(keepends=True), "console.log")
    return [e for e in out.events if getattr(e, "source", "") == "launcher"], out


@pytest.mark.integration  # a real mp.spawn job (console fixture)
def test_the_failed_process_and_how_it_ended_are_read(console):
    mode, text = console
    events, out = _launcher(text)
    exits = [e.data.to_dict() for e in events if e.kind == "launcher-exit"]
    stops = [e for e in events if e.kind == "launcher-signal"]
    assert len(stops) == 2 and {e.data.signal for e in stops} == {"SIGTERM"}  # the other two, by pid
    if mode == "raise":
        assert exits == [{"local_rank": 1, "launcher": "mp.spawn", "raised": True}]
        exc = [x for x in read_lines(text.splitlines(keepends=True), "console.log").exceptions if x.local_rank == 1]
        assert [(x.short_type, x.message, x.details["launcher"]) for x in exc] == [
            ("RuntimeError", "bad batch on process 1", "mp.spawn")]
    else:
        assert exits == [{"local_rank": 1, "launcher": "mp.spawn", "exitcode": -11, "signal": "SIGSEGV"}]
        assert any(getattr(e, "kind", "") == faulthandler.KIND for e in out.events)
        main = [t for t in out.stacks if t.is_main]
        assert len(main) == 1 and main[0].frames[0].function == "worker"


@pytest.mark.integration  # a real mp.spawn job (console fixture)
def test_the_summary_says_which_process_failed_first(console, tmp_path):
    mode, text = console
    (tmp_path / "console.log").write_text(text)
    verdict = analyze(tmp_path).verdict
    assert verdict.culprit is None  # one failing worker and no waiter's evidence: said, not judged
    if mode == "raise":
        assert says(verdict.text.splitlines(), "mp.spawn", "process 1", "RuntimeError", "bad batch"), verdict.text
    else:
        assert "Segmentation fault" in verdict.text, verdict.text
        assert says(verdict.text.splitlines(), "main thread", "outside any collective", "worker"), verdict.text


@pytest.mark.parametrize("capture, named", [("race_process0.log", 0), ("race_process2.log", 2)])
def test_a_waiter_that_mp_spawn_names_is_said_to_be_a_witness(capture, named, tmp_path):
    """Captured here: a waiter's gloo 'Connection closed by peer' reaped before the process that raised
    (tests/fixtures/spawn/README.md). mp.spawn's report is said, as a witness's, and nobody is blamed."""
    src = Path(__file__).resolve().parents[2] / "fixtures" / "spawn" / capture
    (tmp_path / "console.log").write_bytes(src.read_bytes())
    verdict = analyze(tmp_path).verdict
    assert verdict.culprit is None and not any(s.rank == named for s in verdict.suspects)
    lines = verdict.text.splitlines()
    # wording is the behaviour: the heading of the line that says why the job ended
    assert says(lines, "why the job ended", f"process {named}", "RuntimeError",
                "Connection closed by peer"), verdict.text
    assert says(lines, "mp.spawn", "witness"), verdict.text  # the named process is said as a witness, not the cause
    assert says(observed(verdict, "first-error"), "python-fatal", "Aborted"), verdict.text

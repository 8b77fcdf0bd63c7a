"""torchrun consoles (`--tee`): every worker line labelled `[<role><local rank>]:`, read on real runs.

Live runs here (torchrun, 3 workers, each aborting under PYTHONFAULTHANDLER) and two real NCCL consoles
from the H200 machine (tests/fixtures/nccl_tee/): the label is a local rank, torchelastic's failure
table maps it to the global rank and pid, each worker's faulthandler dump and Flight Recorder call-site
stack stays its own when lines interleave.
"""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from forensics.report.words import analyze
from parsers.readers import faulthandler, rank_log
from facts import says

NCCL_TEE = Path(__file__).resolve().parents[2] / "fixtures" / "nccl_tee"


def _no_core() -> None:
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


_WORKER = textwrap.dedent("""
    import os, signal, time

    # the agent SIGTERMs the others once one worker dies: ignored here, so that every worker lives until
    # it aborts itself (else which dumps exist would depend on that race)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)

    # each worker aborts from inside the function it waits in, once the test says go: the dump then
    # shows where the worker was, whatever the machine's load
    def told():
        return os.path.exists(os.environ["GO_FILE"])

    def waits_in_step():
        print("ready", os.environ["RANK"], os.getpid(), flush=True)
        while not told():
            time.sleep(0.02)
        os.abort()

    def elsewhere():
        print("ready", os.environ["RANK"], os.getpid(), flush=True)
        while not told():
            time.sleep(0.02)
        os.abort()

    (elsewhere if os.environ["RANK"] == "1" else waits_in_step)()
""")


def _torchrun_aborted(tmp_path: Path, workers: int = 3) -> tuple[str, dict[int, int]]:
    """Console of a real torchrun --tee run whose workers abort (SIGABRT, faulthandler on):
    every line labelled `[default<local rank>]:`, then torchelastic's failure report. Returns it and
    rank -> pid as the workers printed them."""
    script = tmp_path / "worker.py"
    script.write_text(_WORKER)
    torchrun = Path(sys.executable).with_name("torchrun")
    go = tmp_path / "go"
    env = dict(os.environ, PYTHONFAULTHANDLER="1", OMP_NUM_THREADS="1", GO_FILE=str(go))
    proc = subprocess.Popen([str(torchrun), "--nproc-per-node", str(workers), "--tee", "3", "--standalone",
                             str(script)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                            preexec_fn=_no_core, start_new_session=True)
    lines: list[str] = []
    pids: dict[int, int] = {}
    try:
        while len(pids) < workers:
            line = proc.stdout.readline()
            assert line, "".join(lines)
            lines.append(line)
            if "]:ready " in line:
                _, rank, pid = line.split("]:", 1)[1].split()
                pids[int(rank)] = int(pid)
        go.write_text("go")  # every worker aborts itself (SIGABRT, as the watchdog's abort does)
        rest, _ = proc.communicate(timeout=60)
        lines.append(rest)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    return "".join(lines), pids


@pytest.mark.integration  # a real torchrun run
def test_torchrun_labelled_dumps_take_rank_and_pid_from_torchelastics_report(tmp_path):
    """`[default1]:` is a local rank; the agent's failure table ('rank: 1 (local_rank: 1)', pid) in the same
    console ties it to the global rank, so each worker's dump is that rank's, with its pid."""
    console, pids = _torchrun_aborted(tmp_path)
    assert "[default1]:Fatal Python error: Aborted" in console and "local_rank: 1" in console
    out = rank_log.parse_lines(console.splitlines(keepends=True), "console.log")
    mains = {t.origin.rank: t for t in out.stacks if t.is_main}
    assert set(mains) == set(pids), console
    assert {r: t.origin.pid for r, t in mains.items()} == pids, console
    assert [f.function for f in mains[1].frames] == ["elsewhere", "<module>"], console
    assert [f.function for f in mains[0].frames] == ["waits_in_step", "<module>"], console
    folder = tmp_path / "job"
    folder.mkdir()
    (folder / "console.log").write_text(console)
    summary = analyze(folder).verdict.text
    both = summary.split("faulthandler dumps (", 1)[1].split(")", 1)[0]  # ranks 0 and 2 wait in the same place
    assert "rank 0, console.log:" in both and "rank 2, console.log:" in both, summary
    assert "faulthandler dump (rank 1, console.log:" in summary and "elsewhere" in summary, summary


@pytest.mark.integration  # a real torchrun run
def test_interleaved_dumps_of_labelled_workers_stay_apart(tmp_path):
    """All ranks abort at once, so a launcher may print their dumps' lines interleaved: each labelled
    worker's lines build its own dump (the real console's lines, dealt out in turn)."""
    console, pids = _torchrun_aborted(tmp_path)
    lines = console.splitlines(keepends=True)
    own = {r: [ln for ln in lines if ln.startswith(f"[default{r}]:")] for r in pids}
    rest = [ln for ln in lines if not ln.startswith("[default")]
    dealt = [ln for group in zip(*own.values()) for ln in group] + rest
    assert len(dealt) == len(rest) + len(pids) * len(own[0])  # every worker printed as many lines
    out = rank_log.parse_lines(dealt, "console.log")
    mains = {t.origin.rank: [f.function for f in t.frames] for t in out.stacks if t.is_main}
    assert mains == {0: ["waits_in_step", "<module>"], 1: ["elsewhere", "<module>"], 2: ["waits_in_step", "<module>"]}


@pytest.mark.integration  # a real torchrun run
def test_a_local_rank_no_report_maps_is_said_as_such(tmp_path):
    """Without torchelastic's failure table (the console cut before it), `[default1]:` stays a local rank."""
    console, _ = _torchrun_aborted(tmp_path)
    labelled = "".join(ln for ln in console.splitlines(keepends=True) if ln.startswith("[default"))
    folder = tmp_path / "cut"
    folder.mkdir()
    (folder / "console.log").write_text(labelled)
    out = rank_log.parse_lines(labelled.splitlines(keepends=True), "console.log")
    assert {t.origin.rank for t in out.stacks} == {None} and {t.origin.local_rank for t in out.stacks} == {0, 1, 2}
    summary = analyze(folder).verdict.text
    assert says(summary.splitlines(), "local rank 1", "no global rank", "console.log:"), summary


def test_a_real_nccl_torchrun_console_maps_every_worker_and_names_the_rank_that_never_joined():
    """tests/fixtures/nccl_tee/sleep: torchrun --tee on NCCL 2.28.9 (torch 2.11, Python 3.12), rank 2 stuck outside
    collectives. Every worker line is `[default<L>]:`-labelled; torchelastic's table maps local to global ranks and
    pids; ranks 1 and 3 abort with dumps of one thread with '<no Python frame>' (no main thread to name)."""
    folder = NCCL_TEE / "sleep"
    out = rank_log.parse_lines((folder / "console.log").read_text().splitlines(keepends=True), "console.log")
    fatal = {(e.origin.rank, e.origin.pid) for e in out.events if getattr(e, "kind", "") == faulthandler.KIND}
    assert fatal == {(1, 503), (3, 505)}
    assert [(t.origin.rank, len(t.frames), t.is_main) for t in out.stacks] == [(1, 0, False), (3, 0, False)]
    timeouts = {e.origin.rank for e in out.events if getattr(e, "kind", "") == "watchdog-timeout"}
    assert timeouts == {0, 1, 3}
    verdict = analyze(folder).verdict
    assert verdict.culprit is not None and verdict.culprit.rank == 2 and verdict.culprit.confidence >= 0.9


def test_a_real_console_where_one_rank_runs_other_code_shows_both_call_sites():
    """tests/fixtures/nccl_tee/diverge: rank 2 broadcasts from evaluate() where the others all_reduce from
    train_step(). c10d's 'Stack trace of the failed collective:' lines (each rank's, rank 2's interleaved with
    rank 1's) give every rank's call site; the job's size is not stated, so the mismatch is a lead."""
    folder = NCCL_TEE / "diverge"
    out = rank_log.parse_lines((folder / "console.log").read_text().splitlines(keepends=True), "console.log")
    sites = {e.origin.rank: [f[0] for f in e.data.frames] for e in out.events
             if getattr(e, "kind", "") == "collective-stack"}
    assert sites == {0: ["all_reduce", "wrapper", "train_step", "main", "<module>"],
                     1: ["all_reduce", "wrapper", "train_step", "main", "<module>"],
                     2: ["broadcast", "wrapper", "evaluate", "main", "<module>"],
                     3: ["all_reduce", "wrapper", "train_step", "main", "<module>"]}
    verdict = analyze(folder).verdict
    # a culprit's confidence is at least 0.5 (CULPRIT_MIN_CONFIDENCE): a lead is no culprit
    assert verdict.culprit is None
    lead = verdict.suspects[0]
    assert (lead.rank, lead.reason_class) == (2, "mismatch") and lead.confidence < 0.5
    assert says(verdict.text.splitlines(), "2 different places", "evaluate ("), verdict.text
    # torchrun's own traceback is no worker's: one worker's NCCL line does not make the console that worker's file
    assert "a process's traceback reaches launch_agent" in verdict.text, verdict.text


def test_with_the_flight_recorder_dumps_the_one_rank_that_ran_other_code_is_named():
    """nccl_tee/diverge_fr: the same console with the four Flight Recorder dumps, whose group config gives the
    job's four ranks: rank 2's BROADCAST against three ALLREDUCEs is a culprit, not a lead."""
    folder = NCCL_TEE / "diverge_fr"
    verdict = analyze(folder).verdict
    assert verdict.culprit is not None and (verdict.culprit.rank, verdict.culprit.reason_class) == (2, "mismatch")
    assert verdict.culprit.confidence >= 0.5

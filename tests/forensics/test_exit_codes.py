"""Every command exits as docs/exit-codes.md says (issue 27 item 7), through the real CLI as a subprocess.

Where each code of each command is shown (this file, or the test named here):

  analyze      0 2 3 4   test_output_issue27.py::test_exit_codes_follow_the_table; 2 also for a damaged .gz (here)
  report       0 2 3 4   test_output_issue27.py::test_exit_codes_follow_the_table
  hosts        0 2 3 5   test_output_issue27.py::test_exit_codes_follow_the_table
  steps        0 2       test_output_issue27.py::test_exit_codes_follow_the_table
  env          0 2       test_output_issue27.py::test_exit_codes_follow_the_table
  recorder     0 2       test_output_issue27.py::test_exit_codes_follow_the_table; 2 for a folder with no state file
                         and for build without a compiler (here)
  bisect       0 2 3 5   here (real local bisections)
  collect      0 3       here (a real hung gloo job); 2 here; 6 fleet/test_fleet_collect.py::
                         test_no_host_answering_is_its_own_exit_code (a real sshd, hosts that do not answer)
  ras          0 2       parsers/test_ras_command.py; 3 harden/test_hostile_ras.py (a report cut short)
  demo         0         test_demo_cli.py (a real gloo job); 2 and 4 here (4: a real hang seen in one snapshot)
  every one    1         here: an internal error (a bug) exits 1 with one line and the traceback
"""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from hf_testpaths import FIXTURES, REPO

pytestmark = pytest.mark.integration

COMMANDS = ["analyze", "bisect", "collect", "demo", "env", "hosts", "ras", "recorder", "report", "steps"]
#: the least each command's parser accepts (the arguments are parsed before the command runs)
MINIMAL_ARGS = {"analyze": ["x"], "hosts": ["x"], "report": ["x"], "steps": ["x"], "recorder": ["read"]}
PASSES = f"{sys.executable} -c \"import sys; sys.exit(0)\" {{hosts}}"
FAILS_WITH_N05 = f"{sys.executable} -c \"import sys; sys.exit(1 if 'n05' in sys.argv[1].split(',') else 0)\" {{hosts}}"


def cli(*args: str, cwd: Path | None = None, timeout: float = 240) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    return subprocess.run([sys.executable, "-m", "forensics", *args], capture_output=True, text=True, env=env,
                          cwd=cwd, timeout=timeout)


# --- 1: internal error -------------------------------------------------------------------------

@pytest.mark.parametrize("command", COMMANDS)
def test_an_internal_error_exits_1_with_one_line_and_the_traceback(command: str):
    """A bug cannot be had from real input (any such input is a bug to fix), so one is injected: the command's
    run() raises, in a real `forensics` process started the way the entry point starts it. What is checked is
    the CLI's own handling: exit 1 (docs/exit-codes.md), the traceback for the report, and a last line that
    says it is a bug."""
    code = (
        "import sys\n"
        "from forensics.cli.main import _command_modules, main\n"
        f"module = next(m for m in _command_modules() if m.NAME == {command!r})\n"
        "def broken(args):\n"
        "    raise ZeroDivisionError('injected fault')\n"
        "module.run = broken\n"
        f"sys.exit(main([{command!r}, *{MINIMAL_ARGS.get(command, [])!r}]))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, PYTHONPATH=str(REPO)))
    assert done.returncode == 1, (done.returncode, done.stderr[-800:])
    assert "Traceback" in done.stderr and "ZeroDivisionError: injected fault" in done.stderr
    # wording is the behaviour: the one line a bug report starts from (docs/exit-codes.md)
    assert done.stderr.strip().splitlines()[-1] == (
        f"forensics {command}: internal error (a bug; please report it with the traceback above): "
        "ZeroDivisionError: injected fault")


# --- 2: bad input that used to be a traceback or a 0 --------------------------------------------

def test_a_damaged_gz_log_is_bad_input_not_a_traceback(tmp_path: Path):
    """Reproducer: a .gz cut after its header made tarfile.is_tarfile raise EOFError (exit 1, a traceback)."""
    whole = gzip.compress((FIXTURES / "host" / "kernel" / "public-gpu-faults.log").read_bytes())
    cut = tmp_path / "console.log.gz"
    cut.write_bytes(whole[:12])
    for command in (["analyze"], ["hosts"], ["report", "-o", str(tmp_path / "r.html")]):
        done = cli(*command, str(cut))
        assert done.returncode == 2, (command, done.stderr[-600:])
        assert "Traceback" not in done.stderr and "damaged gzip file" in done.stderr
    folder = tmp_path / "logs"  # in a folder, the damaged file is skipped and said, the rest read
    folder.mkdir()
    cut.rename(folder / "console.log.gz")
    (folder / "kernel.log").write_bytes(gzip.decompress(whole))
    done = cli("-v", "analyze", str(folder))
    assert done.returncode == 3, done.stderr[-600:]
    assert "skipped console.log.gz:" in done.stderr and "damaged gzip file" in done.stderr


def test_recorder_read_that_decodes_nothing_exits_2(tmp_path: Path):
    """Reproducer: a folder with no state file in it printed nothing and exited 0 ('done')."""
    (tmp_path / "notes.txt").write_text("no state files here\n")
    done = cli("recorder", "read", str(tmp_path))
    # wording is the behaviour: the CLI's error for a folder with no state file
    assert done.returncode == 2 and "no recorder state file" in done.stderr, done.stderr
    done = cli("recorder", "build", "--force", "--cc", str(tmp_path / "no-such-cc"))
    assert done.returncode == 2 and "no C compiler" in done.stderr, done.stderr


# --- 3: bisect 0, 2, 3, 5 ------------------------------------------------------------------------

@pytest.mark.parametrize("test,extra,code", [
    (PASSES, [], 0),  # every host decided, none bad
    (FAILS_WITH_N05, ["--stop-after-round", "1"], 3),  # stopped with hosts undecided
    (FAILS_WITH_N05, [], 5),  # bad hosts found, every host decided
    (PASSES, ["--min-group", "8"], 2),  # impossible group sizes for 9 hosts and no padding
])
def test_bisect_exit_codes(tmp_path: Path, test: str, extra: list[str], code: int):
    done = cli("bisect", "--hosts", "n[01-09]", "--test", test, "--flake-rate", "0.001", "--timeout", "30",
               "--state", str(tmp_path / "state.json"), "--json", "--quiet", *extra)
    assert done.returncode == code, done.stderr[-800:]
    if code == 2:
        assert done.stderr.strip().splitlines()[-1].startswith("forensics bisect: error: ")
        return
    report = json.loads(done.stdout)
    assert report["exclude_list"] == ("n05" if code == 5 else "")
    assert bool(report["undecided"]) == (code == 3)


# --- 4: collect 0, 2, 3 on a real hung gloo job ------------------------------------------------------

def test_collect_exit_codes_on_a_hung_gloo_job(hung_job, tmp_path: Path):
    """0: every collector gave its evidence; 3: the bundle was written, but gdb (asked for, with a time limit
    no real gdb meets) gave nothing in time; 2: a pid that is no process."""
    job = hung_job("sleep", ranks=2, culprit=1)
    pids = ",".join(str(p) for p in job.pids)
    whole = cli("collect", "--pid", pids, "-o", str(tmp_path / "whole"), "--json")
    summary = json.loads(whole.stdout)
    assert whole.returncode == 0, (summary["failures"], summary["problems"])
    assert summary["complete"] and summary["exit_code"] == 0 and summary["ranks"] == 2
    late = cli("collect", "--pid", pids, "-o", str(tmp_path / "late"), "--gdb", "--gdb-timeout", "0.01", "--json")
    summary = json.loads(late.stdout)
    assert late.returncode == 3, late.stderr[-600:]
    assert not summary["complete"] and {f["collector"] for f in summary["failures"]} == {"gdb"}
    assert (tmp_path / "late" / "manifest.json").is_file()  # written, with what came
    gone = cli("collect", "--pid", "999999999", "-o", str(tmp_path / "gone"))
    assert gone.returncode == 2 and "no such process" in gone.stderr


# --- 5: demo 2 ------------------------------------------------------------------------------------

def test_demo_refuses_a_culprit_outside_the_job():
    done = cli("demo", "--ranks", "4", "--culprit", "9")
    assert done.returncode == 2
    # wording is the behaviour: the CLI's refusal, whole
    assert done.stderr.strip() == "forensics demo: error: --culprit 9 is not a rank of a 4-rank job"


# --- 4: demo 4 ------------------------------------------------------------------------------------

def test_demo_whose_verdict_names_no_culprit_exits_4(tmp_path: Path):
    """A real 2-rank gloo hang collected with no second look: one snapshot cannot tell a hang from
    progress, so the verdict names no culprit (rank 0 is a lead) and the demo says WRONG and exits 4."""
    done = cli("demo", "--ranks", "2", "--second-look", "0", "-q", "-o", str(tmp_path / "b"))
    assert done.returncode == 4, done.stdout + done.stderr
    assert "verdict WRONG" in done.stdout and "VERDICT: no culprit named" in done.stdout
    assert "lead:" in done.stdout and "rank 0" in done.stdout

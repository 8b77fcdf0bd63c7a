"""Issue 31 item 3 and issue 27 item 7: a bisect state file holds results, never commands or options;
bisect says where it writes; every option has help.

Real runs of `forensics bisect` with a fast shell test (fails whenever n05 is in the group), in a
private tmp folder, through the CLI entry point.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from forensics.cli.main import main
from hf_testpaths import REPO
from facts import says

TEST = "sh -c 'case \",$0,\" in *,n05,*) exit 1;; esac; exit 0' {hosts}"


def _run(tmp: Path, hosts: str, *extra: str, test: str = TEST) -> list[str]:
    return ["bisect", "--hosts", hosts, "--test", test, "--flake-rate", "0.001", "--timeout", "20",
            "--state", str(tmp / "s.json"), "--json", "--quiet", *extra]


def test_state_file_holds_results_not_commands(tmp_path, capsys):
    assert main(_run(tmp_path, "n[01-16]")) == 5
    capsys.readouterr()
    text = (tmp_path / "s.json").read_text()
    state = json.loads(text)
    assert "config" not in state and "argv" not in text
    assert "sh -c" not in text and "n05,*" not in text  # the test command is nowhere in it
    assert state["digest"].startswith("sha256:") and state["made_for"] == {"hosts": 16}
    assert set(state["results"]) == {"unary_llr", "excluded", "first_round", "notes"}


def test_a_test_command_edited_into_the_state_is_never_run(tmp_path, capsys):
    """Reproducer: editing "test" in the state file ran it (a touch marker appeared)."""
    marker = tmp_path / "MARKER"
    assert main(_run(tmp_path, "n[01-16]", "--stop-after-round", "1")) == 3
    state = json.loads((tmp_path / "s.json").read_text())
    evil = f"touch {marker} {{hosts}}"
    state["config"] = {"test": evil, "launcher": "local", "timeout": 20}
    state["test"] = evil
    (tmp_path / "s.json").write_text(json.dumps(state))
    capsys.readouterr()
    assert main(_run(tmp_path, "n[01-16]")) == 5  # resumed with the command line's test
    assert json.loads(capsys.readouterr().out)["exclude_list"] == "n05"
    assert not marker.exists()
    old = {"format": "hang-forensics-bisect-state", "version": 1, "rounds": [],
           "config": {"test": evil, "launcher": "local", "timeout": 20, "units": [], "settings": {}}}
    (tmp_path / "s.json").write_text(json.dumps(old))  # a version-1 file, as they were: commands inside
    assert main(_run(tmp_path, "n[01-16]")) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "version 1" in err[0]
    assert not marker.exists()


def test_a_state_made_for_other_hosts_or_options_is_refused(tmp_path, capsys):
    """Reproducer (issue 27): `--state` from a 16-host run silently repeated the old answer for 32 hosts."""
    assert main(_run(tmp_path, "n[01-16]")) == 5
    capsys.readouterr()
    assert main(_run(tmp_path, "n[01-32]")) == 2
    err = capsys.readouterr().err.strip().splitlines()
    # wording is the behaviour: the CLI's refusal, what the user reads and acts on
    assert err == [f"forensics bisect: error: state file {tmp_path / 's.json'} was made for other hosts or options "
                   "(made for 16 hosts, given 32): give the same --hosts, --test and options as when it was made, "
                   "or a new --state"]
    assert main(_run(tmp_path, "n[01-16]", "--confidence", "0.9")) == 2
    # wording is the behaviour: the CLI's refusal, what the user reads and acts on
    assert "other hosts or options" in capsys.readouterr().err
    assert main(_run(tmp_path, "n[01-16]", test=TEST.replace("exit 1", "exit 3"))) == 2
    # wording is the behaviour: the CLI's refusal, what the user reads and acts on
    assert "other hosts or options" in capsys.readouterr().err
    assert main(_run(tmp_path, "n[01-16]")) == 5  # the same command line resumes (already decided)
    assert json.loads(capsys.readouterr().out)["exclude_list"] == "n05"


def test_state_file_planted_as_a_link_or_shared_folder_is_refused(tmp_path, capsys):
    victim = tmp_path / "victim"
    victim.write_text("keep\n")
    (tmp_path / "s.json").symlink_to(victim)
    assert main(_run(tmp_path, "n[01-04]")) == 2
    assert "symbolic link" in capsys.readouterr().err
    assert victim.read_text() == "keep\n"
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)
    assert main(_run(shared, "n[01-04]")) == 2
    # wording is the behaviour: the CLI's refusal, what the user reads and acts on
    assert "other users may write" in capsys.readouterr().err
    assert list(shared.iterdir()) == []


def test_default_state_goes_to_a_new_folder_named_on_stderr(tmp_path):
    """Issue 27: without --state, bisect wrote bisect-state-PID.json and .logs/ into cwd without a word."""
    argv = [sys.executable, "-m", "forensics", "bisect", "--hosts", "n[01-08]", "--test", TEST,
            "--flake-rate", "0.001", "--timeout", "20", "--quiet"]
    done = subprocess.run(argv, capture_output=True, text=True, cwd=tmp_path, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.returncode == 5, done.stderr
    (folder,) = list(tmp_path.iterdir())
    assert folder.name.startswith("forensics-bisect-") and folder.is_dir()
    assert sorted(p.name for p in folder.iterdir()) == ["logs", "state.json"]
    assert oct(folder.stat().st_mode & 0o777) == "0o700"
    # where to look
    assert says(done.stderr.splitlines(), "[bisect]", f"{folder.name}/state.json", f"{folder.name}/logs/")
    logs = sorted((folder / "logs").iterdir())
    assert logs and all(p.read_text().startswith("# forensics bisect job ") for p in logs)


def test_every_bisect_option_has_help_and_the_default_launcher_is_stated():
    from forensics.cli.main import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction").choices["bisect"]
    missing = [a.option_strings for a in sub._actions if a.option_strings and not a.help]
    assert missing == []
    text = sub.format_help()
    launcher = " ".join(text.rsplit("--launcher {local,ssh,slurm}", 1)[1].split("--timeout", 1)[0].split())
    assert "local (default" in launcher
    state = " ".join(text.rsplit("--state FILE", 1)[1].split("--stop-after-round", 1)[0].split())
    assert "./forensics-bisect-TIME-PID/" in state.replace("- ", "-") and "results only" in state


@pytest.mark.parametrize("name", ["s.json"])
def test_logs_of_a_rerun_job_never_overwrite(tmp_path, name):
    from forensics.bisect.runner import new_log

    folder = tmp_path / (name + ".logs")
    folder.mkdir()
    victim = tmp_path / "victim"
    victim.write_text("keep\n")
    (folder / "r1g1.log").symlink_to(victim)
    path, fh = new_log(folder, "r1g1")
    fh.close()
    assert path.name == "r1g1.2.log" and victim.read_text() == "keep\n"

"""The first screen (issue 41 item 6) and clear errors (item 8): --help in workflow order with one example,
`forensics help VERB`, no help text that names an issue, an option that does nothing refused with its reason,
an unreadable input said as 'permission denied' (run as user nobody: root reads everything)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from forensics.cli.main import WORKFLOW, _command_modules, build_parser, help_argv, main


def _forensics(*argv: str, user: int | None = None) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "forensics", *argv]
    if user is not None:
        cmd = ["setpriv", f"--reuid={user}", f"--regid={user}", "--clear-groups", *cmd]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd="/")


def test_help_lists_verbs_in_workflow_order_with_one_example() -> None:
    text = build_parser().format_help()
    listed = [m.group(1) for m in re.finditer(r"^    (\w[\w-]*)", text, re.M)]
    assert listed[:4] == ["collect", "analyze", "hosts", "report"]
    assert [v for v in listed if v in WORKFLOW] == [v for v in WORKFLOW if v in listed]
    example = text[text.index("during a hang"):]
    assert [ln.split()[1] for ln in example.splitlines()[1:5]] == ["collect", "analyze", "hosts", "report"]


@pytest.mark.parametrize("verb", ["analyze", "collect", "bisect"])
def test_help_verb_is_the_verbs_help(verb: str, capsys: pytest.CaptureFixture) -> None:
    assert help_argv(["help", verb]) == [verb, "--help"]
    with pytest.raises(SystemExit) as done:
        main(["help", verb])
    assert done.value.code == 0
    assert capsys.readouterr().out.startswith(f"usage: forensics {verb} ")


def test_help_alone_is_the_top_help(capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(SystemExit):
        main(["help"])
    assert "during a hang" in capsys.readouterr().out


def test_no_help_text_names_an_issue() -> None:
    parser = build_parser()
    texts = [parser.format_help()]
    sub = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    texts += [p.format_help() for p in dict.fromkeys(sub.choices.values())]
    assert len(texts) == len(_command_modules()) + 1
    for text in texts:
        assert not re.search(r"\bissue[ s]*#?\d", text, re.I), text[:200]


@pytest.mark.parametrize("argv,words", [
    (["collect", "--ssh-path", "/nonexistent"], "--ssh-path: only for a whole-job collection"),
    (["collect", "--reduce"], "--reduce: only for a whole-job collection"),
    (["collect", "--slurm-job", "4242", "--ssh-path", "/usr/bin/ssh"], "--slurm-job reaches its hosts with srun"),
])
def test_option_that_does_nothing_is_refused(tmp_path: Path, argv: list[str], words: str) -> None:
    out = _forensics(*argv, "-o", str(tmp_path / "b"))
    assert out.returncode == 2 and words in out.stderr
    assert not (tmp_path / "b").exists()  # refused before anything was made


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("setpriv") is None, reason="needs root to run as nobody")
@pytest.mark.parametrize("target", ["file", "folder"])
def test_unreadable_input_says_permission_denied(target: str) -> None:
    top = Path(tempfile.mkdtemp(prefix="h41-perm-", dir="/tmp"))  # (pytest's tmp_path is 0700: nobody cannot enter)
    folder = top / "logs"
    folder.mkdir()
    log = folder / "rank0.log"
    log.write_text("[rank0]:[E1129 09:26:54.447934717 ProcessGroupNCCL.cpp:689] [Rank 0] Watchdog caught collective\n")
    log.chmod(0o600)
    for p in (top, folder):
        p.chmod(0o755)
    try:
        out = _forensics("analyze", str(log if target == "file" else folder), user=65534)
    finally:
        shutil.rmtree(top)
    assert out.returncode == 2 and "permission denied" in out.stderr and "rank0.log" in out.stderr

"""The CLI imports only the command it runs (issue 39 item 8: time to verdict), and every command for --help."""

from __future__ import annotations

import subprocess
import sys

from forensics.cli.main import _named_command, build_parser


def test_a_command_named_by_its_module_is_imported_alone():
    (module,) = _named_command(["-v", "analyze", "bundle/"])
    assert module.NAME == "analyze"
    assert _named_command(["nccl-plugin", "path"]) is None  # an alias: the full parser knows it
    assert _named_command(["--help"]) is None and _named_command([]) is None
    assert _named_command(["../etc", "x"]) is None and _named_command(["_private"]) is None
    only = build_parser([module])
    assert only.parse_args(["analyze", "b"]).command == "analyze"


def test_analyze_imports_no_other_command():
    """`forensics analyze` needs no other command (collect, the fleet, bisect, the report): none is imported."""
    code = ("import sys; from forensics.cli.main import main; main(['analyze', '--help'])")
    done = subprocess.run([sys.executable, "-c", code + "\n"], capture_output=True, text=True, timeout=120)
    assert "usage: forensics analyze" in done.stdout
    probe = ("import sys\nfrom forensics.cli.main import build_parser, _named_command\n"
             "build_parser(_named_command(['analyze', 'x']))\n"
             "print(sorted(m for m in sys.modules if m.startswith('forensics.cli.commands.')))")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert done.stdout.strip() == "['forensics.cli.commands.analyze']", done.stdout + done.stderr

"""Allow `python -m forensics`.

Ctrl-C at any moment ends the command with exit 130 and one line, never a traceback:
during the imports and argument parsing (before a command installs its own handler),
while a command runs (cli.main turns KeyboardInterrupt into that line), and while the
interpreter shuts down (SIGINT is then left to its default action, which ends the
process quietly, instead of raising in threading's or an executor's exit hooks).
"""

import signal
import sys

try:
    from forensics.cli.main import main

    code = main()
except KeyboardInterrupt:
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    try:
        print("forensics: interrupted", file=sys.stderr)
    except (OSError, ValueError):
        pass
    code = 130
signal.signal(signal.SIGINT, signal.SIG_DFL)
raise SystemExit(code)

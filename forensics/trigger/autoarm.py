"""`python -m forensics.trigger.autoarm SCRIPT [ARGS]` (or `-m MODULE [ARGS]`): arm, then run the program.

With FORENSICS_ARM=1 the process is armed before the program starts (so the recommended
NCCL / Flight Recorder env is in place before init_process_group); without it the
program runs unchanged. Works as torchrun's entry: `torchrun ... -m forensics.trigger.autoarm train.py`.
"""

from __future__ import annotations

import os
import runpy
import sys

from forensics.trigger.from_env import arm_from_env


def main(argv: list[str]) -> None:
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__.strip())
        raise SystemExit(0 if argv else 2)
    arm_from_env()  # after --help was answered; arms only when FORENSICS_ARM=1

    if argv[0] == "-m":
        if len(argv) < 2:
            raise SystemExit("autoarm: -m needs a module name")
        sys.argv = argv[1:]
        runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
    else:
        sys.argv = list(argv)
        sys.path[0] = os.path.dirname(os.path.abspath(argv[0]))  # as `python SCRIPT` would
        runpy.run_path(argv[0], run_name="__main__")


if __name__ == "__main__":
    main(sys.argv[1:])

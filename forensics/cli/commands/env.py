"""`forensics env`: the environment that makes a hang diagnosable later, ready to paste into a job script."""

from __future__ import annotations

import argparse
import os
import shlex

from forensics.report.output import add_output_options, emit, emit_json
from forensics.exitcodes import ExitCode
from forensics import recorder_build
from forensics.trigger.envsetup import EnvVar, is_set, recommended_env

NAME = "env"
HELP = "print the recommended env (NCCL debug file, Flight Recorder, proxy dump signal, RAS)"
DESCRIPTION = """Print the environment variables that make a later post-mortem possible, each with
the reason. Set them in the job script before the launcher starts (NCCL reads them
at init, PyTorch when the process group is created). forensics.arm() sets the ones
not already set. Variables already set in this shell are shown as comments.

what it costs a training step (benchmarks/env_cost.py: one job per setting, settings
interleaved, median step as a ratio to a baseline with nothing set, same run):
  - H200, NCCL 2.28.9 (session 3, benchmarks/recorder_overhead.py): the recorder
    -0.67% to +0.38% of all_reduce latency from 8 B to 16 MB (2 ranks, NET/Socket)
  - 2-core CPU VM, gloo, 2 ranks (helper h39env, 2026-12-06, load ~10): no setting
    measurable: ratios 0.64-0.83 with +-50% between rounds (gloo ignores the NCCL_*
    and TORCH_NCCL_* variables; the recorder is an NCCL plugin)
  - H100, NCCL 2.28.9, torch 2.11 (2026-12-07; benchmarks/results/env_cost-h100-2026-12-07/):
    a one-rank communicator (its fixed cost per collective; step = small matmul + 2
    all_reduce + sync, 80 us), 3 rounds, two runs:
      NCCL_DEBUG=INFO (INIT,NET,RAS)  none measurable (ratio 0.999-1.000)
      Flight Recorder, no timing      none measurable (0.991-1.011)
      TORCH_NCCL_ENABLE_TIMING        ~3 us per collective (+6 us a step: 1.072-1.079)
      the recorder                    not measurable (0.993-1.012: inside the rounds'
                                      spread of about +-3 us a step)
      all of `forensics env --recorder`  ~3.5-4 us per collective (1.081-1.102)
      (NCCL_DEBUG_SUBSYS=COLL, left out: ~3.5-4 us per collective, 1.076-1.103)
    Per collective, so a step of 100 collectives of 1 ms each pays about 0.4 ms (0.4%).
    4 ranks as 4 hosts on that one GPU measured the GPU's time slices (27-82 ms steps
    for one job), not the settings. Run it again: `bash scripts/device/run_matrix.sh E39`
    (HF_E39_RANKS=1 for the one-rank layout).
  TORCH_NCCL_ENABLE_TIMING adds a CUDA start event per collective; torch warns that the
  watchdog's event queries may then hang with it.

examples:
  forensics env --dir /shared/run42/forensics >> job.env
  eval "$(forensics env --dir /scratch/logs)"
  forensics env --recorder --dir /shared/run42/forensics   # also load the recorder
  forensics env --json
"""

EXIT_CODES = {0: "printed", 1: "internal error (a bug)", 2: "bad arguments"}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--dir", default="$PWD/forensics-logs",
                        help="folder for per-rank NCCL logs and Flight Recorder dumps (default $PWD/forensics-logs)")
    add_output_options(parser, json_help="print the variables as JSON (schema hang-forensics/env/1) "
                                         "instead of shell lines")
    parser.add_argument("--all", action="store_true", help="also print variables already set here, as exports")
    parser.add_argument("--recorder", action="store_true",
                        help="also load the recorder (NCCL profiler plugin; built here with gcc if needed)")


def recorder_var() -> EnvVar:
    """NCCL_PROFILER_PLUGIN naming the recorder: its state files say which op each rank waits in."""
    return EnvVar("NCCL_PROFILER_PLUGIN", str(recorder_build.plugin_path()),
                  "the recorder: every rank's in-flight NCCL ops in /dev/shm, copied to FORENSICS_RECORDER_COPY_DIR "
                  "when the job dies")


def _value(value: str, dynamic_dir: bool) -> str:
    """Shell-quote a value, but let a leading $PWD expand when the default folder is used."""
    if dynamic_dir and value.startswith("$PWD/"):
        return '"$PWD"/' + shlex.quote(value[len("$PWD/"):])
    return shlex.quote(value)


def run(args: argparse.Namespace) -> int:
    variables = recommended_env(args.dir) + ([recorder_var()] if args.recorder else [])
    if args.json:
        rows = [{"name": v.name, "value": v.value, "why": v.why,
                 "already_set": is_set(v, os.environ)} for v in variables]
        emit_json("env", {"dir": args.dir, "variables": rows}, args)
        return int(ExitCode.OK)
    dynamic = args.dir.startswith("$PWD")
    lines = [f"# hang-forensics: recommended environment (per-rank files under {args.dir})"]
    lines.append(f"mkdir -p {_value(args.dir, True)}" if dynamic else f"mkdir -p {shlex.quote(args.dir)}")
    for var in variables:
        line = f"export {var.name}={_value(var.value, dynamic)}"
        if is_set(var, os.environ) and not args.all:
            lines.append(f"# already set: {var.name}={os.environ.get(var.name, '(older name)')}  -- {var.why}")
            continue
        lines.append(f"{line}  # {var.why}")
    emit("\n".join(lines), args.output)
    return int(ExitCode.OK)

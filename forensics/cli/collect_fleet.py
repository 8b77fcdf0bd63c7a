"""The fleet half of `forensics collect` (forensics/cli/commands/collect.py): its options, and the branch that
runs instead of a local collection. Part of the CLI, over forensics/fleet/ (which holds no CLI)."""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

from loguru import logger

from forensics.bundle.attach import attach_files
from forensics.report.output import emit, emit_json

from forensics.errors import ForensicsError
from forensics.exitcodes import ExitCode
from forensics.fleet import command as cmd
from forensics.fleet import hosts as hostsets
from forensics.fleet.options import check_srun_args, check_ssh_options
from forensics.fleet.collect import collect_fleet, new_tag, ssh_runner
from forensics.fleet.slurm import slurm_hosts, srun_runner
from forensics.bundle.archive import make_archive
from forensics.fleet import outcome
from parsers.ranges import fold

FLEET_EPILOG = """fleet (whole job, many hosts):
  forensics collect --hosts 'node[001-512]' -o job.bundle
  forensics collect --hostfile hosts.txt --ssh-option Port=2222 --fanout 128
  forensics collect --slurm-job 4242          # srun --overlap inside the job's allocation
  forensics collect --slurm-job 4242 --srun-arg=--container-image=IMG   # inside a pyxis container
Each host runs `python3 -m forensics.fleet.remote` (forensics must be installed there:
docs/deploy.md) and streams its bundle back. --timeout, --native, --gdb, --gdb-timeout
and --job are passed on to every host. A host still collecting near --host-timeout sends
what it has (kept, marked partial); hosts that do not answer are recorded as such. The
summary folds hosts with the same result onto one line ('node[001-511]: ok').
ssh runs with BatchMode=yes and ConnectTimeout; see docs/commands/collect-fleet.md.
"""


def add_fleet_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("fleet (collect a whole job across hosts)")
    group.add_argument("--hosts", action="append", default=[], metavar="NODESET", help="hosts in NodeSet syntax, e.g. 'node[001-512]' (repeatable)")
    group.add_argument("--hostfile", type=Path, help="file with one host (or NodeSet) per line; 'slots=' suffixes ignored")
    group.add_argument("--slurm-job", metavar="JOBID", help="collect every node of this Slurm job (srun --overlap --jobid)")
    group.add_argument("--fanout", type=int, default=64, help="ssh connections at once (default 64; on each gateway in tree mode)")
    group.add_argument("--topology", type=Path, metavar="FILE",
                       help="ClusterShell topology.conf: reach the hosts through its gateways (tree mode; "
                            "ClusterShell must be installed on the gateways)")
    group.add_argument("--host-timeout", type=float, default=20.0, metavar="S", help="time limit per host (default 20)")
    group.add_argument("--ssh-option", action="append", default=[], metavar="KEY=VALUE", help="extra ssh -o option, e.g. Port=2222 (repeatable)")
    group.add_argument("--remote-python", default="python3", metavar="PATH", help="python on the hosts that has forensics installed (default python3)")
    group.add_argument("--srun-arg", action="append", default=[], metavar="ARG",
                       help="with --slurm-job: extra srun argument, e.g. --srun-arg=--container-image=IMG (repeatable)")
    group.add_argument("--match-env", action="append", default=[], metavar="KEY=VALUE", help="on each host collect only ranks with this env value; '{host}' is replaced by the host name")


def wants_fleet(args: argparse.Namespace) -> bool:
    return bool(getattr(args, "hosts", None) or getattr(args, "hostfile", None) or getattr(args, "slurm_job", None))


def host_list(args: argparse.Namespace) -> list[str]:
    """--hosts values and --hostfile lines, under one host cap for them all."""
    return hostsets.unique(hostsets.gather(list(args.hosts), args.hostfile or None))


def run_fleet(args: argparse.Namespace, default_out: Path) -> int:
    """Collect the whole job; print a summary (JSON with --json); exit PARTIAL unless every host answered."""

    if args.pid:
        raise ForensicsError("--pid names local processes; it cannot be combined with --hosts/--hostfile/--slurm-job")
    if args.fanout < 1 or args.host_timeout <= 0:
        raise ForensicsError("--fanout must be >= 1 and --host-timeout > 0")
    spec = remote_spec(args, new_tag())
    if getattr(args, "topology", None) is not None and args.slurm_job:
        raise ForensicsError("--topology routes ssh through gateways; it does not apply to --slurm-job")
    if args.srun_arg and not args.slurm_job:
        raise ForensicsError("--srun-arg goes with --slurm-job (ssh hosts take --ssh-option)")
    check_srun_args(args.srun_arg)  # every value, before anything is looked up or started
    check_ssh_options(args.ssh_option)
    if args.slurm_job:
        if args.hosts or args.hostfile:
            raise ForensicsError("--slurm-job finds its own hosts; do not combine it with --hosts/--hostfile")
        hosts = slurm_hosts(args.slurm_job)
        spec.match_env.append(f"SLURM_JOB_ID={args.slurm_job}")
        runner = srun_runner(args.slurm_job, args.srun_arg)
    else:
        hosts = host_list(args)
        if not hosts:
            raise ForensicsError("no hosts given")
        if shutil.which("ssh") is None:
            raise ForensicsError("ssh not found on this machine (install openssh-client)")
        if args.topology is not None and not args.topology.is_file():
            raise ForensicsError(f"--topology {args.topology}: no such file")
        runner = ssh_runner(cmd.ssh_options(args.ssh_option, min(10.0, args.host_timeout)), args.fanout,
                            topology=args.topology)
    out = args.out or default_out
    logger.info("fleet: {} host(s), fan-out {}, {} s per host", len(hosts), args.fanout, args.host_timeout)
    result = collect_fleet(hosts, out, spec, runner, args.host_timeout, quiet=args.quiet)
    attached = attach_files(out, args.attach) if getattr(args, "attach", None) and result.answered else []
    archive = None
    if args.tar:

        archive = make_archive(out)
    summary = dict(result.summary(), archive=str(archive) if archive else None)
    if attached:
        summary["attach_problems"] = attached
    code = fleet_exit_code(result)
    summary["exit_code"] = int(code)
    if args.json:
        emit_json("collect", dict(summary, mode="fleet"), args)
    else:
        emit("\n".join(summary_lines(summary, out)), getattr(args, "output", None))
    return int(code)


def remote_spec(args: argparse.Namespace, tag: str) -> cmd.RemoteSpec:
    """What every host's collector is asked to do: every per-rank option of `collect`, forwarded."""
    if args.gdb and args.gdb_timeout is not None and args.gdb_timeout >= args.host_timeout:
        print(f"forensics collect: warning: --gdb-timeout {args.gdb_timeout:g} is not below --host-timeout "
              f"{args.host_timeout:g}: hosts will run out of time (raise --host-timeout)", file=sys.stderr)
    return cmd.RemoteSpec(python=args.remote_python, tag=tag, timeout=args.timeout, native=args.native, gdb=args.gdb,
                          gdb_timeout=args.gdb_timeout, job=args.job, samples=getattr(args, "samples", 0), sample_interval=getattr(args, "sample_interval", 0.1),
                          second_look=getattr(args, "second_look", 3.0),
                          match_env=[cmd.check_match_env(m) for m in args.match_env])


def fleet_exit_code(result) -> ExitCode:
    """0 every host answered in full; 3 some evidence missing or late; 6 no host sent any evidence."""

    if not result.answered and not any(p.status == outcome.EMPTY for p in result.parts):
        return ExitCode.NO_HOST
    return ExitCode.OK if result.complete else ExitCode.PARTIAL


def summary_lines(summary: dict, out: Path) -> list[str]:
    """Folded host lines (one per distinct result), then ranks, then what to do next."""
    lines = [f"bundle: {out}" + (f"  (archive {summary['archive']})" if summary.get("archive") else "")]
    for group in summary["host_groups"]:
        lines.append(f"{group['hosts']} ({group['count']}): {group['result']}")
    answered = summary["hosts_answered"]
    if not answered:
        lines.append(f"no host answered ({len(summary['hosts'])} asked): nothing was collected; ranks unknown")
        return lines
    missing = summary["missing_ranks"]
    heard = f"from {answered} of {len(summary['hosts'])} host(s)"
    if missing:
        lines.append(f"ranks collected: {summary['ranks']} {heard}; ranks missing: {fold_ranks(missing)}")
    elif answered < len(summary["hosts"]):
        lines.append(f"ranks collected: {summary['ranks']} {heard}; ranks on the silent hosts: unknown")
    else:
        lines.append(f"ranks collected: {summary['ranks']} {heard}; ranks missing: none")
    lines.append(f"next: forensics analyze {out}")
    return lines


def fold_ranks(ranks: list[int]) -> str:

    return fold(ranks)

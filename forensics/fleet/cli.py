"""The fleet half of `forensics collect`: its options, and the branch that runs instead of a local collection."""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

from forensics.errors import ForensicsError
from forensics.exitcodes import ExitCode
from forensics.fleet import command as cmd
from forensics.fleet import hosts as hostsets

FLEET_EPILOG = """fleet (whole job, many hosts):
  forensics collect --hosts 'node[001-512]' -o job.bundle
  forensics collect --hostfile hosts.txt --ssh-option Port=2222 --fanout 128
  forensics collect --slurm-job 4242          # srun --overlap inside the job's allocation
Each host runs `python3 -m forensics.fleet.remote` (forensics must be installed there) and
streams its bundle back; hosts that do not answer within --host-timeout are recorded
as such in the merged bundle. ssh runs with BatchMode=yes and ConnectTimeout; see
docs/commands/collect-fleet.md.
"""


def add_fleet_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("fleet (collect a whole job across hosts)")
    group.add_argument("--hosts", action="append", default=[], metavar="NODESET", help="hosts in NodeSet syntax, e.g. 'node[001-512]' (repeatable)")
    group.add_argument("--hostfile", type=Path, help="file with one host (or NodeSet) per line; 'slots=' suffixes ignored")
    group.add_argument("--slurm-job", metavar="JOBID", help="collect every node of this Slurm job (srun --overlap --jobid)")
    group.add_argument("--fanout", type=int, default=64, help="ssh connections at once (default 64)")
    group.add_argument("--host-timeout", type=float, default=20.0, metavar="S", help="time limit per host (default 20)")
    group.add_argument("--ssh-option", action="append", default=[], metavar="KEY=VALUE", help="extra ssh -o option, e.g. Port=2222 (repeatable)")
    group.add_argument("--remote-python", default="python3", metavar="PATH", help="python on the hosts that has forensics installed (default python3)")
    group.add_argument("--match-env", action="append", default=[], metavar="KEY=VALUE", help="on each host collect only ranks with this env value; '{host}' is replaced by the host name")


def wants_fleet(args: argparse.Namespace) -> bool:
    return bool(getattr(args, "hosts", None) or getattr(args, "hostfile", None) or getattr(args, "slurm_job", None))


def host_list(args: argparse.Namespace) -> list[str]:
    found: list[str] = []
    for text in args.hosts:
        found += hostsets.expand_nodeset(text)
    if args.hostfile:
        found += hostsets.read_hostfile(args.hostfile)
    return hostsets.unique(found)


def run_fleet(args: argparse.Namespace, default_out: Path) -> int:
    """Collect the whole job; print a summary (JSON with --json); exit PARTIAL unless every host answered."""
    from forensics.fleet.collect import collect_fleet, new_tag, ssh_runner
    from forensics.fleet.slurm import slurm_hosts, srun_runner

    if args.pid:
        raise ForensicsError("--pid names local processes; it cannot be combined with --hosts/--hostfile/--slurm-job")
    if args.fanout < 1 or args.host_timeout <= 0:
        raise ForensicsError("--fanout must be >= 1 and --host-timeout > 0")
    spec = cmd.RemoteSpec(python=args.remote_python, tag=new_tag(), timeout=args.timeout, native=args.native, gdb=args.gdb,
                          match_env=[cmd.check_match_env(m) for m in args.match_env])
    if args.slurm_job:
        if args.hosts or args.hostfile:
            raise ForensicsError("--slurm-job finds its own hosts; do not combine it with --hosts/--hostfile")
        hosts = slurm_hosts(args.slurm_job)
        spec.match_env.append(f"SLURM_JOB_ID={args.slurm_job}")
        runner = srun_runner(args.slurm_job)
    else:
        hosts = host_list(args)
        if not hosts:
            raise ForensicsError("no hosts given")
        if shutil.which("ssh") is None:
            raise ForensicsError("ssh not found on this machine (install openssh-client)")
        runner = ssh_runner(cmd.ssh_options(args.ssh_option, min(10.0, args.host_timeout)), args.fanout)
    out = args.out or default_out
    result = collect_fleet(hosts, out, spec, runner, args.host_timeout, quiet=args.quiet)
    archive = None
    if args.tar:
        from forensics.bundle.archive import make_archive

        archive = make_archive(out)
    summary = dict(result.summary(), archive=str(archive) if archive else None)
    if args.json:
        print(json.dumps(summary, indent=1))
    else:
        print(f"bundle: {out}" + (f"  (archive {archive})" if archive else ""))
        for host, info in summary["hosts"].items():
            print(f"{host}: {info['status']}" + (f"  ({info['error']})" if info["error"] else ""))
        print(f"ranks collected: {summary['ranks']}; ranks missing: {summary['missing_ranks'] or 'none'}")
        print(f"next: forensics analyze {out}")
    return int(ExitCode.OK if result.complete else ExitCode.PARTIAL)

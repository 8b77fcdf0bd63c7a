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
from forensics.fleet.reduce import MAX_FETCH_HOSTS, collect_reduced
from forensics.fleet.tree_verdict import tree_verdict
from forensics.collect.budget import HOST_BYTES, RANK_BYTES, TOTAL_BYTES
from forensics.collect.progress import ProgressReporter
from forensics.report.text import render_view
from forensics.report.view import build_view
from forensics.report.output import text_width
from forensics.fleet.slurm import slurm_hosts, srun_runner
from forensics.bundle.archive import make_archive
from forensics.fleet import outcome
from parsers.model.ranges import fold
from parsers.scale.merge import count, fold as fold_intervals

FLEET_EPILOG = """fleet (whole job, many hosts):
  forensics collect --hosts 'node[001-512]' -o job.bundle
  forensics collect --hostfile hosts.txt --ssh-option Port=2222 --fanout 128
  forensics collect --slurm-job 4242          # srun --overlap inside the job's allocation
  forensics collect --slurm-job 4242 --srun-arg=--container-image=IMG   # inside a pyxis container
  forensics collect --hosts 'node[00001-12500]' --gateways 'gw[01-16]' --reduce   # reduced tree
Each host runs `python3 -m forensics.fleet.remote` (forensics must be installed there:
docs/deploy.md) and streams its bundle back. --timeout, --native, --gdb, --gdb-timeout
and --job are passed on to every host. A host still collecting near --host-timeout sends
what it has (kept, marked partial); hosts that do not answer are recorded as such. The
summary folds hosts with the same result onto one line ('node[001-511]: ok').
--reduce (with --gateways): each gateway collects its share of the hosts, keeps their
bundles and sends up one merged digest; this machine merges them, fetches the raw files
of only the odd ranks' hosts (at most --fetch-max) and prints the verdict, as analyze.
ssh runs with BatchMode=yes and ConnectTimeout; see docs/commands/collect-fleet.md.
"""


def add_fleet_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("fleet (collect a whole job across hosts)")
    group.add_argument("--hosts", action="append", default=[], metavar="NODESET",
                       help="hosts in NodeSet syntax, e.g. 'node[001-512]' (repeatable)")
    group.add_argument("--hostfile", type=Path,
                       help="file with one host (or NodeSet) per line; 'slots=' suffixes ignored")
    group.add_argument("--slurm-job", metavar="JOBID",
                       help="collect every node of this Slurm job (srun --overlap --jobid)")
    group.add_argument("--fanout", type=int, default=64,
                       help="ssh connections at once (default 64; on each gateway in tree mode)")
    group.add_argument("--topology", type=Path, metavar="FILE",
                       help="ClusterShell topology.conf: reach the hosts through its gateways (tree mode; "
                            "ClusterShell must be installed on the gateways)")
    group.add_argument("--host-timeout", type=float, default=20.0, metavar="S", help="time limit per host (default 20)")
    group.add_argument("--ssh-option", action="append", default=[], metavar="KEY=VALUE",
                       help="extra ssh -o option, e.g. Port=2222 (repeatable)")
    group.add_argument("--remote-python", default="python3", metavar="PATH",
                       help="python on the hosts that has forensics installed (default python3)")
    group.add_argument("--srun-arg", action="append", default=[], metavar="ARG",
                       help="with --slurm-job: extra srun argument, e.g. --srun-arg=--container-image=IMG (repeatable)")
    group.add_argument("--match-env", action="append", default=[], metavar="KEY=VALUE",
                       help="on each host collect only ranks with this env value; '{host}' is replaced by the host "
                            "name")
    tree = parser.add_argument_group("reduced tree (gateways send up one merged digest each)")
    tree.add_argument("--reduce", action="store_true",
                      help="collect through --gateways, each merging its hosts' digests into one; then fetch the raw "
                           "files of the odd ranks' hosts from the gateways and print the verdict")
    tree.add_argument("--gateways", action="append", default=[], metavar="NODESET",
                      help="with --reduce: the gateway hosts (forensics installed there, ssh from here and from them "
                           "to their hosts); the hosts are split among them in order, in equal blocks")
    tree.add_argument("--gateway-out", default=None, metavar="DIR",
                      help="with --reduce: where each gateway keeps its hosts' bundle, a new folder ('{gateway}' "
                           "becomes its name; default /tmp/forensics-reduce-TAG)")
    tree.add_argument("--gateway-timeout", type=float, default=None, metavar="S",
                      help="with --reduce: time limit per gateway (default --host-timeout + 60)")
    tree.add_argument("--fetch-max", type=int, default=MAX_FETCH_HOSTS, metavar="N",
                      help="with --reduce: hosts whose raw files are fetched at most (default and most "
                           f"{MAX_FETCH_HOSTS})")
    tree.add_argument("--ssh-path", default=None, metavar="PATH",
                      help="ssh client to run with --hosts/--hostfile (default: ssh on PATH; with --reduce also on "
                           "the gateways); not with --slurm-job, whose hosts srun reaches")


def wants_fleet(args: argparse.Namespace) -> bool:
    return bool(getattr(args, "hosts", None) or getattr(args, "hostfile", None) or getattr(args, "slurm_job", None))


#: options that only a whole-job collection reads: given to a one-host collect they would do nothing
FLEET_ONLY = {"ssh_path": "--ssh-path", "reduce": "--reduce", "gateways": "--gateways", "gateway_out": "--gateway-out",
              "gateway_timeout": "--gateway-timeout", "topology": "--topology", "srun_arg": "--srun-arg",
              "ssh_option": "--ssh-option", "match_env": "--match-env"}


def refuse_unused(args: argparse.Namespace) -> None:
    """Refuse, with the reason, an option that does nothing in the mode asked (never ignore it silently)."""
    if not wants_fleet(args):
        given = [flag for dest, flag in FLEET_ONLY.items() if getattr(args, dest, None)]
        if given:
            raise ForensicsError(f"{', '.join(given)}: only for a whole-job collection (--hosts, --hostfile or "
                                 "--slurm-job); a one-host collect does not use it")
    elif args.slurm_job and args.ssh_path:
        raise ForensicsError("--ssh-path: --slurm-job reaches its hosts with srun, not ssh; it would do nothing here")


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
    if getattr(args, "reduce", False) or getattr(args, "gateways", None):
        return run_reduced(args, spec, default_out)
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
        ssh_path = args.ssh_path or "ssh"
        if shutil.which(ssh_path) is None:
            raise ForensicsError(f"{ssh_path} not found on this machine (install openssh-client)")
        if args.topology is not None and not args.topology.is_file():
            raise ForensicsError(f"--topology {args.topology}: no such file")
        runner = ssh_runner(cmd.ssh_options(args.ssh_option, min(10.0, args.host_timeout)), args.fanout,
                            ssh_path=ssh_path, topology=args.topology)
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


def split_hosts(hosts: list[str], gateways: list[str]) -> dict[str, list[str]]:
    """The hosts in order, in equal contiguous blocks, one a gateway (the first gateways take one more when
    they do not divide evenly); a gateway left without hosts is not used."""
    size, extra = divmod(len(hosts), len(gateways))
    out, at = {}, 0
    for i, gw in enumerate(gateways):
        n = size + (i < extra)
        if n:
            out[gw] = hosts[at:at + n]
        at += n
    return out


def _reduced_plan(args: argparse.Namespace, spec: cmd.RemoteSpec) -> tuple[list[str], list[str], str, float]:
    """Check run_reduced's options: (hosts, gateways, the gateways' output folder, the gateways' timeout)."""
    if not args.reduce or not args.gateways:
        raise ForensicsError("--reduce and --gateways go together (for ClusterShell's own tree use --topology)")
    if args.slurm_job or args.topology is not None:
        raise ForensicsError("--reduce reaches its hosts through --gateways: not with --slurm-job or --topology")
    if getattr(args, "attach", None):
        raise ForensicsError("--attach is not taken with --reduce yet: attach to a flat collection, or analyze the "
                             "file beside the bundle")
    if not 1 <= args.fetch_max <= MAX_FETCH_HOSTS:
        raise ForensicsError(f"--fetch-max must be 1 to {MAX_FETCH_HOSTS}")
    gateway_timeout = args.host_timeout + 60.0 if args.gateway_timeout is None else args.gateway_timeout
    if not gateway_timeout > args.host_timeout:
        raise ForensicsError("--gateway-timeout must be longer than --host-timeout (a gateway waits on its hosts)")
    hosts = host_list(args)
    gateways = hostsets.unique(hostsets.gather(list(args.gateways), None))
    if not hosts or not gateways:
        raise ForensicsError("no hosts given" if not hosts else "no gateways given")
    args.ssh_path = args.ssh_path or "ssh"
    if shutil.which(args.ssh_path) is None:
        raise ForensicsError(f"{args.ssh_path} not found on this machine (install openssh-client)")
    gateway_out = args.gateway_out or f"/tmp/forensics-reduce-{spec.tag}"
    if "\x00" in gateway_out or len(gateway_out) > 1024 or not gateway_out.startswith("/"):
        raise ForensicsError("--gateway-out must be an absolute path (on the gateways)")
    if "{gateway}" not in gateway_out:
        gateway_out = gateway_out.rstrip("/") + "/{gateway}"  # gateways may share a file system: one folder each
    return hosts, gateways, gateway_out, gateway_timeout


def run_reduced(args: argparse.Namespace, spec: cmd.RemoteSpec, default_out: Path) -> int:
    """The reduced tree (forensics.fleet.reduce): gateways collect and reduce, this machine merges, fetches the
    odd ranks' raw files and judges. Prints the summary and the VERDICT block (JSON with --json); the exit code
    says how complete the collection is, as the flat fleet's does (0, 3, 6)."""
    hosts, gateways, gateway_out, gateway_timeout = _reduced_plan(args, spec)
    out = args.out or default_out
    assignment = split_hosts(hosts, gateways)
    progress = ProgressReporter(len(assignment), "gateways", args.quiet)
    options = list(args.ssh_option)  # KEY=VALUE, checked above: the same on this machine and on the gateways
    reduced = collect_reduced(assignment, out, spec, gateway_out, args.host_timeout, gateway_timeout, args.fanout,
                              args.ssh_path, options, args.remote_python, args.ssh_path, say=progress.say)
    answered = reduced["gateways"]
    if not reduced["hosts"]:  # no gateway answered, or none of their hosts did: nothing to judge
        summary = {"bundle": str(out), "gateway_out": gateway_out, "gateways_refused": reduced["refused"],
                   "hosts": 0, "ranks": 0, "exit_code": int(ExitCode.NO_HOST)}
        if args.json:
            emit_json("collect", dict(summary, mode="reduced", verdict=None), args)
        else:
            emit("\n".join([f"no host answered through {len(assignment)} gateway(s): nothing was collected",
                             *(f"  refused: {line}" for line in reduced["refused"])]))
        return int(ExitCode.NO_HOST)
    result, fetched = tree_verdict(reduced, assignment, out, gateway_out, gateway_timeout, args.ssh_path, options,
                                   args.remote_python, args.fetch_max, say=progress.say)
    groups = [g for gw in assignment if gw in answered for g in answered[gw]["host_groups"] if isinstance(g, dict)]
    all_ok = all(str(g.get("result")) == "ok" for g in groups)
    silent = [gw for gw in assignment if gw not in answered]
    if silent or not all_ok or fetched["fetch_problems"] or reduced["refused"]:
        code = ExitCode.PARTIAL
    else:
        code = ExitCode.OK
    view = build_view(result.verdict, source=str(out), evidence=result.evidence, logs=result.logs)
    archive = make_archive(out) if args.tar else None
    gateways_said = {gw: {"hosts": hostsets.fold(h), "answered": gw in answered,
                          "bundle": answered.get(gw, {}).get("bundle")} for gw, h in assignment.items()}
    summary = {"bundle": str(out), "archive": str(archive) if archive else None, "gateway_out": gateway_out,
               "gateways": gateways_said,
               "gateways_refused": reduced["refused"], "host_groups": groups, "hosts": reduced["hosts"],
               "ranks": reduced["ranks"], "odd_ranks": reduced["odd_ranks"], "classes": reduced["classes"],
               "bytes_received": reduced["bytes_received"], "fetched": fetched,
               "phases": dict(reduced["phases"], **{k: round(v + reduced["phases"]["judged"], 3)
                                                   for k, v in fetched["phases"].items()}),
               "exit_code": int(code)}
    if args.json:
        emit_json("collect", dict(summary, mode="reduced", verdict=view.to_json()), args)
        return int(code)
    lines = _reduced_lines(out, archive, gateway_out, assignment, reduced, groups, fetched)
    lines.append("")
    lines.append(render_view(view, width=text_width(None, getattr(args, "output", None))))
    emit("\n".join(lines), getattr(args, "output", None))
    return int(code)


def _reduced_lines(out: Path, archive, gateway_out: str, assignment: dict[str, list[str]], reduced: dict,
                   groups: list[dict], fetched: dict) -> list[str]:
    """The reduced tree's summary in text, above its VERDICT block: gateways, host groups, what was merged and
    fetched, the merged digest's main-thread classes and flags."""
    answered = reduced["gateways"]
    lines = [f"bundle: {out}" + (f"  (archive {archive})" if archive else "")
             + f"  (the odd ranks' hosts; every host's bundle stays on its gateway under {gateway_out})"]
    for gw, h in assignment.items():
        lines.append(f"gateway {gw}: {hostsets.fold(h)}" + ("" if gw in answered else ": no usable answer"))
    for line in reduced["refused"]:
        lines.append(f"  refused: {line}")
    for g in groups:
        lines.append(f"{g.get('hosts')} ({g.get('count')}): {g.get('result')}")
    lines.append(f"ranks merged: {reduced['ranks']} from {reduced['hosts']} host(s); odd ones out: "
                 f"{reduced['odd_ranks'] or 'none'}; raw files fetched from {len(fetched['hosts_fetched'])} host(s)"
                 + (f" ({hostsets.fold(fetched['hosts_fetched'])})" if fetched["hosts_fetched"] else ""))
    for line in fetched["fetch_problems"][:10]:
        lines.append(f"  fetch: {line}")
    classes = sorted(reduced["merged_digest"].stacks.values(), key=lambda c: -count(c.ranks))
    lines.append(f"main-thread classes of all {reduced['ranks']} rank(s) (the merged digest):")
    for c in classes[:12]:
        what = " ".join(str(x) for x in (c.kind, c.op, c.where) if x)
        lines.append(f"  [{fold_intervals(c.ranks)[:200]}] ({count(c.ranks)}) {what[:200]}")
    if len(classes) > 12:
        lines.append(f"  ... and {len(classes) - 12} more class(es)")
    for flag, iv in sorted(reduced["merged_digest"].flags.items()):
        if iv:
            lines.append(f"  flagged {flag} on their host: [{fold_intervals(iv)[:200]}]")
    return lines


def remote_spec(args: argparse.Namespace, tag: str) -> cmd.RemoteSpec:
    """What every host's collector is asked to do: every per-rank option of `collect`, forwarded."""
    if args.gdb and args.gdb_timeout is not None and args.gdb_timeout >= args.host_timeout:
        print(f"forensics collect: warning: --gdb-timeout {args.gdb_timeout:g} is not below --host-timeout "
              f"{args.host_timeout:g}: hosts will run out of time (raise --host-timeout)", file=sys.stderr)
    return cmd.RemoteSpec(python=args.remote_python, tag=tag, timeout=args.timeout, native=args.native, gdb=args.gdb,
                          gdb_timeout=args.gdb_timeout, job=args.job, samples=getattr(args, "samples", 0),
                          sample_interval=getattr(args, "sample_interval", 0.1),
                          second_look=getattr(args, "second_look", 3.0), caps_mib=_caps_given(args),
                          match_env=[cmd.check_match_env(m) for m in args.match_env])


def _caps_given(args: argparse.Namespace) -> dict[str, int]:
    """The byte caps the user set away from their defaults, by option: only those are sent (a host's older
    collector that does not know an option is not asked it for nothing)."""
    defaults = {"max_mib": TOTAL_BYTES >> 20, "rank_max_mib": RANK_BYTES >> 20, "host_max_mib": HOST_BYTES >> 20}
    return {"--" + dest.replace("_", "-"): getattr(args, dest) for dest, default in defaults.items()
            if getattr(args, dest, default) != default}


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
        lines.append(f"ranks collected: {summary['ranks']} {heard}; ranks missing: {fold(missing)}")
    elif answered < len(summary["hosts"]):
        lines.append(f"ranks collected: {summary['ranks']} {heard}; ranks on the silent hosts: unknown")
    else:
        lines.append(f"ranks collected: {summary['ranks']} {heard}; ranks missing: none")
    lines.append(f"next: forensics analyze {out}")
    return lines

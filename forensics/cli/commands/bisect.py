"""`forensics bisect`: find bad machines by running a short test job on groups of hosts."""

from __future__ import annotations

import argparse
import datetime
import os
import sys
from pathlib import Path

from forensics import safefs
from forensics.bisect import designs, from_bundles, plan, report, simulate
from forensics.bisect import state as state_io
from forensics.bisect.engine import CHECK_LLR, Bisection, BisectSettings
from forensics.fleet.hosts import gather
from forensics.bisect.launchers import LaunchError, check_host, expand_hosts, make_launcher, split_template
from forensics.bisect.runner import Runner
from forensics.report.output import add_output_options, emit, emit_json
from forensics.errors import ForensicsError
from forensics.exitcodes import ExitCode
from forensics.bisect.launchers import JobSpec

NAME = "bisect"
HELP = "pinpoint bad machines by running real test jobs on groups of hosts"
DESCRIPTION = """Split the hosts into groups, run your test job on every group at once, and
intersect the failures, round after round, until every host is convicted or cleared
to --confidence. Tolerates flaky tests, hangs and several bad hosts at once.

The --test template is split like a shell command once; in each argument {hosts}
becomes the group's comma-separated hosts, {nnodes} their number, {port} a free
port for the group, {round}/{group} the job's place, {first} its first host.

examples:
  forensics bisect --hosts 'node[001-048]' --launcher slurm --test 'python check.py --nodes {nnodes}'
  forensics bisect --hostfile hosts.txt --launcher ssh --test 'nccl-check --hosts {hosts}' --state bisect.json
  forensics bisect --hosts 'node[001-512]' --simulate --sim-bad 2 --sim-flake 0.05

--json prints hang-forensics/bisect/1: "bad" (hosts with P(bad)), "exclude_list"
(comma-separated, for srun/sbatch --exclude=), "undecided", "job_count" and "jobs"
(every job: hosts, status, rc, seconds, log).
"""

EXIT_CODES = {
    0: "every host decided, none bad",
    1: "internal error (a bug)",
    2: "bad input: no hosts, unsafe host name, bad state file, impossible group sizes",
    3: "stopped with hosts still undecided (--max-rounds spent, --stop-after-round); bad hosts found so far are listed",
    5: "bad hosts found, every host decided: exclude_list names them (command-specific)",
}


def add_arguments(p: argparse.ArgumentParser) -> None:
    who = p.add_argument_group("hosts")
    who.add_argument("--hosts", help="host set, ClusterShell syntax: 'node[001-048],gpu7'")
    who.add_argument("--hostfile", help="file with one host (or host set) per line; # comments")
    who.add_argument("--slurm", action="store_true",
                     help="hosts from $SLURM_JOB_NODELIST and run jobs with srun (implies --launcher slurm)")
    who.add_argument("--good-hosts", help="hosts known good, used only to pad groups to a valid size")
    who.add_argument("--topology", help="file of 'host label' lines (switch, rail) for --topology-mode")
    who.add_argument("--topology-mode", choices=("together", "apart"), help="keep each label in one job, or spread it")

    job = p.add_argument_group("test job")
    job.add_argument("--test", help="test command template, e.g. 'torchrun ... --hosts {hosts} {nnodes}'")
    job.add_argument("--launcher", choices=("local", "ssh", "slurm"), default="local",
                     help="how a group's job starts: local (default: the test runs here and reaches the hosts "
                          "itself), ssh (on the group's first host), slurm (srun --nodelist of the group)")
    job.add_argument("--timeout", type=float, default=300.0, help="seconds before a job counts as hung (default 300)")
    job.add_argument("--max-parallel", type=int, help="most jobs at once (default: a whole round)")
    job.add_argument("--min-group", type=int, default=1, help="smallest valid job, in hosts")
    job.add_argument("--group-multiple", type=int, default=1, help="job sizes must be a multiple of this")
    job.add_argument("--max-group", type=int, help="largest valid job, in hosts")
    job.add_argument("--port-base", type=int, default=29500, help="first {port} value (default 29500)")
    job.add_argument("--port-span", type=int, default=100, help="{port} cycles through this many ports")
    job.add_argument("--ssh-option", action="append", default=[], metavar="KEY=VALUE",
                     help="extra ssh -o option, e.g. Port=2222; connection options only, as for collect (repeatable)")
    job.add_argument("--srun-arg", action="append", default=[], metavar="--OPTION[=VALUE]",
                     help="extra srun option, e.g. --srun-arg=--partition=debug; job-step options only (repeatable)")

    how = p.add_argument_group("design and decoding")
    how.add_argument("--design", choices=sorted(designs.DESIGNS), default="grid",
                     help="grid: r x c, c x r, then isolate suspects (default); grid3: always a co-prime "
                          "residue 3rd round; adaptive: binary splitting, one job a round; hand: two grid "
                          "rounds, intersection, no re-tests")
    how.add_argument("--rows", type=int, help="grid rows (default: near sqrt of the hosts)")
    how.add_argument("--cols", type=int, help="grid columns")
    how.add_argument("--parallel", type=int, default=1, help="adaptive: jobs per round")
    how.add_argument("--confidence", type=float, default=0.99,
                     help="convict at P(bad) >= this; clear so that all cleared hosts together are bad "
                          "with probability < 1 - this (default 0.99)")
    how.add_argument("--flake-rate", type=float, default=0.02, help="P(a job of good hosts fails or hangs)")
    how.add_argument("--miss-rate", type=float, default=0.01, help="P(a job with a bad host passes anyway)")
    how.add_argument("--expected-bad", type=float, default=1.0, help="bad hosts expected before testing (prior)")
    how.add_argument("--max-rounds", type=int, help="round budget (default 12; adaptive more)")
    how.add_argument("--plan", action="store_true",
                     help="print every round the design fixes in advance (its jobs as folded host sets) and what "
                          "each outcome would decide, then stop: nothing is run or written")

    run = p.add_argument_group("state, evidence, output")
    run.add_argument("--state", metavar="FILE",
                     help="state file (results only: the command line gives hosts, test and options), written after "
                          "every job, job logs in FILE.logs/; if it exists, the bisection resumes, and a state made "
                          "for other hosts or options is refused. Default: a new folder ./forensics-bisect-TIME-PID/ "
                          "(state.json, logs/), named on stderr. Only in a folder no other user may write to")
    run.add_argument("--stop-after-round", type=int, help="stop once this many rounds are done (resume later)")
    run.add_argument("--from-bundles", nargs="+", metavar="PATH",
                     help="verdict JSON files or bundle folders of failed runs: implicated hosts go first")
    run.add_argument("--host-check", metavar="CMD",
                     help="single-host check run per host before any group job ({host}); exit 0 healthy, "
                          "1 suspect, 2 exclude")
    add_output_options(run, json_help="print the report as JSON (schema hang-forensics/bisect/1)")
    run.add_argument("--quiet", action="store_true",
                     help="no progress lines on stderr (they are a log of each job, kept in batch logs too)")

    sim = p.add_argument_group("simulation (no jobs run)")
    sim.add_argument("--simulate", action="store_true",
                     help="play designs against a model cluster: all of them for the default --design, "
                          "else the chosen one next to the hand method")
    sim.add_argument("--sim-bad", type=int, default=1, help="bad hosts in the model")
    sim.add_argument("--sim-flake", type=float, default=0.0, help="model: P(good job fails)")
    sim.add_argument("--sim-hang", type=float, default=0.0, help="model: P(good job hangs)")
    sim.add_argument("--sim-hosts", type=int, help="model size when no --hosts is given")
    sim.add_argument("--trials", type=int, default=50, help="model: bisections played per design (default 50)")


def _hosts(args: argparse.Namespace) -> list[str]:
    """The candidate hosts from --hosts, --hostfile or --slurm, in order, no duplicates."""
    slurm: list[str] = []
    if args.slurm:
        nodelist = os.environ.get("SLURM_JOB_NODELIST") or os.environ.get("SLURM_NODELIST")
        if not nodelist:
            raise ForensicsError("--slurm: SLURM_JOB_NODELIST is not set (run inside an allocation)")
        slurm.append(nodelist)
    # the same checked reader as collect's, one host cap for all of them together
    hosts = gather([args.hosts] if args.hosts else [], Path(args.hostfile) if args.hostfile else None, slurm)
    seen: set[str] = set()
    dup = [h for h in hosts if h in seen or seen.add(h)]
    if dup:
        raise ForensicsError(f"host(s) listed twice: {', '.join(dup[:5])}")
    return hosts


def _settings(args: argparse.Namespace, n: int) -> BisectSettings:
    if not 0.5 < args.confidence < 1:
        raise ForensicsError("--confidence must be between 0.5 and 1")
    for name in ("flake_rate", "miss_rate"):
        if not 0 <= getattr(args, name) < 0.5:
            raise ForensicsError(f"--{name.replace('_', '-')} must be in [0, 0.5)")
    max_rounds = args.max_rounds or simulate.default_max_rounds(args.design, n)
    return BisectSettings(design=args.design, rows=args.rows, cols=args.cols, parallel=args.parallel,
                    confidence=args.confidence, max_rounds=max_rounds, flake=args.flake_rate,
                    miss=args.miss_rate, prior=min(0.5, args.expected_bad / max(n, 1)),
                    min_size=args.min_group, multiple=args.group_multiple, max_size=args.max_group,
                    max_parallel=args.max_parallel)


def _topology(args: argparse.Namespace) -> dict[str, str] | None:
    if not args.topology:
        if args.topology_mode:
            raise ForensicsError("--topology-mode needs --topology FILE")
        return None
    labels = {}
    try:
        for line in Path(args.topology).read_text().splitlines():
            parts = line.split("#", 1)[0].split()
            if len(parts) >= 2:
                labels[parts[0]] = parts[1]
    except OSError as err:
        raise ForensicsError(f"cannot read --topology {args.topology}: {err.strerror}") from err
    return labels


def _options(args: argparse.Namespace) -> dict:
    """What a bisection is for, from the command line only: hosts (as units), test, launcher, settings.
    A state file is valid for exactly these (its digest); nothing here runs or reads evidence."""
    hosts = _hosts(args)
    if not hosts:
        raise ForensicsError("no hosts: give --hosts, --hostfile or --slurm")
    if not args.test and not getattr(args, "plan", False):  # a plan needs no test: it runs none
        raise ForensicsError("no --test command given")
    try:
        split_template(args.test or "true")
        good = expand_hosts(args.good_hosts) if args.good_hosts else []
    except LaunchError as err:
        raise ForensicsError(str(err)) from err
    if set(good) & set(hosts):
        raise ForensicsError("--good-hosts overlaps the hosts under test")
    try:
        units = designs.units_for_topology(hosts, _topology(args), args.topology_mode)
    except designs.DesignError as err:
        raise ForensicsError(str(err)) from err
    settings = _settings(args, len(units))
    return Bisection.new_config(units, settings, test=args.test, launcher=args.launcher, timeout=args.timeout,
                                good_hosts=good, port_base=args.port_base, port_span=args.port_span,
                                ssh_options=list(args.ssh_option), srun_args=list(args.srun_arg),
                                from_bundles=list(args.from_bundles or []), host_check=args.host_check)


def _first_results(args: argparse.Namespace, launcher, options: dict) -> dict:
    """What is learned before the first round (kept in the state as results): verdicts of
    --from-bundles, answers of --host-check."""
    hosts = [h for u in options["units"] for h in u["hosts"]]
    units = [designs.Unit(u["name"], tuple(u["hosts"])) for u in options["units"]]
    unary: dict[str, float] = {}
    first_round = None
    notes = []
    if args.from_bundles:
        try:
            imp = from_bundles.read_bundles(args.from_bundles)
        except from_bundles.BadVerdict as err:
            raise ForensicsError(f"--from-bundles: {err}") from err
        notes += imp.problems
        unary.update(from_bundles.prior_llr(imp, hosts))
        repeat = from_bundles.repeat_suspects(imp, hosts)
        names = [u.name for u in units]
        idx = sorted({next(i for i, u in enumerate(units) if h in u.hosts) for h in repeat})
        if idx:
            first_round = [[i] for i in idx]
            notes.append("tested alone first (implicated by several runs): " + ", ".join(names[i] for i in idx))
    excluded: dict[str, str] = {}
    if args.host_check:
        check = from_bundles.command_check(args.host_check, lambda argv, host: _check_argv(launcher, argv, host),
                                           args.timeout)
        verdicts = from_bundles.run_checks(hosts, check)
        for h, v in verdicts.items():
            if v == "exclude":
                excluded[h] = "host check"
            else:
                unary[h] = unary.get(h, 0.0) + float(CHECK_LLR[v])
        notes.append(f"host checks: {len(verdicts)} answered, {len(excluded)} excluded")
    return {"unary_llr": unary, "excluded": excluded, "first_round": first_round, "notes": notes}


def _where(args: argparse.Namespace) -> tuple[Path, Path]:
    """(state file, job log folder), their folders made or checked (forensics.safefs): --state FILE
    with FILE.logs/, or a new ./forensics-bisect-TIME-PID/ with state.json and logs/. Nothing is
    written into a folder another user may write to, and no existing name is followed."""
    if args.state:
        state_path = Path(args.state)
        folder = state_path.parent
        if not os.path.lexists(folder):
            try:
                safefs.ensure_folder(folder)
            except OSError as err:
                raise ForensicsError(f"{folder}: cannot create the folder of --state ({err.strerror or err})") from err
        safefs.private_folder(folder, "folder of --state")
        log_dir = state_path.with_name(state_path.name + ".logs")
    else:
        stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
        folder = Path(f"forensics-bisect-{stamp}-{os.getpid()}")
        safefs.check_parents(folder)
        try:
            os.mkdir(folder, safefs.DIR_MODE)
        except OSError as err:
            raise ForensicsError(f"{folder}: cannot create the state folder ({err.strerror or err}); "
                                 "give --state FILE") from err
        state_path, log_dir = folder / "state.json", folder / "logs"
    if os.path.lexists(log_dir):
        safefs.private_folder(log_dir, "job log folder")
    else:
        try:
            os.mkdir(log_dir, safefs.DIR_MODE)
        except OSError as err:
            raise ForensicsError(f"{log_dir}: cannot create the job log folder ({err.strerror or err})") from err
    return state_path, log_dir


def _check_argv(launcher, argv: list[str], host: str) -> list[str]:
    """Host checks run on the host itself for ssh/slurm, here for local."""

    return launcher.argv(argv, JobSpec([check_host(host)], 0, 0, 0, 60))


def _simulate(args: argparse.Namespace) -> int:
    n = len(_hosts(args)) if (args.hosts or args.hostfile) else (args.sim_hosts or 48)
    if not 0 <= args.sim_bad <= n:
        raise ForensicsError("--sim-bad must be between 0 and the number of hosts")
    model = simulate.ClusterModel(n, args.sim_bad, flake=args.sim_flake, hang=args.sim_hang)
    rows = []
    chosen = ["hand", "grid", "grid3", "adaptive"] if args.design == "grid" else ["hand", args.design]
    for name in dict.fromkeys(chosen):
        s = simulate.simulate(name, model, trials=args.trials, confidence=args.confidence,
                              min_size=args.min_group, multiple=args.group_multiple,
                              max_parallel=args.max_parallel, parallel=args.parallel)
        rows.append(s)
    bound = simulate.information_bound(n, args.sim_bad) if args.sim_bad else 0.0
    if args.json:
        designs = [{k: v for k, v in s.__dict__.items() if k != "results"} for s in rows]
        emit_json("bisect-simulation", {"n": n, "k": args.sim_bad, "flake": args.sim_flake, "hang": args.sim_hang,
                                        "info_bound_bits": bound, "designs": designs}, args)
        return int(ExitCode.OK)
    out = []
    out.append(f"{n} hosts, {args.sim_bad} bad, flake {args.sim_flake}, hang {args.sim_hang}, "
          f"{args.trials} trials; information bound {bound:.1f} bits")
    out.append(f"{'design':<9} {'rounds':>7} {'max':>4} {'jobs':>8} {'host-jobs':>10} {'exact':>6} "
               f"{'false-excl':>10} {'missed':>7}")
    for s in rows:
        out.append(f"{s.design:<9} {s.rounds:7.2f} {s.max_rounds:4d} {s.jobs:8.1f} {s.machine_time:10.0f} "
              f"{s.exact_rate:6.2f} {s.false_exclusions:10.2f} {s.missed:7.2f}")
    emit("\n".join(out), args.output)
    return int(ExitCode.OK)


def _plan(args: argparse.Namespace, options: dict) -> int:
    """--plan: the rounds fixed in advance and their outcomes (forensics.bisect.plan); nothing runs."""
    if args.host_check or args.state:
        raise ForensicsError("--plan runs nothing and writes nothing: not with --host-check (it runs a command on "
                             "every host) or --state")
    if args.from_bundles:  # verdicts are only read: the hosts they implicate go first, as in the run
        options = {**options, **_first_results(args, None, options)}
    emit("\n".join(plan.plan_lines(options)) + "\n", args.output)
    return int(ExitCode.OK)


def run(args: argparse.Namespace) -> int:
    if args.simulate:
        return _simulate(args)
    if args.slurm:
        args.launcher = "slurm"
    try:
        launcher = make_launcher(args.launcher, args.ssh_option, args.srun_arg)
    except LaunchError as err:
        raise ForensicsError(str(err)) from err
    try:
        options = _options(args)
    except designs.DesignError as err:
        raise ForensicsError(str(err)) from err
    if args.plan:
        return _plan(args, options)
    resuming = bool(args.state) and os.path.lexists(args.state)
    if resuming:
        try:
            state = state_io.resume(state_io.load(args.state), options, args.state)
        except state_io.StateError as err:
            raise ForensicsError(str(err)) from err
    else:
        try:
            results = _first_results(args, launcher, options)  # before any folder is made: bad input leaves none
        except designs.DesignError as err:
            raise ForensicsError(str(err)) from err
        state = state_io.new_state({**options, **results}, state_io.digest(options))
    state_path, log_dir = _where(args)
    # where this run writes, always said (stderr): the state to resume from and every job's log
    print(f"[bisect] state: {state_path}; job logs: {log_dir}/ (resume: the same command with --state {state_path})",
          file=sys.stderr)
    if not args.quiet:
        if resuming:
            print(f"[bisect] resuming from {state_path}: {len(state['rounds'])} round(s) on record", file=sys.stderr)
        for note in [] if resuming else state["config"]["notes"]:
            print(f"[bisect] {note}", file=sys.stderr)
    cfg = state["config"]
    try:
        bis = Bisection(state)
    except (KeyError, TypeError, ValueError, IndexError) as err:
        raise ForensicsError(f"state file {state_path}: its rounds do not fit these hosts ({err})") from err
    runner = Runner(bis, state_path, launcher, cfg["test"], float(cfg["timeout"]),
                    port_base=int(cfg["port_base"]), port_span=int(cfg["port_span"]), log_dir=log_dir,
                    progress=None if args.quiet else sys.stderr, stop_after_round=args.stop_after_round)
    runner.save()
    try:  # SIGTERM/SIGHUP unwind like Ctrl-C (forensics.cli.ending): running jobs killed, marked to rerun
        outcome = runner.run()
    except (designs.DesignError, LaunchError) as err:
        raise ForensicsError(str(err)) from err
    rep = report.build(bis, outcome)
    rep["state_file"] = str(state_path)
    if args.json:
        emit_json("bisect", rep, args)
    else:
        emit(report.render(rep), args.output)
    return int(exit_code(outcome, rep))


def exit_code(outcome: str, rep: dict) -> ExitCode:
    """0 all cleared, 5 bad hosts found and everything decided, 3 stopped with hosts undecided."""
    if outcome != "done" or rep["undecided"]:
        return ExitCode.PARTIAL
    return ExitCode.BAD_HOSTS if rep["bad"] else ExitCode.OK

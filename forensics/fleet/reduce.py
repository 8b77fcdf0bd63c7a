"""The reduction step of tree mode: a gateway folds what its hosts returned into one merged digest.

Why: as LLNL's STAT reduces stack traces at every level of its MRNet tree, a gateway that collected
its share of the fleet sends up one merged digest (`parsers.scale.merge`: stack classes with rank
ranges, position histograms, each rank's own oddities as rank sets, wait edges), whose size follows
the job's variety, not its rank count; the raw files stay where the gateway filed them, for the root
to fetch for the ranks its class judgement marks (`parsers.scale.classes`). The root merges the
gateways' answers in the same way (merging is associative: any tree shape gives the same root).

On a gateway: `python -m forensics.fleet.reduce BUNDLE` (a job bundle the gateway merged from its
hosts' answers) prints the merged digest on stdout; a host whose digest is missing or unusable is
named in its `without_digest`, which makes the root judge rank by rank.

The reduced tree end to end (`collect_reduced`): the root reaches each gateway by ssh and runs
`python -m forensics.fleet.reduce gateway --hosts NODESET --out DIR --spec JSON`; the gateway collects
its hosts as a flat fleet (`forensics.fleet.collect.collect_fleet`: its own ssh clients, its own job
bundle in DIR, raw files and digests kept there) and answers one line: its merged digest, its hosts'
results folded, and where its bundle is. The root checks and merges the answers and judges the merged
digest over its classes: the ranks whose raw files are worth fetching, and which gateway holds them.

The judges' verdict (forensics.fleet.tree_verdict, the root's half, kept apart so that gateways start
without the judges): the root runs `python -m forensics.fleet.reduce fetch --bundle DIR
--ranks RANGES` on only the gateways whose rank set holds an odd rank; each sends, one wire frame a host
(forensics.fleet.wire), the raw files of its hosts that hold them (at most MAX_FETCH_HOSTS), and the root
files them into its own bundle as it files host answers (forensics.fleet.filing.place_archive). The ranks
left on the gateways are recorded there as judged from the merged digest, and the normal pipeline judges
that bundle (`tree_analysis`): the same VERDICT as `forensics analyze`. `forensics collect --reduce` runs it.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import stat
import sys
import tarfile
import time
from pathlib import Path
from typing import Any, Callable, Iterable

from forensics.bundle.merged_digest import MERGED_DIGEST, merge_host_digests
from forensics import safefs
from forensics.bundle.merge import HOST_MANIFEST, HostPart, host_root
from forensics.errors import ForensicsError
from forensics.fleet import wire
from forensics.fleet.filing import place_archive
from forensics.fleet.collect import collect_fleet, folded_hosts, ssh_runner
from forensics.fleet.command import RemoteSpec, check_match_env, shell_command
# (the functions here take the user's as ssh_options)
from forensics.fleet.command import ssh_options as ssh_options_argv
from forensics.fleet.hosts import expand_nodeset, fold as fold_hosts
from forensics.fleet.transport import run_ssh
from parsers.input import bounded_json, safeio
from parsers.scale.digest import StatedJob
from parsers.scale.classes import judge_classes
from parsers.input.archive import ArchiveRefused
from parsers.input.errors import InputError
from parsers.scale.merge import MAX_MERGED_BYTES, ClassSummary, Intervals, check_merged, fold as fold_ranks, \
    holds, merge_all
from parsers.gather.source import open_source, read_manifest_file


def reduce_bundle(bundle: Path) -> ClassSummary:
    """The merged digest of a bundle's hosts, as the fleet's merge writes it (forensics.bundle.merged_digest's
    `merge_host_digests`): what a gateway answers when that file is not there or not readable, and what
    `python -m forensics.fleet.reduce BUNDLE` prints. A bundle of no manifest (a loose folder) has no host."""
    with open_source(bundle, list_files=False) as src:  # the manifest only: the digests are read by their paths
        if src.manifest is None:
            return ClassSummary()
        return merge_host_digests(src.root, src.manifest.hosts, StatedJob.of(src.manifest)).summary


def _bounded_json(text: str | bytes, what: str) -> Any:
    """JSON from a gateway, refused before parsing when over MAX_MERGED_BYTES (a hostile or broken gateway must
    not make the root parse gigabytes); ValueError with the reason, `what` naming the document in it."""
    if len(text) > MAX_MERGED_BYTES:
        raise ValueError(f"{len(text)} bytes, over the {MAX_MERGED_BYTES >> 20} MiB {what} may have")
    try:
        return bounded_json.loads(text)  # the readers' JSON bound on shape too: a merged digest of nested lists
    except (ValueError, RecursionError) as err:
        raise ValueError(f"not JSON: {str(err)[:200]}") from None


def read_answer(text: str | bytes) -> ClassSummary:
    """A gateway's answer (its merged digest as JSON), bounded and checked; ValueError with the reason."""
    return check_merged(_bounded_json(text, "a merged digest"))


def merge_answers(answers: Iterable[str | bytes]) -> tuple[ClassSummary, list[str]]:
    """The root's merged digest from its gateways' answers, and why any answer was not used (its ranks are
    then not in the merge, and the count of hosts says so)."""
    good, bad = [], []
    for i, text in enumerate(answers):
        try:
            good.append(read_answer(text))
        except ValueError as err:
            bad.append(f"answer {i}: {err}")
    return merge_all(good), bad


ANSWER = "hang-forensics-gateway-answer"
#: RemoteSpec fields a gateway takes from the root, with their types (nothing else is set from the JSON)
_SPEC_FIELDS = {"python": str, "tag": str, "timeout": (int, float), "native": bool, "gdb": bool, "match_env": list,
                "env": dict, "gdb_timeout": (int, float, type(None)), "job": (str, type(None)), "samples": int,
                "sample_interval": (int, float), "second_look": (int, float)}


def spec_json(spec: Any) -> str:
    return json.dumps({k: getattr(spec, k) for k in _SPEC_FIELDS}, separators=(",", ":"))


def spec_from_json(text: str) -> Any:
    """The root's RemoteSpec, field by field with its type checked (the gateway builds the hosts' argv from it,
    quoted as the root would: forensics.fleet.command)."""

    data = json.loads(text)
    if not isinstance(data, dict):
        raise ValueError("--spec: not an object")
    kwargs = {}
    for key, value in data.items():
        typ = _SPEC_FIELDS.get(key)
        if typ is None or not isinstance(value, typ) or isinstance(value, bool) and typ in ((int, float), int):
            raise ValueError(f"--spec: {key[:40]!r} is not a field of its type")
        kwargs[key] = value
    spec = RemoteSpec(**kwargs)
    spec.match_env = [check_match_env(str(x)) for x in spec.match_env]
    spec.env = {str(k): str(v) for k, v in spec.env.items()}
    return spec


def gateway_argv(python: str, hosts: list[str], out: str, spec: Any, fanout: int, host_timeout: float,
                 ssh_path: str = "ssh", ssh_options: list[str] | None = None) -> list[str]:
    """argv of the reduction on one gateway (quoted by forensics.fleet.command.shell_command for ssh)."""
    argv = [python, "-m", "forensics.fleet.reduce", "gateway", "--hosts", fold_hosts(hosts), "--out", out,
            "--spec", spec_json(spec), "--fanout", str(int(fanout)), "--host-timeout", f"{host_timeout:g}",
            "--ssh-path", ssh_path]
    for option in ssh_options or []:
        argv += ["--ssh-option", option]
    return argv


def gateway_main(args: argparse.Namespace) -> int:
    """On a gateway: collect its hosts flat into its own bundle, then answer with one merged digest."""
    hosts = expand_nodeset(args.hosts)
    spec = spec_from_json(args.spec)
    runner = ssh_runner(ssh_options_argv(args.ssh_option, args.host_timeout), args.fanout, ssh_path=args.ssh_path)
    result = collect_fleet(hosts, args.out, spec, runner, host_timeout=args.host_timeout, quiet=True, cleanup=True)
    write_fetch_index(args.out, result.manifest)
    try:  # the fleet's merge wrote it from the same digests (forensics.bundle.merged_digest.write_merged_digest)
        merged = read_answer((args.out / MERGED_DIGEST).read_bytes())
    except (OSError, ValueError):
        merged = reduce_bundle(args.out)
    answer = {"format": ANSWER, "version": 1, "bundle": str(args.out), "seconds": result.seconds,
              "host_groups": folded_hosts(result.parts), "merged": merged.to_json()}
    sys.stdout.write(json.dumps(answer, separators=(",", ":")) + "\n")
    return 0


def read_gateway_answer(text: str) -> tuple[ClassSummary, dict[str, Any]]:
    """A gateway's answer line: (its merged digest checked, the rest: bundle, host_groups, seconds);
    ValueError with the reason."""
    doc = _bounded_json(text, "an answer")
    if not isinstance(doc, dict) or doc.get("format") != ANSWER or doc.get("version") != 1:
        raise ValueError(f"not a {ANSWER} of version 1")
    merged = doc.pop("merged", None)
    rest = {"bundle": str(doc.get("bundle"))[:4096], "seconds": doc.get("seconds"),
            "host_groups": doc.get("host_groups") if isinstance(doc.get("host_groups"), list) else []}
    return check_merged(merged), rest


MAX_FETCH_HOSTS = 64  #: hosts whose raw files the root fetches at most (the odd ranks' hosts, first come)
MAX_FETCH_RANGES = 4096  #: rank ranges one fetch request may name


def parse_intervals(text: str) -> Intervals:
    """'3,16-23' -> [[3, 3], [16, 23]] without expanding them (the request is data: bounded ranges, no list of
    a billion ints); ValueError on anything else."""
    out: Intervals = []
    if not text:
        return out
    pieces = text.split(",", MAX_FETCH_RANGES)
    if len(pieces) > MAX_FETCH_RANGES:
        raise ValueError(f"more than {MAX_FETCH_RANGES} rank ranges")
    for piece in pieces:
        lo, sep, hi = piece.partition("-")
        if not lo.isdigit() or len(lo) > 9 or (sep and (not hi.isdigit() or len(hi) > 9)):
            raise ValueError(f"{piece[:40]!r} is not a rank or a range of ranks")
        a, b = int(lo), int(hi) if sep else int(lo)
        if b < a:
            raise ValueError(f"{piece[:40]!r}: the range runs backwards")
        out.append([a, b])
    return out


FETCH_INDEX = "hang-forensics-fetch-index"
FETCH_INDEX_SUFFIX = ".fetch-index.json"  #: beside a gateway's bundle DIR: DIR.fetch-index.json
MAX_INDEX_BYTES = 64 << 20


def fetch_index_path(bundle: Path) -> Path:
    """Beside the bundle, not in it: the bundle stays exactly a job bundle for anyone who analyses it there."""
    return bundle.parent / f"{bundle.name}{FETCH_INDEX_SUFFIX}"


def write_fetch_index(bundle: Path, manifest: Any) -> None:
    """On a gateway, once its hosts are filed: each host of its bundle (the manifest's order) with its ranks, so
    that a fetch reads kilobytes instead of the whole job manifest (15.6 MB at 782 hosts of 8 ranks: 1.2-1.6 s
    of validating and building it, most of the root's wait after the last answer at 100,000 ranks). Best
    effort: without it a fetch reads the manifest."""
    ranks: dict[str, list[int]] = {}
    for r in manifest.ranks:
        if r.rank is not None:
            ranks.setdefault(r.host, []).append(r.rank)
    doc = {"format": FETCH_INDEX, "version": 1,
           "hosts": [[rec.host, sorted(ranks.get(rec.host, []))] for rec in manifest.hosts]}
    try:
        safefs.replace_file(fetch_index_path(bundle), json.dumps(doc, separators=(",", ":")))
    except (OSError, ForensicsError):
        pass


def read_fetch_index(bundle: Path) -> list[tuple[str, list[int]]] | None:
    """The gateway's index (`write_fetch_index`) checked: a regular file, bounded, every entry a host name and
    its ranks; None when absent or not that (the fetch then reads the manifest)."""
    try:
        data, cut = safeio.read_path_bytes(fetch_index_path(bundle), MAX_INDEX_BYTES, follow=False)
        if cut:
            return None
        doc = bounded_json.loads(data)
    except (OSError, ValueError, RecursionError):  # safeio.UnsafeFile (a link, not a regular file) is an OSError
        return None
    if not isinstance(doc, dict) or doc.get("format") != FETCH_INDEX or doc.get("version") != 1:
        return None
    out = []
    for item in doc.get("hosts") if isinstance(doc.get("hosts"), list) else [None]:
        if not (isinstance(item, list) and len(item) == 2 and isinstance(item[0], str) and isinstance(item[1], list)
                and all(isinstance(r, int) and not isinstance(r, bool) and r >= 0 for r in item[1])):
            return None
        out.append((item[0], item[1]))
    return out


def hosts_to_fetch(bundle: Path, ranges: Intervals, named: set[str], limit: int) -> list[tuple[str, Path]]:
    """On a gateway: its hosts that hold a rank in `ranges` or are `named`, with their folders, at most `limit`.
    A folder must be a real directory right under BUNDLE/hosts/ (no link anywhere on the way): the root's
    request chooses ranks, never paths. Which host holds which rank: the gateway's fetch index, else its
    bundle's manifest."""
    index = read_fetch_index(bundle)
    if index is None:
        manifest = read_manifest_file(bundle / "manifest.json")  # the manifest alone: no listing of its files
        wanted = {r.host for r in manifest.ranks if holds(r.rank, ranges)} | named
        order = [rec.host for rec in manifest.hosts]
    else:
        wanted = {host for host, ranks in index if any(holds(r, ranges) for r in ranks)} | named
        order = [host for host, _ in index]
    top = (bundle / "hosts").resolve()
    out = []
    for host in order:  # the gateway's own order: deterministic, the same on a second request
        if host not in wanted or len(out) >= limit:
            continue
        folder = bundle / host_root(host)
        try:
            st = os.lstat(folder)
        except OSError:
            continue  # a host that sent nothing: no raw files to send up
        if not stat.S_ISDIR(st.st_mode) or folder.resolve().parent != top:
            continue
        out.append((host, folder))
    return out


def pack_host(folder: Path) -> bytes:
    """A host's folder of a gateway's job bundle packed back as the host sent it (bundle/manifest.json its own
    manifest; the files under bundle/hosts/<folder name>/ or bundle/ as they were), so the root files it with the
    same checks as any host answer (forensics.fleet.filing.place_archive). Regular files only: links are skipped."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz", format=tarfile.GNU_FORMAT, compresslevel=1) as tar:
        tar.add(folder, arcname="bundle", recursive=False)
        for path in sorted(folder.rglob("*")):
            rel = path.relative_to(folder).as_posix()
            if rel == HOST_MANIFEST:
                arc = "bundle/manifest.json"
            elif rel == "_bundle" or rel.startswith("_bundle/"):
                arc = "bundle/" + rel[len("_bundle/"):] if rel != "_bundle" else ""
            else:
                arc = f"bundle/hosts/{folder.name}/{rel}"
            try:
                st = os.lstat(path)
                if not arc or not stat.S_ISREG(st.st_mode):
                    continue
                with open(path, "rb", opener=lambda p, f: os.open(p, f | os.O_NOFOLLOW)) as fh:
                    data = fh.read(st.st_size + 1)
                info = tarfile.TarInfo(arc)
                info.size, info.mtime, info.mode = len(data), int(st.st_mtime), 0o644
                tar.addfile(info, io.BytesIO(data))
            except OSError:
                continue
    return buffer.getvalue()


def fetch_main(args: argparse.Namespace) -> int:
    """On a gateway: the raw files of the hosts that hold the root's odd ranks, one wire frame a host."""
    try:
        ranges = parse_intervals(args.ranks)
        named = set(expand_nodeset(args.hosts)) if args.hosts else set()
        chosen = hosts_to_fetch(args.bundle, ranges, named, max(0, min(args.max_hosts, MAX_FETCH_HOSTS)))
    except Exception as err:  # noqa: BLE001 - said to the root in one frame, which files it as this gateway's error
        failure = f"{type(err).__name__}: {str(err)[:300]}"
        for line in wire.encode({"host": None, "status": "failed", "error": failure}, None):
            sys.stdout.write(line + "\n")
        return 1
    for host, folder in chosen:
        try:
            archive, header = pack_host(folder), {"host": host, "status": "ok"}
        except OSError as err:
            archive, header = None, {"host": host, "status": "failed", "error": str(err)[:300]}
        for line in wire.encode(header, archive):
            sys.stdout.write(line + "\n")
        sys.stdout.flush()
    return 0


def fetch_argv(python: str, bundle: str, ranges: Intervals, hosts: list[str], max_hosts: int) -> list[str]:
    """argv of the raw-file fetch on one gateway (quoted by forensics.fleet.command.shell_command for ssh)."""
    return [python, "-m", "forensics.fleet.reduce", "fetch", "--bundle", bundle, "--ranks", fold_ranks(ranges),
            "--hosts", fold_hosts(hosts) if hosts else "", "--max-hosts", str(int(max_hosts))]


def split_frames(lines: Iterable[str]) -> list[list[str]]:
    """The lines of each wire frame in one stdout that carries several (one a host); other lines are skipped."""
    frames: list[list[str]] = []
    begin, end = f"{wire.MAGIC} {wire.WIRE_VERSION} BEGIN ", f"{wire.MAGIC} {wire.WIRE_VERSION} END "
    current: list[str] | None = None
    for line in lines:
        if line.startswith(begin):
            current = [line]
            frames.append(current)
        elif current is not None:
            current.append(line)
            if line.startswith(end):
                current = None
    return frames


def fetch_raw(gateways: dict[str, list[str]], gateway_out: str, ranges: Intervals, named_hosts: set[str], out: Path,
              timeout: float, ssh_path: str = "ssh", ssh_options: list[str] | None = None,
              gateway_python: str = "python3", max_hosts: int = MAX_FETCH_HOSTS,
              received: list[int] | None = None) -> tuple[list[HostPart], list[str]]:
    """From the gateways that keep them, the raw files of the hosts that hold `ranges` (or are named), filed
    into `out` as host answers are (hosts/<host>/, parsers.input.archive's checks through place_archive): at most
    `max_hosts` in all. Each gateway is asked only about its own hosts; a frame for a host the root did not
    send it is refused. Returns the filed hosts and why anything was not filed (`received`, when given, gets the
    characters each gateway sent)."""
    max_hosts = max(0, min(max_hosts, MAX_FETCH_HOSTS))
    cmds = {gw: shell_command(fetch_argv(gateway_python, gateway_out.replace("{gateway}", gw), ranges,
                                         sorted(named_hosts & set(hosts)), max_hosts))
            for gw, hosts in gateways.items()}
    runs = run_ssh(list(gateways), lambda gw: cmds[gw], ssh_options_argv(ssh_options or [], min(10.0, timeout)),
                   max(1, len(gateways)), timeout, None, ssh_path)
    parts: list[HostPart] = []
    problems: list[str] = []
    for gw in gateways:  # the root's order of gateways: the same hosts are kept whatever order answers came in
        run = runs[gw]
        if received is not None:
            received.append(sum(len(line) for line in run.stdout) + run.dropped)
        if run.dropped or run.timed_out:
            problems.append(f"{gw}: {'answer over its size bound' if run.dropped else f'no answer in {timeout:g} s'}")
        file_fetched(gw, run.stdout, set(gateways[gw]), out, parts, problems, max_hosts)
    return parts, problems


def file_fetched(gw: str, lines: Iterable[str], own: set[str], out: Path, parts: list[HostPart], problems: list[str],
                 max_hosts: int) -> None:
    """File the frames of one gateway's fetch answer into `out` (appending to `parts`, or saying in `problems`
    why not): a frame must be whole and checked (forensics.fleet.wire), for one of the hosts the root sent that
    gateway and not filed yet, and its archive passes place_archive's checks; at most `max_hosts` in all."""
    frames = split_frames(lines)
    if frames:
        safefs.ensure_folder(out)
    for frame in frames:
        try:
            answer = wire.decode(frame)
        except wire.WireError as err:
            problems.append(f"{gw}: {err}")
            continue
        host = answer.header.get("host")
        if answer.archive is None:
            problems.append(f"{gw}: {str(host)[:80]}: {str(answer.header.get('error'))[:300]}")
            continue
        if not isinstance(host, str) or host not in own or any(p.host == host for p in parts):
            problems.append(f"{gw}: a frame for {str(host)[:80]!r}, not one of its hosts (or sent twice): refused")
            continue
        if len(parts) >= max_hosts:
            problems.append(f"{gw}: {host}: over the {max_hosts} hosts fetched at most: not fetched")
            continue
        try:
            placed = place_archive(answer.archive, out, host)
        except (ArchiveRefused, InputError, OSError) as err:
            problems.append(f"{gw}: {host}: refused ({str(err)[:300]})")
            continue
        parts.append(HostPart(host=host, bundle=out / host_root(host), placed=placed))


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["fetch"]:
        ap = argparse.ArgumentParser(prog="python -m forensics.fleet.reduce fetch")
        ap.add_argument("--bundle", type=Path, required=True, help="this gateway's job bundle (from `gateway --out`)")
        ap.add_argument("--ranks", default="", help="job ranks as ranges, e.g. '19,40-47'")
        ap.add_argument("--hosts", default="", help="hosts named by a finding (NodeSet), fetched too")
        ap.add_argument("--max-hosts", type=int, default=MAX_FETCH_HOSTS)
        return fetch_main(ap.parse_args(argv[1:]))
    if argv[:1] == ["gateway"]:
        ap = argparse.ArgumentParser(prog="python -m forensics.fleet.reduce gateway")
        ap.add_argument("--hosts", required=True)
        ap.add_argument("--out", type=Path, required=True)
        ap.add_argument("--spec", required=True, help="the root's collector options (RemoteSpec as JSON)")
        ap.add_argument("--fanout", type=int, default=64)
        ap.add_argument("--host-timeout", type=float, default=20.0)
        ap.add_argument("--ssh-path", default="ssh")
        ap.add_argument("--ssh-option", action="append", default=[])
        return gateway_main(ap.parse_args(argv[1:]))
    ap = argparse.ArgumentParser(prog="python -m forensics.fleet.reduce", description=__doc__.split("\n\n")[0])
    ap.add_argument("bundle", type=Path, help="the job bundle this gateway merged from its hosts' answers")
    args = ap.parse_args(argv)
    sys.stdout.write(json.dumps(reduce_bundle(args.bundle).to_json(), separators=(",", ":")))
    return 0


def collect_reduced(gateways: dict[str, list[str]], out: Path, spec: Any, gateway_out: str, host_timeout: float,
                    gateway_timeout: float, fanout: int = 64, ssh_path: str = "ssh",
                    ssh_options: list[str] | None = None, gateway_python: str = "python3",
                    gateway_ssh_path: str = "ssh",
                    say: Callable[[str], None] | None = None) -> dict[str, Any]:
    """The reduced tree from the root: each gateway collects its hosts and answers one merged digest (see the
    module doc); the root merges them into `out`/merged-digest.json and judges it over its classes.
    `gateway_out`: where each gateway keeps its bundle ('{gateway}' is replaced by its name). Returns the
    timings ('answers': the last gateway's answer; 'merged'; 'judged'), the bytes received, the odd ranks
    and which gateway's bundle holds each host's raw files; under 'merged_digest' and 'judgement' the root's
    merged digest and its class judgement (for `tree_verdict`)."""
    say = say or (lambda line: None)
    start = time.monotonic()
    say(f"reduced tree: {sum(len(h) for h in gateways.values())} host(s) through {len(gateways)} gateway(s), "
        f"up to {gateway_timeout:g} s")
    gw_cmd = {gw: shell_command(gateway_argv(gateway_python, hosts, gateway_out.replace("{gateway}", gw), spec, fanout,
                                             host_timeout, gateway_ssh_path, ssh_options))
              for gw, hosts in gateways.items()}

    def heard(run: Any) -> None:
        state = "timed out" if run.timed_out else ("answered" if run.returncode == 0 else f"exit {run.returncode}")
        say(f"{run.host}: {state} ({run.seconds:.1f} s)")

    runs = run_ssh(list(gateways), lambda gw: gw_cmd[gw], ssh_options_argv(ssh_options or [], min(10.0, host_timeout)),
                   max(1, len(gateways)), gateway_timeout, heard, ssh_path)
    answered = time.monotonic()
    parts, refused, where, received = [], [], {}, 0
    for gw, run in runs.items():
        text = "".join(run.stdout).strip()
        received += len(text)
        try:
            merged, rest = read_gateway_answer(text)
        except ValueError as err:
            timed_out = ", timed out" if run.timed_out else ""
            refused.append(f"{gw}: {err} (exit {run.returncode}{timed_out}; {run.stderr_tail()})")
            continue
        parts.append(merged)
        where[gw] = dict(rest, ranks=merged.summarised)  # the gateway's rank set, as ranges
    root = merge_all(parts)
    safefs.ensure_folder(out)
    merged_at = time.monotonic()
    judged = judge_classes(root)
    judged_at = time.monotonic()
    safefs.replace_file(out / MERGED_DIGEST, json.dumps(root.to_json(), separators=(",", ":")))
    safefs.replace_file(out / "gateways.json",
                        json.dumps({"gateways": where, "refused": refused}, separators=(",", ":")))
    say(f"merged {root.ranks} rank(s) of {root.hosts} host(s) from {len(where)}/{len(gateways)} gateway(s) "
        f"in {judged_at - start:.1f} s; odd ones out: {fold_ranks(judged.ranks) or 'none'}")
    return {"phases": {"answers": round(answered - start, 3), "merged": round(merged_at - start, 3),
                       "judged": round(judged_at - start, 3)},
            "bytes_received": received, "hosts": root.hosts, "ranks": root.ranks, "refused": refused,
            "classes": judged.summary(), "odd_ranks": fold_ranks(judged.ranks)[:2000], "gateways": where,
            "merged_digest": root, "judgement": judged}


if __name__ == "__main__":
    sys.exit(main())

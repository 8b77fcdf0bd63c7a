"""The reduction step of tree mode: a gateway folds what its hosts returned into one merged digest.

Why: as LLNL's STAT reduces stack traces at every level of its MRNet tree, a gateway that collected
its share of the fleet sends up one merged digest (`parsers.digest_merge`: stack classes with rank
ranges, position histograms, each rank's own oddities as rank sets, wait edges), whose size follows
the job's variety, not its rank count; the raw files stay where the gateway filed them, for the root
to fetch for the ranks its class judgement marks (`parsers.digest_classes`). The root merges the
gateways' answers in the same way (merging is associative: any tree shape gives the same root).

On a gateway: `python -m forensics.fleet.reduce BUNDLE` (a job bundle the gateway merged from its
hosts' answers) prints the merged digest on stdout; a host whose digest is missing or unusable is
counted in `hosts_without_digest`, which makes the root judge rank by rank.

The reduced tree end to end (`collect_reduced`): the root reaches each gateway by ssh and runs
`python -m forensics.fleet.reduce gateway --hosts NODESET --out DIR --spec JSON`; the gateway collects
its hosts as a flat fleet (`forensics.fleet.collect.collect_fleet`: its own ssh clients, its own job
bundle in DIR, raw files and digests kept there) and answers one line: its merged digest, its hosts'
results folded, and where its bundle is. The root checks and merges the answers and judges the merged
digest over its classes: the ranks whose raw files are worth fetching, and which gateway holds them.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any, Iterable

from forensics.bundle.digest import MERGED_DIGEST
from forensics.fleet.collect import collect_fleet, folded_hosts, ssh_runner
from forensics.fleet.command import RemoteSpec, check_match_env, shell_command, ssh_options
from forensics.fleet.hosts import expand_nodeset, fold as fold_hosts
from forensics.fleet.transport import run_ssh
from parsers.digest import DIGEST_NAME, DigestError, read_digest
from parsers.digest_classes import judge_classes
from parsers.digest_merge import MAX_MERGED_BYTES, check_merged, fold as fold_ranks, from_host, merge_all
from parsers.source import open_source


def reduce_bundle(bundle: Path) -> dict[str, Any]:
    """The merged digest of a bundle's hosts (one host digest read at a time: memory holds the merge only).
    A host without a usable digest is counted in `hosts_without_digest` and in `dropped`."""
    missing: list[str] = []

    def parts() -> Iterable[dict[str, Any]]:
        with open_source(bundle) as src:
            hosts = src.manifest.hosts if src.manifest else []
            for rec in hosts:
                try:
                    dig = read_digest(src.path(f"{rec.dir.rstrip('/')}/{DIGEST_NAME}")) if rec.dir else None
                except (DigestError, Exception):  # noqa: BLE001 - a host's bad digest: counted, the others merge
                    dig = None
                if dig is None:
                    missing.append(rec.host)
                    continue
                yield from_host({"host": rec.host, "ranks": dig.ranks, "host_findings": dig.host_findings})

    merged = merge_all(parts())
    merged["dropped"] += len(missing)
    merged["hosts_without_digest"] = sorted(missing)[:1024]
    return merged


def _bounded_json(text: str | bytes, what: str) -> Any:
    """JSON from a gateway, refused before parsing when over MAX_MERGED_BYTES (a hostile or broken gateway must
    not make the root parse gigabytes); ValueError with the reason, `what` naming the document in it."""
    if len(text) > MAX_MERGED_BYTES:
        raise ValueError(f"{len(text)} bytes, over the {MAX_MERGED_BYTES >> 20} MiB {what} may have")
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as err:
        raise ValueError(f"not JSON: {str(err)[:200]}") from None


def read_answer(text: str | bytes) -> dict[str, Any]:
    """A gateway's answer (its merged digest as JSON), bounded and checked; ValueError with the reason."""
    doc = _bounded_json(text, "a merged digest")
    if isinstance(doc, dict):
        doc.pop("hosts_without_digest", None)  # for people; the gateway counted them in `dropped` already
    return check_merged(doc)


def merge_answers(answers: Iterable[str | bytes]) -> tuple[dict[str, Any], list[str]]:
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
    runner = ssh_runner(ssh_options(args.ssh_option, args.host_timeout), args.fanout, ssh_path=args.ssh_path)
    result = collect_fleet(hosts, args.out, spec, runner, host_timeout=args.host_timeout, quiet=True, cleanup=True)
    try:  # the fleet's merge wrote it from the same digests (forensics.bundle.digest.write_merged_digest)
        merged = read_answer((args.out / MERGED_DIGEST).read_bytes())
    except (OSError, ValueError):
        merged = reduce_bundle(args.out)
    answer = {"format": ANSWER, "version": 1, "bundle": str(args.out), "seconds": result.seconds,
              "host_groups": folded_hosts(result.parts), "merged": merged}
    sys.stdout.write(json.dumps(answer, separators=(",", ":")) + "\n")
    return 0


def read_gateway_answer(text: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """A gateway's answer line: (its merged digest checked, the rest: bundle, host_groups, seconds);
    ValueError with the reason."""
    doc = _bounded_json(text, "an answer")
    if not isinstance(doc, dict) or doc.get("format") != ANSWER or doc.get("version") != 1:
        raise ValueError(f"not a {ANSWER} of version 1")
    merged = doc.pop("merged", None)
    if isinstance(merged, dict):
        merged.pop("hosts_without_digest", None)
    rest = {"bundle": str(doc.get("bundle"))[:4096], "seconds": doc.get("seconds"),
            "host_groups": doc.get("host_groups") if isinstance(doc.get("host_groups"), list) else []}
    return check_merged(merged), rest


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
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
    sys.stdout.write(json.dumps(reduce_bundle(args.bundle), separators=(",", ":")))
    return 0


if __name__ == "__main__":
    sys.exit(main())


def collect_reduced(gateways: dict[str, list[str]], out: Path, spec: Any, gateway_out: str, host_timeout: float,
                    gateway_timeout: float, fanout: int = 64, ssh_path: str = "ssh", ssh_options: list[str] | None = None,
                    gateway_python: str = "python3", gateway_ssh_path: str = "ssh") -> dict[str, Any]:
    """The reduced tree from the root: each gateway collects its hosts and answers one merged digest (see the
    module doc); the root merges them into `out`/merged-digest.json and judges it over its classes.
    `gateway_out`: where each gateway keeps its bundle ('{gateway}' is replaced by its name). Returns the
    timings ('answers': the last gateway's answer; 'merged'; 'judged'), the bytes received, the odd ranks
    and which gateway's bundle holds each host's raw files."""
    start = time.monotonic()
    gw_cmd = {gw: shell_command(gateway_argv(gateway_python, hosts, gateway_out.replace("{gateway}", gw), spec, fanout,
                                             host_timeout, gateway_ssh_path, ssh_options)) for gw, hosts in gateways.items()}
    runs = run_ssh(list(gateways), lambda gw: gw_cmd[gw], [], max(1, len(gateways)), gateway_timeout, None, ssh_path)
    answered = time.monotonic()
    parts, refused, where, received = [], [], {}, 0
    for gw, run in runs.items():
        text = "".join(run.stdout).strip()
        received += len(text)
        try:
            merged, rest = read_gateway_answer(text)
        except ValueError as err:
            refused.append(f"{gw}: {err} (exit {run.returncode}{', timed out' if run.timed_out else ''}; {run.stderr_tail()})")
            continue
        parts.append(merged)
        where[gw] = rest
    root = merge_all(parts)
    out.mkdir(parents=True, exist_ok=True)
    merged_at = time.monotonic()
    judged = judge_classes(root)
    judged_at = time.monotonic()
    (out / "merged-digest.json").write_text(json.dumps(root, separators=(",", ":")))
    (out / "gateways.json").write_text(json.dumps({"gateways": where, "refused": refused}, separators=(",", ":")))
    return {"phases": {"answers": round(answered - start, 3), "merged": round(merged_at - start, 3),
                       "judged": round(judged_at - start, 3)},
            "bytes_received": received, "hosts": root["hosts"], "ranks": root["ranks"], "refused": refused,
            "classes": judged.summary(), "odd_ranks": fold_ranks(judged.ranks)[:2000], "gateways": where}

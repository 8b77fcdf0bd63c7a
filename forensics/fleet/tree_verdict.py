"""The root's half of the reduced tree: from the gateways' merged digests to the judges' verdict.

Why apart from forensics.fleet.reduce: that module is what every gateway starts (`gateway`, `fetch`), and
the judges and the knowledge base would add about 0.25 s to each start on machines busy collecting; the root
alone needs them, so they are imported here, at the top, and the gateways never load this module.

`tree_verdict`: the root runs `python -m forensics.fleet.reduce fetch --bundle DIR --ranks RANGES` on only the
gateways whose rank set holds an odd rank; each sends the raw files of its hosts that hold them (at most
MAX_FETCH_HOSTS), the root files them into its own bundle, records the ranks left on the gateways as judged
from the merged digest, and the normal pipeline judges that bundle (`tree_analysis`).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any, Callable

from forensics import safefs
from forensics.bundle.merged_digest import MERGED_DIGEST
from forensics.bundle.merge import HostPart, merge_bundles
from forensics.bundle.writer import write_manifest
from forensics.fleet.hosts import fold as fold_hosts
from forensics.fleet.reduce import MAX_FETCH_HOSTS, fetch_raw
from parsers.pipeline.analyze import analyze
from parsers.scale.merge import (ClassSummary, Intervals, count, difference, fold as fold_ranks, holds, meets, ranks_of,
                                 union)
from parsers.model.events import MAX_RANKS


def ranks_to_fetch(merged: ClassSummary, judged: Any) -> Intervals:
    """The ranks whose hosts' raw files the root fetches: the class judgement's odd ones out; when the classes
    are not the whole job (caps), every rank with an oddity of its own (flags, exceptions, exits, findings)."""
    if judged.complete:
        return judged.ranks
    odd: Intervals = []
    for iv in merged.flags.values():
        odd = union(odd, iv)
    for item in (*merged.exceptions, *merged.exits, *merged.host_findings):
        if item.rank is not None:
            odd = union(odd, [[item.rank, item.rank]])
    return odd


def tree_verdict(reduced: dict[str, Any], gateways: dict[str, list[str]], out: Path, gateway_out: str, timeout: float,
                 ssh_path: str = "ssh", ssh_options: list[str] | None = None, gateway_python: str = "python3",
                 max_hosts: int = MAX_FETCH_HOSTS, say: Callable[[str], None] | None = None,
                 kb: Any = None) -> tuple[Any, dict[str, Any]]:
    """The judges' verdict of the reduced tree: the raw files of the odd ranks' hosts fetched from the gateways
    that keep them (`fetch_raw`: at most `max_hosts`) into `out` as a job bundle, the ranks the gateways hold and
    the root did not fetch recorded as such (not missing: the merged digest judged them like the others), the
    tree's merged digest beside them; then the normal analysis (parsers.pipeline.analyze, digest first) of that bundle.
    Returns (the Analysis, what was fetched how)."""
    say = say or (lambda line: None)
    start = time.monotonic()
    root, judged = reduced["merged_digest"], reduced["judgement"]
    ranges = ranks_to_fetch(root, judged)
    named = set(judged.hosts) | {h for h, _ in judged.processes if isinstance(h, str)}
    if not ranges and not named and root.stacks:  # nobody odd: one rank of the largest class speaks for it
        largest = max(root.stacks.values(), key=lambda c: count(c.ranks))
        ranges = [[largest.ranks[0][0], largest.ranks[0][0]]] if largest.ranks else []
    answered = {gw: hosts for gw, hosts in gateways.items() if gw in reduced["gateways"]}
    asked = {gw: hosts for gw, hosts in answered.items()  # only gateways that hold a wanted rank or a named host
             if meets(reduced["gateways"][gw].get("ranks") or [], ranges) or named & set(hosts)}
    parts: list[HostPart] = []
    problems: list[str] = []
    received: list[int] = []
    if asked:
        say(f"fetching the raw files of ranks {fold_ranks(ranges) or 'none'}"
            + (f" and hosts {fold_hosts(sorted(named))}" if named else "") + f" from {len(asked)} gateway(s)")
        parts, problems = fetch_raw(asked, gateway_out, ranges, named, out, timeout, ssh_path, ssh_options,
                                    gateway_python, max_hosts, received)
    fetched_at = time.monotonic()
    held = root.summarised
    # the ranks the gateways hold are never listed missing (not listed, then dropped: 99,992 of them at 100k)
    manifest = merge_bundles(out, parts, command=list(sys.argv), collected_elsewhere=held)
    manifest.missing = [m for m in manifest.missing if not holds(m.rank, held)]  # a fetched host's own list
    fetched_ranks = {r.rank for r in manifest.ranks if holds(r.rank, held)}
    on_gateways = count(held) - len(fetched_ranks)
    if on_gateways:
        manifest.notes.append(f"{on_gateways} rank(s) were collected and kept on the gateways "
                              f"({fold_hosts(sorted(answered))}), judged from the merged digest "
                              f"(merged-digest.json): their raw files were not fetched")
    for line in problems[:50]:
        manifest.notes.append(f"fetch: {line}")
    write_manifest(out, manifest)
    # the whole job's, not the fetched hosts'
    safefs.replace_file(out / MERGED_DIGEST, json.dumps(root.to_json(), separators=(",", ":")))
    say(f"fetched {len(parts)} host(s) in {fetched_at - start:.1f} s"
        + (f"; {len(problems)} problem(s): {problems[0]}" if problems else "") + "; analysing")
    result = tree_analysis(out, kb, held)
    done = time.monotonic()
    info = {"hosts_fetched": [p.host for p in parts], "fetch_problems": problems[:50],
            "ranks_asked": fold_ranks(ranges), "ranks_on_gateways": on_gateways, "gateways_asked": sorted(asked),
            "bytes_fetched": sum(received),
            "phases": {"fetched": round(fetched_at - start, 3), "verdict": round(done - start, 3)}}
    return result, info


def tree_analysis(bundle: Path, kb: Any, held: Intervals) -> Any:
    """parsers.pipeline.analyze's pipeline over the root's bundle (digest first; every rank the verdict names read raw),
    told one thing the bundle cannot say: the ranks in `held` were collected, on the gateways, and judged from
    the merged digest. Their absence from the root's files is not absence from the job: no judge offers them as
    absent (at 4,096 ranks a logs judge would otherwise offer 4,088), and the coverage counts them."""
    # a gateway's rank sets are data: no rank past the largest job believed (MAX_RANKS) is listed one by one
    return analyze(bundle, kb, elsewhere=ranks_of(difference(held, [[MAX_RANKS, 1 << 31]])))  # as `forensics analyze`

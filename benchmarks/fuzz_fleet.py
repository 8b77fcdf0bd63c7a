"""Benchmark (issue 40): the structure-aware fuzzer over fleet evidence at 1,024+ ranks.

benchmarks/fuzz_structured.py mutates files of at most 8 ranks. Here the evidence is a fleet's: one 1,024-rank
bundle (128 hosts x 8, benchmarks/bundle_scale.py's job, rank 43 stopped, a stray RANK=43 on another host;
benchmarks/fleet_lies.py) with every host's digest, made once per process. Each input mutates one piece:
- a host digest (JSON nodes swapped by fuzz_structured's `_swap`, summaries claiming other hosts' ranks, counts
  of other types, NaN/Infinity, peers at 2^31-1, 10^5 summaries), read as the focus reads it (`read_digest` with
  the host's own processes, `from_host`), merged with the 127 others and judged over classes (`judge_classes`),
  and its files' evidence decoded as digest first does (`decode_parsed`);
- a gateway's answer (a merged digest of 1,024 to 131,072 ranks, mutated the same way), read by the root
  (`read_gateway_answer`), merged with a good one and judged, as `collect --tree` does (`ranks_to_fetch`);
- one input in FULL_EVERY: the whole `analyze` of the bundle with the mutated digest in place (text and JSON).
Each runs in a forked child under 1 GiB and 5 s; a failure is an uncaught exception (DigestError and ValueError
are answers), a run over 5 s, or more memory. Seeded: input i depends on (seed, i) only.

    PYTHONPATH=. python benchmarks/fuzz_fleet.py --inputs 2000 --seed 1 [--start S --stride N] [--state F]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import random
import resource
import signal
import sys
import tempfile
import time
import traceback
from pathlib import Path

from benchmarks.bundle_scale import write_bundle
from benchmarks.fleet_lies import add_stray, stop_rank, write_digests
from benchmarks.fuzz_structured import _bounded_dumps, _swap, forked
from parsers import knowledge
from parsers.scale.digest import DIGEST_NAME, DigestError, decode_parsed, own_processes, read_digest
from parsers.scale.classes import judge_classes
from parsers.scale.merge import ClassSummary, from_host, merge, merge_all
from parsers.gather.source import open_source
from forensics.fleet.reduce import ANSWER, read_gateway_answer
from forensics.fleet.tree_verdict import ranks_to_fetch
from forensics.report.output import json_text
from forensics.report.text import render_view
from forensics.report.view import build_view
from forensics.report.words import analyze

RANKS, PER_HOST = 1024, 8
TIME_LIMIT_S, MEMORY_LIMIT = 5, 1 << 30
FULL_EVERY = 64  #: one input in this many runs the whole analysis (about 1 s; the rest take milliseconds)
FAILURES = ("exception", "timeout", "died", "slow", "memory")
_STARTED: list[float] = [0.0]  #: when the child's run began (after its input was made)


class Fleet:
    """The base bundle, its hosts' digests (bytes) and their merged parts, made once per process."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.kb = knowledge.load(use_env=False)
        write_bundle(root, RANKS, PER_HOST, 43)
        stop_rank(root, 43)
        add_stray(root, "node00010", 43)
        write_digests(root, self.kb)
        with open_source(root) as src:
            self.own = own_processes(src.manifest.ranks)
            self.hosts = [(rec.host, root / rec.dir / DIGEST_NAME) for rec in src.manifest.hosts]
        self.raw = {host: path.read_bytes() for host, path in self.hosts}
        self.parts = {host: _part(read_digest(path, self.own[host]), host) for host, path in self.hosts}
        self.merged = merge_all(self.parts.values())
        #: each host's 127 others merged once (merging is associative: the input's own part joins them per run)
        self.others = {host: merge_all(p for h, p in self.parts.items() if h != host) for host, _ in self.hosts}
        #: gateway answers of 1,024, 8,192 and 131,072 ranks: the fleet's hosts again, their ranks shifted up
        self.answers = [self.merged] + [merge_all(_shifted(read_digest(path, self.own[host]), host, copy)
                                                  for copy in range(copies) for host, path in self.hosts)
                                        for copies in (8, 128)]


def _shifted(dig, host: str, copy: int) -> ClassSummary:
    """Host `host`'s part as copy `copy` of the fleet: its ranks moved up by copy x RANKS, its name made new."""
    ranks = [dataclasses.replace(r, rank=r.rank + copy * RANKS) if r.rank is not None else r for r in dig.ranks]
    return from_host(f"{host}c{copy}", ranks, dig.host_findings)


def _part(dig, host: str) -> ClassSummary:
    return from_host(host, dig.ranks, dig.host_findings)


def _lie(doc: dict, rng: random.Random) -> dict:
    """What a lying host writes: summaries of others' ranks, counts of other types, extreme peers and sizes."""
    ranks = doc.get("ranks") if isinstance(doc.get("ranks"), list) else []
    op = rng.randrange(5)
    if op == 0:
        fake = {"rank": 0, "pid": 1, "state": "T", "stack": {"kind": "collective"}, "flags": ["frozen"]}
        doc["ranks"] = ranks + [dict(fake, rank=r, pid=r) for r in range(rng.choice([8, 64, 2000, 100_000]))]
    elif op == 1 and ranks:
        r = rng.choice(ranks)
        if isinstance(r, dict):
            r[rng.choice(["rank", "pid", "comms", "exits", "flags", "recorder_waits", "waits_on", "recorder"])] = \
                rng.choice([{}, [], float("inf"), float("nan"), 2 ** 31 - 1, -1, [[1, 2147483647, 3]], "x" * 5000])
    elif op == 2:
        doc["world_size"] = rng.choice([float("inf"), float("nan"), [1, 2], 1 << 20, 10 ** 30])
    elif op == 3 and ranks and isinstance(ranks[0], dict):
        ranks[0]["recorder_waits"] = [["0x1", 2147483647, "wait", 2 ** 63]] * rng.choice([1, 100])
    else:
        doc["host"] = rng.choice(["node00000", "", "x" * 10_000, 7])
    return doc


def _dumps(doc) -> str | None:
    """The generator's own JSON text of a mutated tree, or None where it cannot write one (2,000 levels deep
    is past json's encoder; the input is then the tree before the swap)."""
    try:
        return _bounded_dumps(doc)
    except (ValueError, RecursionError, OverflowError):
        return None


def _mutated(data: bytes, rng: random.Random) -> bytes:
    doc = json.loads(data)
    doc = _lie(doc, rng) if rng.random() < 0.5 else doc
    if len(doc.get("ranks") or ()) > 1000:  # a host claiming every rank: written as is (C encoder, fast)
        return json.dumps(doc, default=str).encode()
    text = _dumps(doc)
    for _ in range(rng.randint(0, 3)):
        text = _dumps(_swap(doc, rng)) or text
    return (text or data.decode()).encode("utf-8", "surrogatepass")


def run_digest(fleet: Fleet, host: str, data: bytes) -> None:
    """A mutated host digest through what the focus and digest first do with it."""
    path = Path(tempfile.mkdtemp(prefix="fzf-")) / DIGEST_NAME
    path.write_bytes(data)
    try:
        dig = read_digest(path, fleet.own[host])
    except DigestError:
        return
    judge_classes(merge(fleet.others[host], _part(dig, host)))
    for rel, entry in list(dig.files.items())[:64]:
        try:
            decode_parsed(entry.get("parsed") or {}, "", rel, host)
        except DigestError:
            pass


def run_answer(fleet: Fleet, data: bytes, rng: random.Random) -> None:
    """A gateway's answer of 1,024-131,072 ranks (the merged digest shifted up), mutated, read by the root."""
    merged = json.loads(json.dumps(rng.choice(fleet.answers).to_json()))
    doc = {"format": ANSWER, "version": 1, "merged": merged, "bundle": "/b", "seconds": 1.0, "host_groups": []}
    text = (_dumps(_swap(doc, rng)) if rng.random() < 0.9 else None) or _dumps(doc) or "{}"
    try:
        got, _rest = read_gateway_answer(text)
    except ValueError:
        return
    whole = merge(got, fleet.merged)
    ranks_to_fetch(whole, judge_classes(whole))


def run_full(fleet: Fleet, host: str, data: bytes) -> None:
    """The whole analysis with the mutated digest in place (restored by the parent)."""
    (fleet.root / f"hosts/{host}" / DIGEST_NAME).write_bytes(data)
    result = analyze(fleet.root, fleet.kb)
    view = build_view(result.verdict, source=str(fleet.root), evidence=result.evidence, logs=result.logs)
    render_view(view, show_tree=True, width=100).encode("utf-8")
    json_text("analyze", view.to_json(), True).encode("utf-8")


def make_and_run(fleet: Fleet, seed: int, index: int) -> str:
    """Input `index` of run `seed`, made and run in this (child) process (the time limit starts once it is
    made: the generator's own JSON writing is not the code under test); returns what it was."""
    rng = random.Random(f"fleet:{seed}:{index}")
    host, _path = rng.choice(fleet.hosts)
    data = _mutated(fleet.raw[host], rng)
    signal.alarm(TIME_LIMIT_S)
    _STARTED[:] = [time.monotonic()]
    if index % FULL_EVERY == FULL_EVERY - 1:
        run_full(fleet, host, data)
        return f"full analyze, digest of {host}"
    if rng.random() < 0.3:
        run_answer(fleet, data, rng)
        return "gateway answer"
    run_digest(fleet, host, data)
    return f"digest of {host}"


def _child(fleet: Fleet, seed: int, index: int, out: int) -> None:
    """In the forked child: input `index` made and run under the limits; one JSON line to `out`."""
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))
    signal.alarm(8 * TIME_LIMIT_S)  # the generator's own bound; the run's is set once the input is made
    try:
        status = {"outcome": "ok", "input": make_and_run(fleet, seed, index)}
        status["run_s"] = round(time.monotonic() - _STARTED[0], 3)
    except BaseException as err:  # noqa: BLE001 - the point: any escape is a finding
        status = {"outcome": "exception", "type": type(err).__name__,
                  "trace": "".join(traceback.format_exception(err))[-3000:]}
    os.write(out, (json.dumps(status) + "\n").encode())
    os._exit(0)


def run_one(fleet: Fleet, seed: int, index: int) -> dict:
    """Fork, run input `index`, judge: outcome, seconds, peak RSS (MiB); the base digest restored after."""
    result = forked(lambda wr: _child(fleet, seed, index, wr))
    took = result["seconds"]
    for host, path in fleet.hosts:  # a full run wrote one digest in place
        if index % FULL_EVERY == FULL_EVERY - 1 and path.read_bytes() != fleet.raw[host]:
            path.write_bytes(fleet.raw[host])
    if result["outcome"] == "ok" and result.get("run_s", took) > TIME_LIMIT_S:
        result["outcome"] = "slow"
    if result["rss_mib"] * (1 << 20) > MEMORY_LIMIT:
        result["outcome"] = "memory"
    return result


def _keep(fleet: Fleet, seed: int, index: int, keep: Path) -> None:
    """The failing input's mutated digest (made again: input i depends on (seed, i) only), for a test to reuse."""
    rng = random.Random(f"fleet:{seed}:{index}")
    host, _path = rng.choice(fleet.hosts)
    keep.mkdir(parents=True, exist_ok=True)
    (keep / f"fleet{index}-{host}-{DIGEST_NAME}").write_bytes(_mutated(fleet.raw[host], rng))


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--inputs", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--start", type=int, default=0)
    ap.add_argument("--stride", type=int, default=1)
    ap.add_argument("--budget-s", type=float, default=None)
    ap.add_argument("--state", type=Path, default=None, help="JSON file the counts and failures are written to")
    ap.add_argument("--keep", type=Path, default=None, help="folder where each failing input's mutated digest is kept")
    ap.add_argument("--keep-heavy-mib", type=float, default=None, help="(scripts/device/fuzz_parallel.sh's; unused)")
    ap.add_argument("--keep-slow-s", type=float, default=None, help="list inputs slower than this (state 'over')")
    args = ap.parse_args(argv)
    os.environ["FORENSICS_STRICT_READERS"] = "1"
    sys.set_int_max_str_digits(0)
    state = {"seed": args.seed, "start": args.start, "stride": args.stride, "done": 0, "counts": {}, "failures": [],
             "slowest": [0.0, -1], "max_rss_mib": 0.0, "heaviest": [0.0, -1], "over": [], "next": args.start}
    with tempfile.TemporaryDirectory(prefix="fuzz-fleet-") as tmp:
        t = time.monotonic()
        fleet = Fleet(Path(tmp) / "bundle")
        state["setup_s"] = round(time.monotonic() - t, 1)
        began = time.monotonic()
        for index in range(args.start, args.start + args.inputs * args.stride, args.stride):
            if args.budget_s and time.monotonic() - began > args.budget_s:
                break
            result = run_one(fleet, args.seed, index)
            state["counts"][result["outcome"]] = state["counts"].get(result["outcome"], 0) + 1
            state["done"] += 1
            state["slowest"] = max(state["slowest"], [result.get("run_s", result["seconds"]), index])
            state["max_rss_mib"] = max(state["max_rss_mib"], result["rss_mib"])
            state["heaviest"] = max(state["heaviest"], [result["rss_mib"], index])
            state["next"] = index + args.stride
            if args.keep_slow_s and result.get("run_s", 0) > args.keep_slow_s and result["outcome"] not in FAILURES:
                state["over"].append([result["run_s"], index])
            if result["outcome"] in FAILURES:
                state["failures"].append({"index": index, **result})
                if args.keep:
                    _keep(fleet, args.seed, index, args.keep)
                print(f"FAIL {index}: {result['outcome']} {result.get('type', '')} {result['seconds']} s", flush=True)
        state["run_s"] = round(time.monotonic() - began, 1)
    state["inputs_per_s"] = round(state["done"] / max(state["run_s"], 1e-9), 1)
    if args.state:
        args.state.write_text(json.dumps(state, indent=1))
    print(json.dumps({k: v for k, v in state.items() if k != "failures"}), f"failures {len(state['failures'])}")
    return state


if __name__ == "__main__":
    main()

"""Benchmark (issue 31): a structure-aware fuzzer over real fixtures, through the whole analysis.

Each input is a small folder: one real fixture mutated by what its format is made of (numbers
pushed to extremes, lines repeated, NULs, very long lines, truncation; JSON nodes swapped for
other types, huge integers, deep nesting; Flight Recorder pickles rebuilt with swapped types
and shared references; recorder binaries with header fields set to extremes), plus up to two
untouched neighbours from the same fixture folder, so the judges see context. Each input runs
in a forked child, as `forensics analyze`, `analyze --json` and `report` would run it (the
verdict text encoded as UTF-8, the JSON, the HTML report), under RLIMIT_AS 1 GiB and a 5 s
alarm. A failure is an uncaught exception (a reader's own defect raises: the child runs with
FORENSICS_STRICT_READERS=1), a run over 5 s, or a peak RSS over 1 GiB; a clear error
(InputError, ForensicsError) is an answer, not a failure.

Seeded and resumable: input i depends only on (seed, i); `--state FILE` keeps the next index,
the counts and every failure (its folder is kept under `--keep`).

    PYTHONPATH=. python benchmarks/fuzz_structured.py --inputs 1000 --seed 1 --state /tmp/fz.json
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import random
import resource
import shutil
import signal
import struct
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Callable

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "tests" / "fixtures"
TIME_LIMIT_S = 5
MEMORY_LIMIT = 1 << 30
MAX_SEED_BYTES = 256 * 1024
MAX_INPUT_BYTES = 32 << 20  #: a mutated file stays below this (repetitions compound)
EXTREMES = ["0", "-1", "2147483647", "2147483648", "4000000000", "18446744073709551616", "9" * 30, "9" * 4301,
            "-9223372036854775809", "16777216", "1" + "0" * 400]


# ----------------------------------------------------------------------------- seeds


def seed_files(limit_per_dir: int = 6) -> list[Path]:
    """Real files of every kind the fixtures hold (a few per folder, small enough to mutate fast)."""
    out: list[Path] = []
    for folder, _dirs, files in sorted(os.walk(FIXTURES)):
        picked = [Path(folder) / f for f in sorted(files)
                  if (Path(folder) / f).is_file() and 0 < (Path(folder) / f).stat().st_size <= MAX_SEED_BYTES]
        out += picked[:limit_per_dir]
    return out


def _kind(path: Path, data: bytes) -> str:
    if data[:1] == b"\x80":
        return "pickle"
    if data[:8] == b"HFNCREC\0":
        return "recorder"
    if data.lstrip()[:1] in (b"{", b"["):
        return "json"
    return "text"


# ----------------------------------------------------------------------------- mutations


def mutate_text(data: bytes, rng: random.Random) -> bytes:
    lines = data.split(b"\n")
    for _ in range(rng.randint(1, 3)):
        i = rng.randrange(len(lines))
        op = rng.randrange(8)
        if op == 0:  # a number pushed to an extreme
            import re

            nums = list(re.finditer(rb"-?\d+", lines[i]))
            if nums:
                m = rng.choice(nums)
                lines[i] = lines[i][:m.start()] + rng.choice(EXTREMES).encode() + lines[i][m.end():]
        elif op == 1:  # a line repeated (the input stays under MAX_INPUT_BYTES: the generator's memory, not the test's)
            k = rng.choice([2, 100, 5000, 50000])
            lines[i:i + 1] = [lines[i]] * max(1, min(k, MAX_INPUT_BYTES // (len(lines[i]) + 1)))
        elif op == 2:  # NULs
            pos = rng.randrange(len(lines[i]) + 1)
            lines[i] = lines[i][:pos] + b"\0" * rng.choice([1, 16, 70000]) + lines[i][pos:]
        elif op == 3:  # a very long line
            piece = lines[i][:64] or b"a"
            lines[i] = lines[i] + piece * rng.choice([1000, 20000])
        elif op == 4:  # a run of one character where a field was (regex pumps)
            pos = rng.randrange(len(lines[i]) + 1)
            lines[i] = lines[i][:pos] + rng.choice([b" ", b"0", b"a", b"\t", b"[W", b":",
                                                    b"-"]) * rng.choice([2000, 80000]) + lines[i][pos:]
        elif op == 5:  # bytes that are no UTF-8 / escapes / surrogates
            pos = rng.randrange(len(lines[i]) + 1)
            lines[i] = lines[i][:pos] + rng.choice([b"\xff\xfe", b"\xed\xa0\x80", b"\x1b[2J", b"\r",
                                                    b"\x85"]) + lines[i][pos:]
        elif op == 6:  # a line of another file's shape spliced in
            lines.insert(i, rng.choice(lines))
        else:  # lines dropped
            del lines[i:i + rng.randint(1, 50)]
            if not lines:
                lines = [b""]
    if sum(len(x) + 1 for x in lines) > MAX_INPUT_BYTES:
        lines = [x[:MAX_INPUT_BYTES] for x in lines[:64]]
    out = b"\n".join(lines)[:MAX_INPUT_BYTES]
    if rng.random() < 0.15:
        out = out[:rng.randrange(len(out) + 1)]  # truncated
    return out


def _extreme_value(rng: random.Random):
    return rng.choice([10 ** 400, -(10 ** 30), (1 << 31) - 1, 1 << 64, 4_000_000_000, 16777216, -1, 0, 1e308,
                       "9" * 5000, "", "\udcff", "a\x00b", None, True, [], {}, [[1] * 50] * 50, "x" * 100_000])


def _swap(node, rng: random.Random, depth: int = 0):
    """A random node of a decoded JSON/pickle tree replaced by a value of another type or size."""
    if depth > 12 or rng.random() < 0.25:
        op = rng.randrange(6)
        if op == 0:
            return _extreme_value(rng)
        if op == 1:  # type swapped: dict <-> list, scalar -> container
            if isinstance(node, dict):
                return list(node.items())
            if isinstance(node, list):
                return {str(i): v for i, v in enumerate(node[:100])}
            return [node]
        if op == 2:  # deep nesting
            out = node
            for _ in range(rng.choice([50, 2000])):
                out = [out]
            return out
        if op == 3 and isinstance(node, list) and node:  # an element repeated (one shared object)
            return node + [node[0]] * rng.choice([10, 10_000, 300_000])
        if op == 4 and isinstance(node, (int, float)) and not isinstance(node, bool):
            return rng.choice([10 ** 400, -node, node * 10 ** 12,
                               float("inf") if isinstance(node, float) else node + 1])
        return node
    if isinstance(node, dict) and node:
        key = rng.choice(list(node))
        node = dict(node)
        if rng.random() < 0.1:
            del node[key]
        else:
            node[key] = _swap(node[key], rng, depth + 1)
        return node
    if isinstance(node, list) and node:
        node = list(node)
        i = rng.randrange(len(node))
        node[i] = _swap(node[i], rng, depth + 1)
        return node
    return _extreme_value(rng)


def _bounded_dumps(tree) -> str | None:
    """json.dumps(tree, default=str, allow_nan=True), or None once the text passes MAX_INPUT_BYTES: encoded
    piece by piece, so a shared object repeated many times (written out in full each time) is stopped before
    it fills the generator's memory (seed 3, input 183: a py-spy JSON grew past 7 GB)."""
    out, size = [], 0
    for piece in json.JSONEncoder(default=str, allow_nan=True).iterencode(tree):
        size += len(piece)
        if size > MAX_INPUT_BYTES:
            return None
        out.append(piece)
    return "".join(out)


def mutate_json(data: bytes, rng: random.Random) -> bytes:
    try:
        tree = json.loads(data)
    except ValueError:
        return mutate_text(data, rng)
    for _ in range(rng.randint(1, 3)):
        tree = _swap(tree, rng)
    sys.set_int_max_str_digits(0)
    try:
        text = _bounded_dumps(tree)
    except (ValueError, RecursionError, OverflowError):
        return mutate_text(data, rng)
    if text is None:  # one object referenced 300,000 times is written out 300,000 times: past the input cap
        return mutate_text(data, rng)
    out = text.encode("utf-8", "surrogatepass")
    return out[:rng.randrange(len(out) + 1)] if rng.random() < 0.1 else out


def mutate_pickle(data: bytes, rng: random.Random) -> bytes:
    """Our own fixture (trusted) decoded, mutated, and written again: swapped types, huge integers and one
    object referenced many times (the pickle memo writes it once, then references)."""
    try:
        tree = pickle.loads(data)  # noqa: S301 - a fixture of this repository, never an input
    except Exception:  # noqa: BLE001
        return mutate_text(data, rng)
    for _ in range(rng.randint(1, 3)):
        tree = _swap(tree, rng)
    try:
        out = pickle.dumps(tree, protocol=rng.choice([2, 4, 5]))
    except (RecursionError, ValueError):
        return data
    if rng.random() < 0.1:
        out = out[:rng.randrange(len(out) + 1)]
    return out


def mutate_binary(data: bytes, rng: random.Random) -> bytes:
    """Recorder state files: 32- and 64-bit fields of the header and records set to extremes, or bytes flipped."""
    buf = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        if len(buf) < 8:
            break
        off = rng.randrange(0, min(len(buf) - 8, 512 if rng.random() < 0.7 else len(buf) - 8)) & ~3
        if rng.random() < 0.5:
            struct.pack_into("<I", buf, off, rng.choice([0, 1, 0x7FFFFFFF, 0xFFFFFFFF, 0x80000000]))
        else:
            struct.pack_into("<Q", buf, off, rng.choice([0, (1 << 63) - 1, (1 << 64) - 1, 1 << 40]))
    out = bytes(buf)
    return out[:rng.randrange(len(out) + 1)] if rng.random() < 0.1 else out


MUTATORS = {"text": mutate_text, "json": mutate_json, "pickle": mutate_pickle, "recorder": mutate_binary}


_BYTES: dict[Path, bytes] = {}  #: fixture contents, read once per process (the fixtures do not change during a run)
_SIBLINGS: dict[Path, list[Path]] = {}  #: a folder's files that may go beside a mutated one


def _fixture(path: Path) -> bytes:
    data = _BYTES.get(path)
    if data is None:
        data = _BYTES[path] = path.read_bytes()
    return data


def _siblings(folder: Path) -> list[Path]:
    found = _SIBLINGS.get(folder)
    if found is None:
        found = _SIBLINGS[folder] = [p for p in sorted(folder.iterdir()) if p.is_file() and p.name != "manifest.json"
                                     and p.stat().st_size <= MAX_SEED_BYTES]
    return found


def make_input(seeds: list[Path], seed: int, index: int, folder: Path) -> str:
    """Write input `index` of run `seed` into `folder`; returns what it is (for the report). The fixtures'
    bytes and folder listings are read once per process (they were read and listed again for every input)."""
    rng = random.Random(f"{seed}:{index}")
    src = rng.choice(seeds)
    data = _fixture(src)
    kind = _kind(src, data)
    folder.mkdir(parents=True)
    (folder / src.name).write_bytes(MUTATORS[kind](data, rng))
    siblings = [p for p in _siblings(src.parent) if p != src]
    for sib in rng.sample(siblings, min(len(siblings), rng.choice([0, 1, 2]))):
        (folder / sib.name).write_bytes(_fixture(sib))
    return f"{src.relative_to(FIXTURES)} ({kind})"


# ----------------------------------------------------------------------------- one run


def _child(folder: Path, out: int) -> None:
    """In the forked child: the three outputs, each as the CLI makes it; writes one JSON line to `out`."""
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))
    signal.alarm(TIME_LIMIT_S)
    status = {"outcome": "ok"}
    try:
        from forensics.report.output import json_text
        from forensics.errors import ForensicsError
        from forensics.report.postmortem.session import PostMortem
        from forensics.report.text import render_view
        from forensics.report.view import build_view
        from parsers.pipeline.analyze import analyze
        from parsers.input.errors import InputError

        try:
            result = analyze(folder, _KB[0] if _KB else None)
            verdict = result.verdict
            view = build_view(verdict, source=str(folder), evidence=result.evidence, logs=result.logs)
            render_view(view, show_tree=True, width=100).encode("utf-8")
            json_text("analyze", view.to_json(), True).encode("utf-8")
            pm = PostMortem(verdict, source=str(folder), evidence=result.evidence, logs=result.logs)
            pm.report(folder.parent / (folder.name + ".html"))
        except (InputError, ForensicsError) as err:
            status = {"outcome": "refused", "why": str(err)[:200]}
    except BaseException as err:  # noqa: BLE001 - the point: any escape is a finding
        status = {"outcome": "exception", "type": type(err).__name__,
                  "trace": "".join(traceback.format_exception(err))[-3000:]}
    os.write(out, (json.dumps(status) + "\n").encode())
    os._exit(0)


_KB: list = []  #: the knowledge base, loaded once in the parent (children share it by fork)


def preload() -> None:
    """Import what a child runs and load the knowledge base before forking: each child then starts
    warm (an import per child cost more than most analyses)."""
    import forensics.report.output  # noqa: F401
    import forensics.report.postmortem.loader  # noqa: F401
    import forensics.report.postmortem.session  # noqa: F401
    import forensics.report.text  # noqa: F401
    import parsers.pipeline.analyze  # noqa: F401
    # what the report imports only when it is first drawn (PostMortem's show_* and report): every child
    # imported these again, about 0.1-0.5 s of each input's time
    import forensics.report.graph  # noqa: F401
    import forensics.report.html  # noqa: F401
    import forensics.report.stacktree  # noqa: F401
    import forensics.report.style  # noqa: F401
    import forensics.report.timeline  # noqa: F401
    import parsers.model.ranges  # noqa: F401
    import parsers.stacks.tree  # noqa: F401
    from parsers import knowledge

    _KB[:] = [knowledge.load()]


def forked(child: Callable[[int], None]) -> dict:
    """Run `child(write_fd)` in a forked process (it writes one JSON line and exits); its result, or how it
    died ('timeout' for the alarm), with seconds and peak RSS (MiB). benchmarks/fuzz_fleet.py runs its inputs so."""
    rd, wr = os.pipe()
    t = time.monotonic()
    pid = os.fork()
    if pid == 0:
        os.close(rd)
        try:
            child(wr)
        finally:
            os._exit(1)
    os.close(wr)
    with os.fdopen(rd, "rb") as pipe:
        raw = pipe.read()
    _pid, status, usage = os.wait4(pid, 0)
    try:
        result = json.loads(raw.decode().strip().splitlines()[-1])
    except (ValueError, IndexError):
        sig = os.WTERMSIG(status) if os.WIFSIGNALED(status) else None
        result = {"outcome": "timeout" if sig == signal.SIGALRM else "died", "signal": sig,
                  "code": os.WEXITSTATUS(status) if os.WIFEXITED(status) else None}
    result.update(seconds=round(time.monotonic() - t, 3), rss_mib=round(usage.ru_maxrss / 1024, 1))
    return result


def run_one(folder: Path) -> dict:
    """Fork, run, and judge: outcome, seconds, peak RSS (MiB)."""
    result = forked(lambda wr: _child(folder, wr))
    took, rss_mib = result["seconds"], result["rss_mib"]
    if result["outcome"] in ("ok", "refused") and took > TIME_LIMIT_S:
        result["outcome"] = "slow"
    if rss_mib * (1 << 20) > MEMORY_LIMIT:
        result["outcome"] = "memory"
    return result


FAILURES = ("exception", "timeout", "died", "slow", "memory")


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--inputs", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--start", type=int, default=None, help="first input index (default: the state's next)")
    ap.add_argument("--state", type=Path, default=None, help="JSON file: resume from it, save to it")
    ap.add_argument("--keep", type=Path, default=None, help="folder where failing inputs are kept")
    ap.add_argument("--budget-s", type=float, default=None, help="stop after this many seconds")
    ap.add_argument("--stride", type=int, default=1,
                    help="run inputs start, start+stride, ... (N workers with starts S..S+N-1 and stride N share one "
                         "range, and what a budget leaves undone is at its end)")
    ap.add_argument("--keep-heavy-mib", type=float, default=None,
                    help="also keep (as heavyN under --keep) every input whose peak RSS passes this many MiB")
    ap.add_argument("--keep-slow-s", type=float, default=None,
                    help="also list (state 'over') and keep (as slowN under --keep) every input that takes longer than "
                         "this many seconds without failing: the tail below the limit, to find what nears it")
    args = ap.parse_args(argv)
    os.environ["FORENSICS_STRICT_READERS"] = "1"
    state = {"seed": args.seed, "next": 0, "counts": {}, "failures": [], "slowest": [0.0, None], "max_rss_mib": 0.0,
             "heaviest": [0.0, None]}
    if args.state and args.state.exists():
        state = json.loads(args.state.read_text())
        if state["seed"] != args.seed:
            raise SystemExit(f"{args.state} is for seed {state['seed']}, not {args.seed}")
    start = state["next"] if args.start is None else args.start
    stride = max(1, args.stride)
    state.update(start=start, stride=stride, done=0)
    seeds = seed_files()
    preload()
    began = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="fuzz-structured-") as tmp:
        for index in range(start, start + args.inputs * stride, stride):
            if args.budget_s and time.monotonic() - began > args.budget_s:
                break
            folder = Path(tmp) / f"in{index}"
            what = make_input(seeds, args.seed, index, folder)
            result = run_one(folder)
            state["counts"][result["outcome"]] = state["counts"].get(result["outcome"], 0) + 1
            if result["seconds"] > state["slowest"][0]:
                state["slowest"] = [result["seconds"], f"{index}: {what}"]
            state["max_rss_mib"] = max(state["max_rss_mib"], result["rss_mib"])
            if result["rss_mib"] > state.setdefault("heaviest", [0.0, None])[0]:
                state["heaviest"] = [result["rss_mib"], f"{index}: {what}"]
            if args.keep and args.keep_heavy_mib and result["rss_mib"] > args.keep_heavy_mib:
                shutil.copytree(folder, args.keep / f"heavy{index}", dirs_exist_ok=True)
            if args.keep_slow_s and result["seconds"] > args.keep_slow_s and result["outcome"] not in FAILURES:
                state.setdefault("over", []).append([result["seconds"], f"{index}: {what}"])
                if args.keep:
                    shutil.copytree(folder, args.keep / f"slow{index}", dirs_exist_ok=True)
            if result["outcome"] in FAILURES:
                state["failures"].append({"index": index, "input": what, **result})
                if args.keep:
                    shutil.copytree(folder, args.keep / f"in{index}", dirs_exist_ok=True)
                print(f"FAIL {index} {what}: {result['outcome']} {result.get('type', '')} {result['seconds']} s",
                      flush=True)
            shutil.rmtree(folder, ignore_errors=True)
            shutil.rmtree(folder.parent / (folder.name + ".html"), ignore_errors=True)
            (folder.parent / (folder.name + ".html")).unlink(missing_ok=True)
            state["next"] = index + stride
            state["done"] += 1
            if args.state and (index % 20 == 0):
                args.state.write_text(json.dumps(state, indent=1))
    if args.state:
        args.state.write_text(json.dumps(state, indent=1))
    ran = sum(state["counts"].values())
    print(f"inputs run {ran} (next {state['next']}), outcomes {state['counts']}, failures {len(state['failures'])}, "
          f"slowest {state['slowest'][0]} s ({state['slowest'][1]}), max RSS {state['max_rss_mib']} MiB "
          f"({state['heaviest'][1]})")
    return state


if __name__ == "__main__":
    main()

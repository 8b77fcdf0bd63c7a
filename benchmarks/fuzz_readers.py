"""Benchmark: mutated real inputs through every reader (the registry's read of one file).

Goal (issue 16): 100,000 or more inputs, 0 exceptions out of the readers, and no input slow
enough to stall an analysis. Prints inputs tried, exceptions, the slowest input and its
time, with the same run's median as the baseline.

    PYTHONPATH=. python benchmarks/fuzz_readers.py [--inputs 100000] [--seed 1]
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import time
import traceback
from pathlib import Path

from benchmarks.fuzzing import mutate, seeds
from parsers import knowledge
from parsers.gather.evidence import read_file
from parsers.gather.source import FileRef


def run(inputs: int, seed: int, report_every: int = 0) -> dict:
    rng = random.Random(seed)
    base = seeds()
    kb_filter = knowledge.load(use_env=False).line_filter
    times: list[float] = []
    errors: list[str] = []
    slowest = (0.0, "")
    with tempfile.TemporaryDirectory() as tmp:
        for n in range(inputs):
            name, data = base[rng.randrange(len(base))]
            blob = mutate(data, rng)
            path = Path(tmp) / name
            path.write_bytes(blob)
            t = time.perf_counter()
            try:
                read_file(FileRef(path, name), kb_filter)
            except BaseException as err:  # noqa: BLE001 - the point is to see every escape
                errors.append(f"{name} #{n}: {type(err).__name__}: {err}\n{traceback.format_exc(limit=3)}")
            dt = time.perf_counter() - t
            times.append(dt)
            if dt > slowest[0]:
                slowest = (dt, f"{name} #{n} ({len(blob)} bytes)")
            if report_every and (n + 1) % report_every == 0:
                print(f"  {n + 1} inputs, {len(errors)} exceptions", flush=True)
    return {"inputs": inputs, "exceptions": errors, "median_s": statistics.median(times), "slowest": slowest}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--inputs", type=int, default=100_000)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    t = time.perf_counter()
    res = run(args.inputs, args.seed, report_every=10_000)
    took = time.perf_counter() - t
    print(f"inputs tried: {res['inputs']} in {took:.0f} s; exceptions: {len(res['exceptions'])} (goal 0)")
    print(f"slowest input: {res['slowest'][1]} took {res['slowest'][0]:.3f} s "
          f"({res['slowest'][0] / max(res['median_s'], 1e-9):.0f}x the median {res['median_s'] * 1e3:.2f} ms)")
    for e in res["exceptions"][:5]:
        print(e)
    return 0 if not res["exceptions"] else 1


if __name__ == "__main__":
    raise SystemExit(main())

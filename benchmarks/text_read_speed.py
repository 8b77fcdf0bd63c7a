"""Benchmark (issue 31): how fast analyze reads large text inputs (4-7 MB), as a ratio against a
baseline tree in the same run.

The fuzzer (fuzz_structured.py) grows real fixtures by repeating lines, lengthening lines and inserting
NUL/digit/blank runs; a 4-7 MB rank log, Flight Recorder analyzer report, `ras_verbose.txt` or markdown
file made that way took 3-5 s to read. This builds such files the same way from the same fixtures, runs
`parsers.pipeline.analyze.analyze` on a folder holding each one, and reports MB/s. With `--baseline TREE` (a checkout
of an older commit, e.g. `git worktree add /tmp/base main` or `git archive main | tar x -C /tmp/base`),
each input is also analyzed by that tree's code in a child process of the same run, and the ratio
(baseline seconds / this tree's seconds) is printed.

    PYTHONPATH=. python benchmarks/text_read_speed.py [--baseline /tmp/base] [--profile]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FIX = REPO / "tests" / "fixtures"
TARGET = 5 << 20

#: (name, fixture, how it is grown)
CASES = [
    ("rank-log lines repeated", "nccl_x2/mixed/kill/bundle/hosts/vm/rank0-pid1320/stderr.log", "cycle"),
    ("rank-log one line x50000", "nccl_x2/mixed/kill/bundle/hosts/vm/rank0-pid1320/stderr.log", "one"),
    ("rank-log long line", "nccl_x2/mixed/kill/bundle/hosts/vm/rank0-pid1320/stderr.log", "long"),
    ("rank-log digit/NUL runs", "nccl_x2/mixed/kill/bundle/hosts/vm/rank0-pid1320/stderr.log", "runs"),
    ("stdout lines repeated", "nccl_x2/mixed/kill/bundle/hosts/vm/rank0-pid1320/stdout.log", "cycle"),
    ("fr-report lines repeated", "fr_trace/chain.txt", "cycle"),
    ("fr-report one line", "fr_trace/chain.txt", "one"),
    ("ras_verbose lines repeated", "nccl_x2/mixed/kill/ras_verbose.txt", "cycle"),
    ("ras_verbose one line", "nccl_x2/mixed/kill/ras_verbose.txt", "one"),
    ("markdown lines repeated", "README.md", "cycle"),
    ("markdown long lines", "README.md", "long"),
]


def grow(data: bytes, how: str) -> bytes:
    """A 4-7 MB file made from `data` the ways the fuzzer grows one."""
    lines = data.split(b"\n")
    if how == "cycle":  # the whole file repeated: a long log of its own shape
        return b"\n".join(lines * (TARGET // max(1, len(data)) + 1))[: TARGET + (1 << 20)]
    if how == "one":  # one line repeated 50,000 times (mutate_text op 1): the first of 80+ bytes past the middle
        i = next((j for j in range(len(lines) // 2, len(lines)) if len(lines[j]) >= 80),
                 max(range(len(lines)), key=lambda j: len(lines[j])))
        k = min(50000, max(1, TARGET // (len(lines[i]) + 1)))
        return b"\n".join(lines[:i] + [lines[i]] * k + lines[i + 1:])
    if how == "long":  # every line 20,000 times its first 64 bytes longer (op 3), until the target
        out, size = [], 0
        for ln in lines * 100:
            ln = ln + (ln[:64] or b"a") * 20000 if size < TARGET else ln
            out.append(ln)
            size += len(ln)
            if size > TARGET:
                break
        return b"\n".join(out)
    if how == "runs":  # digit, NUL, blank and '[W' runs spliced into repeated lines (ops 2, 4)
        out, size, n = [], 0, 0
        while size < TARGET:
            for ln in lines:
                pos = len(ln) // 2
                run = [b"0" * 80000, b"\0" * 70000, b" " * 80000, b"[W" * 2000, b"" ][n % 5]
                n += 1
                ln = ln[:pos] + run + ln[pos:]
                out.append(ln)
                size += len(ln)
        return b"\n".join(out)
    raise ValueError(how)


def build(tmp: Path) -> list[tuple[str, Path, int]]:
    made = []
    for i, (name, rel, how) in enumerate(CASES):
        src = FIX / rel
        folder = tmp / f"case{i}"
        folder.mkdir()
        data = grow(src.read_bytes(), how)
        (folder / src.name).write_bytes(data)
        made.append((name, folder, len(data)))
    return made


_CHILD = """
import hashlib, json, sys, time
from pathlib import Path
from parsers import knowledge
from parsers.pipeline.analyze import analyze
kb = knowledge.load()
out = []
for folder in sys.argv[1:]:
    t = time.process_time()
    r = analyze(Path(folder), kb)
    took = time.process_time() - t
    said = json.dumps(r.verdict.to_dict(), sort_keys=True, default=str).encode()
    out.append([took, hashlib.sha256(said).hexdigest()[:16]])
print(json.dumps(out))
"""


def time_tree(tree: Path, folders: list[Path], repeat: int) -> tuple[list[float], list[str]]:
    """Best of `repeat` CPU seconds per folder (process time: the machine may be shared), analyzed by the code
    of `tree` in a child process, and a digest
    of each verdict (so a faster reader is shown to give the same answer)."""
    best = [float("inf")] * len(folders)
    digest = [""] * len(folders)
    env = dict(os.environ, PYTHONPATH=str(tree))
    for _ in range(repeat):
        done = subprocess.run([sys.executable, "-c", _CHILD, *map(str, folders)], capture_output=True, text=True,
                              env=env, cwd=str(tree), check=True)
        for i, (took, h) in enumerate(json.loads(done.stdout.strip().splitlines()[-1])):
            best[i] = min(best[i], took)
            digest[i] = h
    return best, digest


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--baseline", type=Path, help="an older tree to compare with in the same run")
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--profile", action="store_true", help="cProfile this tree on every case (top 25)")
    ap.add_argument("--only", type=int, nargs="*", help="case numbers to run (default: all)")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="text-read-") as tmp:
        cases = build(Path(tmp))
        if args.only is not None:
            cases = [cases[i] for i in args.only]
        folders = [f for _n, f, _s in cases]
        if args.profile:
            import cProfile
            import pstats

            from parsers import knowledge
            from parsers.pipeline.analyze import analyze
            kb = knowledge.load()
            prof = cProfile.Profile()
            prof.enable()
            for f in folders:
                analyze(f, kb)
            prof.disable()
            pstats.Stats(prof).sort_stats("tottime").print_stats(25)
            return
        now, now_digest = time_tree(REPO, folders, args.repeat)
        base, base_digest = time_tree(args.baseline, folders, args.repeat) if args.baseline else (None, None)
        total_mb = sum(s for _n, _f, s in cases) / 1e6
        print(f"{'input':30} {'MB':>5} {'s':>6} {'MB/s':>6}"
              + (f" {'base s':>7} {'base MB/s':>9} {'ratio':>6}" if base else ""))
        for i, (name, _f, size) in enumerate(cases):
            row = f"{name:30} {size / 1e6:5.1f} {now[i]:6.2f} {size / 1e6 / now[i]:6.2f}"
            if base:
                row += f" {base[i]:7.2f} {size / 1e6 / base[i]:9.2f} {base[i] / now[i]:6.1f}"
                row += "" if base_digest[i] == now_digest[i] else "  VERDICT DIFFERS"
            print(row)
        row = f"{'all':30} {total_mb:5.1f} {sum(now):6.2f} {total_mb / sum(now):6.2f}"
        if base:
            row += f" {sum(base):7.2f} {total_mb / sum(base):9.2f} {sum(base) / sum(now):6.1f}"
        print(row)


if __name__ == "__main__":
    main()

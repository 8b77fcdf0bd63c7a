#!/usr/bin/env python3
"""Pack device-run folders into tar.gz files that fit the device tool's limits, plus a summary.

Why: only 8 files of at most 16 MiB come back from a device run. Large text logs (NCCL logs
with COLL lines, step prints) are cut to head + tail, marked where cut, and the pack is
retried with a smaller cut until it fits; binary evidence (Flight Recorder dumps, recorder
state files) is never cut.

    python pack_out.py --out $OUT --limit-mib 15 R14=/tmp/hf-R/r14 R15=/tmp/hf-R/r15 R19=/tmp/hf-R/r19
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tarfile
from pathlib import Path

TEXT_SUFFIXES = (".log", ".stdout", ".stderr", ".txt")
CUTS = (None, 4 << 20, 1 << 20, 256 << 10, 64 << 10)


def trim_file(path: Path, keep: int) -> bool:
    """Keep the first and last keep/2 bytes of a text file, with a marker line between."""
    size = path.stat().st_size
    if size <= keep:
        return False
    half = keep // 2
    with open(path, "rb") as f:
        head = f.read(half)
        f.seek(size - half)
        tail = f.read(half)
    marker = f"\n[... pack_out: {size - 2 * half} bytes cut from a {size}-byte file ...]\n".encode()
    path.write_bytes(head + marker + tail)
    return True


def pack(name: str, src: Path, out: Path, limit: int) -> str:
    """Copy src to a scratch folder, trim until the tar.gz fits, write OUT/name.tar.gz."""
    dest = out / f"{name}.tar.gz"
    for cut in CUTS:
        if cut is not None:
            for p in src.rglob("*"):
                if p.is_file() and not p.is_symlink() and p.name.endswith(TEXT_SUFFIXES):
                    trim_file(p, cut)
        with tarfile.open(dest, "w:gz", compresslevel=6) as tar:
            tar.add(src, arcname=name)
        size = dest.stat().st_size
        if size <= limit:
            return f"{dest.name}: {size / 2**20:.2f} MiB (text cut: {cut or 'none'})"
    dest.unlink()
    return f"{name}: did not fit in {limit / 2**20:.0f} MiB even with 64 KiB cuts: dropped"


def summary_lines(src: Path) -> list[str]:
    lines = []
    for sj in sorted(src.rglob("summary.json")):
        try:
            data = json.loads(sj.read_text())
        except (OSError, ValueError):
            continue
        lines.append(f"-- {sj.relative_to(src.parent)}")
        for case, v in data.items():
            if case.startswith("_"):
                continue
            if "skipped" in v:
                lines.append(f"{case}: SKIPPED {v['skipped']}")
                continue
            who = f"culprit {v['culprit_rank']}" if "culprit_rank" in v else f"slow {v.get('slow_ranks')}"
            lines.append(f"{case}: {who}, {v.get('seconds')} s, exits {v.get('exit_codes_by_launched_pid')}")
            if v.get("proc_states"):
                lines.append(f"   states {json.dumps(v['proc_states'])}")
            if v.get("step_stats"):
                lines.append("   steps " + " ".join(f"{r}:{s['median_step_ms']}/{s['median_wait_ms']}ms"
                                                   for r, s in sorted(v["step_stats"].items())))
            for n in v.get("notes", []):
                lines.append(f"   {n}")
    return lines


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", ".")))
    ap.add_argument("--limit-mib", type=float, default=15.0)
    ap.add_argument("--scratch", type=Path, default=Path("/tmp/hf-pack"))
    ap.add_argument("--head", type=Path, action="append", default=[], help="text files to put first in summary.txt")
    ap.add_argument("parts", nargs="+", metavar="NAME=DIR")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(args.scratch, ignore_errors=True)
    args.scratch.mkdir(parents=True)
    lines: list[str] = []
    for h in args.head:
        if h.is_file():
            lines += [f"== {h.name}", h.read_text(errors="replace")[-6000:].rstrip()]
    for part in args.parts:
        name, _, d = part.partition("=")
        src = Path(d)
        if not src.is_dir():
            lines.append(f"{name}: no folder {src}")
            continue
        lines.append(f"== {name}")
        lines += summary_lines(src)
        work = args.scratch / name
        shutil.copytree(src, work, symlinks=True)
        lines.append(pack(name, work, args.out, int(args.limit_mib * 2**20)))
        shutil.rmtree(work, ignore_errors=True)
    text = "\n".join(lines) + "\n"
    (args.out / "summary.txt").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

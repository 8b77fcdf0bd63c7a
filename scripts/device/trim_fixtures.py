#!/usr/bin/env python3
"""Trim captured scenario artifacts to a size fit for the repository, keeping what analysis reads.

Why: NCCL INFO logs and Flight Recorder dumps of 8 ranks run to many megabytes; the
tests need their beginning (init, topology) and their end (the last operations,
warnings, watchdog lines). Text files keep their first HEAD and last TAIL lines with
one marker line between; FR dumps (pickle or JSON) keep their last ENTRIES entries,
re-written as plain data after a restricted load (nothing else is changed).
truth.json records what was trimmed.

    python scripts/device/trim_fixtures.py SRC_DIR DST_DIR [--head 400 --tail 1500 --entries 60]
"""

from __future__ import annotations

import argparse
import json
import pickle
import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from parsers.readers.flight_recorder import load_bytes  # noqa: E402
from parsers.gather.registry import recognise  # noqa: E402


#: records the analysis reads, kept from the trimmed middle too: NCCL op and init lines, warnings,
#: c10d watchdog lines. Dropping them made a rank look behind in a group it had long passed
#: (chain scenario: a rank's warm-up ops in the world communicator fell into the cut).
KEEP = (" opCount ", "Init START", "Init COMPLETE", "commId", "ncclCommSplit", "NCCL WARN", "ProcessGroupNCCL",
        "ProcessGroupGloo")


#: files that are whole documents or binary state, never line logs: cutting their middle leaves them unreadable
#: (a bundle's manifest.json and nvidia-smi-q.xml were cut so, and the digest test found the manifest unreadable)
WHOLE_SUFFIXES = (".json", ".xml", ".bin", ".pkl", ".pickle", ".gz", ".tar", ".zip")


def is_line_log(path: Path, first: bytes) -> bool:
    """Whether `path` is a line-oriented log whose middle may be cut: not a document (JSON, XML), not binary."""
    if path.suffix.lower() in WHOLE_SUFFIXES or b"\0" in first:
        return False
    return first.lstrip()[:1] not in (b"{", b"[", b"<")


def trim_text(src: Path, dst: Path, head: int, tail: int) -> str | None:
    if not is_line_log(src, src.read_bytes()[:65536]):
        shutil.copy(src, dst)
        return None
    lines = src.read_text(errors="replace").splitlines(True)
    if len(lines) <= head + tail:
        shutil.copy(src, dst)
        return None
    middle = lines[head:len(lines) - tail]
    kept = [ln for ln in middle if any(k in ln for k in KEEP)]
    cut = len(middle) - len(kept)
    marker = f"[... {cut} lines trimmed for the test fixture ...]\n"
    dst.write_text("".join(lines[:head]) + (marker + "".join(kept) + (marker if kept else "") if cut else "".join(kept))
                   + "".join(lines[-tail:]))
    also = f", plus {len(kept)} op/init/warning line(s) between" if kept else ""
    return f"{src.name}: kept first {head} and last {tail} of {len(lines)} lines{also}"


def trim_fr(src: Path, dst: Path, entries: int) -> str | None:
    raw = src.read_bytes()
    data = load_bytes(raw)
    total = len(data.get("entries") or [])
    if total <= entries:
        shutil.copy(src, dst)
        return None
    data["entries"] = data["entries"][-entries:]
    if raw.lstrip()[:1] == b"{":
        dst.write_text(json.dumps(data))
    else:
        dst.write_bytes(pickle.dumps(data))
    return f"{src.name}: kept last {entries} of {total} Flight Recorder entries"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("src", type=Path)
    ap.add_argument("dst", type=Path)
    ap.add_argument("--head", type=int, default=400)
    ap.add_argument("--tail", type=int, default=1500)
    ap.add_argument("--entries", type=int, default=60)
    args = ap.parse_args()
    for truth in sorted(args.src.glob("*/truth.json")):
        sdir = truth.parent
        notes = []
        for f in sorted(p for p in sdir.rglob("*") if p.is_file()):
            out = args.dst / sdir.name / f.relative_to(sdir)
            out.parent.mkdir(parents=True, exist_ok=True)
            if f.name == "truth.json":
                continue
            kind = recognise(f.name, f.read_bytes()[:65536], complete=f.stat().st_size <= 65536).name
            note = trim_fr(f, out, args.entries) if kind == "fr-dump" else trim_text(f, out, args.head, args.tail)
            if note:
                notes.append(note)
        data = json.loads(truth.read_text())
        data["trimmed"] = notes
        (args.dst / sdir.name / "truth.json").write_text(json.dumps(data, indent=2) + "\n")
        print(f"{sdir.name}: {len(notes)} file(s) trimmed")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

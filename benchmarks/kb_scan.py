"""How fast the knowledge base scans a large kernel log, as a ratio to reading it.

Baseline (same run, same data): decode the log into (line, message) pairs with the
kernel reader. Measured: the same decode plus matching every kernel-stream entry.
The log is this machine's real dmesg (tests/fixtures/host/kernel) repeated, with the
public GPU-fault lines mixed in, to the size the collector keeps at most (8 MiB).

    PYTHONPATH=. python benchmarks/kb_scan.py
"""

from __future__ import annotations

import time
from pathlib import Path

from parsers import knowledge
from parsers.readers.host_kernel import numbered_messages, read_kernel_log

FIX = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "host" / "kernel"
TARGET_BYTES = 8 * 1024 * 1024


def corpus() -> str:
    base = (FIX / "dev-vm-dmesg-T.log").read_text() + (FIX / "public-gpu-faults.log").read_text()
    return base * (TARGET_BYTES // len(base.encode()) + 1)


def best_of(fn, repeat: int = 3) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    text = corpus()
    kb = knowledge.load(use_env=False)
    baseline = best_of(lambda: numbered_messages(read_kernel_log(text)))
    findings: list = []

    def scan() -> None:
        findings[:] = kb.scan_lines(numbered_messages(read_kernel_log(text)), "kernel", "bench")

    measured = best_of(scan)
    lines = text.count("\n")
    print(f"log: {len(text.encode()) / 2**20:.1f} MiB, {lines} lines, {len(kb)} entries, {len(findings)} findings")
    print(f"decode only: {baseline:.3f} s; decode + match: {measured:.3f} s; ratio {measured / baseline:.2f}x")
    print(f"per line: {measured / lines * 1e6:.2f} us")
    print(f"goal: the largest kernel log a bundle keeps ({TARGET_BYTES >> 20} MiB) decoded and matched in under 1 s: "
          f"{measured:.2f} s, {'met' if measured < 1.0 else 'NOT met'}")


if __name__ == "__main__":
    main()

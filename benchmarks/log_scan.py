"""Benchmark: reading big NCCL logs the way a hang needs them (parsers.readers.logscan).

Two measurements, each against a baseline of the same run (this machine is shared and noisy):

1. Throughput on one real-shaped NCCL log of one rank (--mb, default 1000 MB, every byte
   real): `grep -c 'NCCL INFO'` vs logscan full mode (bytes pre-filter, Python only for
   non-op records) vs logscan head-tail mode vs the per-line reader on a slice.
   Goal (issue 18): full scan at >= 1/4 of grep's throughput.
2. A folder of a --ranks (4,096) rank job, one NCCL log per rank of --file-mb (24.4 MB:
   4,096 x 24.4 MB = 100 GB apparent) analysed end to end: sniff, head-tail scan in
   parallel, correlate, culprit checked. Disk here cannot hold 100 GB of text, so each
   file is SPARSE: its first --head-kb and last --tail-kb are real lines (init, topology,
   ops; a split communicator initialised in the real tail region but outside the tail
   window, so the backward search for its init runs), the middle is a hole. Head-tail
   mode never reads the middle, which the scan's own counters show (bytes read vs size).
   The culprit's log ends one all-reduce early. Files are fsync'ed and dropped from the
   page cache (posix_fadvise DONTNEED, this benchmark's files only: no root needed, so file
   system metadata and whatever the VM host caches stay warm) before the cold run; --reuse
   takes the folder of an earlier --keep run and drops it the same way. CPU seconds of all
   processes and disk reads (getrusage) are printed: on shared cores wall time says little.
   Goal (issue 18): 100 GB in under 60 s.

    PYTHONPATH=. python benchmarks/log_scan.py [--mb 1000] [--ranks 4096] [--file-mb 24.4] [--dir D] [--keep] [--reuse]
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from parsers.gather.quiet_gc import pause_gc
from parsers import knowledge
from parsers.pipeline.analyze import analyze
from parsers.readers import logscan, nccl_log

WORLD_COMM = "0xa7869d7d53387980"
GOAL_RATIO = 0.25
GOAL_FOLDER_S, GOAL_FOLDER_GB = 60.0, 100.0


def _prefix(rank: int) -> str:
    return f"node{rank:05d}:{10000 + rank}:{10000 + rank} [0] NCCL INFO "


def head_lines(rank: int, world: int) -> list[str]:
    """Init and topology in the NCCL 2.28.9 formats (field notes, tests/fixtures/nccl)."""
    p, ptr = _prefix(rank), f"0x{0x2be70000 + rank:x}"
    return [
        f"{p}NCCL version 2.28.9+cuda13.0\n",
        f"{p}ncclCommInitRankConfig comm {ptr} rank {rank} nranks {world} cudaDev 0 nvmlDev 0 busId 60 "
        f"commId {WORLD_COMM} - Init START\n",
        f"{p}comm {ptr} rank {rank} nRanks {world} nNodes {world} localRanks 1 localRank 0 MNNVL 0\n",
        f"{p}Ring 00 : {(rank - 1) % world} -> {rank} -> {(rank + 1) % world}\n",
        f"{p}Tree 0 : {(rank - 1) // 2 if rank else -1} -> {rank} -> "
        f"{2 * rank + 1 if 2 * rank + 1 < world else -1}/{2 * rank + 2 if 2 * rank + 2 < world else -1}/-1\n",
        f"{p}ncclCommInitRankConfig comm {ptr} rank {rank} nranks {world} cudaDev 0 nvmlDev 0 busId 60 "
        f"commId {WORLD_COMM} - Init COMPLETE\n",
    ]


def split_lines(rank: int) -> list[str]:
    """A 2-rank split communicator (ncclCommSplit, as in tests/fixtures/nccl/chain)."""
    p, ptr, sub = _prefix(rank), f"0x{0x2be70000 + rank:x}", f"0x{0x3214a000 + rank:x}"
    rest = f"cudaDev 0 nvmlDev 0 busId 60 parent {ptr} splitCount 1 color {rank // 2} key {rank % 2}"
    return [f"{p}ncclCommSplit comm {sub} rank {rank % 2} nranks 2 {rest}- Init START\n",
            f"{p}ncclCommSplit comm {sub} rank {rank % 2} nranks 2 {rest} - Init COMPLETE\n"]


def op_line(rank: int, world: int, oc: int, split: bool = False) -> str:
    ptr = f"0x{0x3214a000 + rank:x}" if split else f"0x{0x2be70000 + rank:x}"
    n = 2 if split else world
    return (f"{_prefix(rank)}AllReduce: opCount {oc:x} sendbuff 0x7ef8fd800000 recvbuff 0x7ef8fd800000 count 1048576 "
            f"datatype 7 op 0 root 0 comm {ptr} [nranks={n}] stream (nil)\n")


def write_dense(path: Path, mb: float, rank: int = 3, world: int = 4096) -> int:
    """One rank's log of `mb` MB, every byte real. Returns lines written."""
    target = int(mb * 1e6)
    n, size = 0, 0
    with open(path, "w") as fh:
        for line in head_lines(rank, world):
            fh.write(line)
            size += len(line)
            n += 1
        oc = 0
        while size < target:
            block = "".join(op_line(rank, world, oc + i) for i in range(2000))
            fh.write(block)
            size += len(block)
            n += 2000
            oc += 2000
    return n


def write_sparse(path: Path, rank: int, world: int, size: int, head_kb: int, tail_kb: int, behind: bool) -> int:
    """Real head and tail, a hole between (see module doc). Returns the bytes really written."""
    one = len(op_line(rank, world, 0x100000))
    total_ops = size // one
    head = head_lines(rank, world)
    oc = 0
    while sum(map(len, head)) < head_kb * 1024:
        head.append(op_line(rank, world, oc))
        oc += 1
    tail_ops = tail_kb * 1024 // (2 * one)
    last = total_ops - (1 if behind else 0)
    tail: list[str] = split_lines(rank)
    for i in range(tail_ops):
        tail.append(op_line(rank, world, last - tail_ops + i + 1))
        tail.append(op_line(rank, 2, total_ops - tail_ops + i + 1, split=True))
    head_b, tail_b = "".join(head).encode(), "".join(tail).encode()
    with open(path, "wb") as fh:
        fh.write(head_b)
        fh.seek(size - len(tail_b))
        fh.write(tail_b)
        fh.flush()
        os.fsync(fh.fileno())
        os.posix_fadvise(fh.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
    return len(head_b) + len(tail_b)


def throughput(mb: float, workdir: Path) -> None:
    path = workdir / "big-nccl.log"
    n = write_dense(path, mb)
    size = path.stat().st_size
    subprocess.run(["grep", "-c", "NCCL INFO", str(path)], capture_output=True, check=False)  # warm the cache
    t = time.perf_counter()
    grep = subprocess.run(["grep", "-c", "NCCL INFO", str(path)], capture_output=True, text=True, check=False)
    t_grep = time.perf_counter() - t
    with pause_gc():
        t = time.perf_counter()
        full = logscan.scan_file(path, "nccl-log", mode="full")
        t_full = time.perf_counter() - t
        t = time.perf_counter()
        ht = logscan.scan_file(path, "nccl-log", mode="head-tail")
        t_ht = time.perf_counter() - t
        slice_lines = 200_000
        with open(path, encoding="utf-8", errors="replace", newline="") as fh:
            lines = [next(fh) for _ in range(min(slice_lines, n))]
        t = time.perf_counter()
        nccl_log.parse_lines(lines, str(path))
        t_line = (time.perf_counter() - t) * n / len(lines)
    ratio = t_grep / t_full
    print(f"throughput: {size / 1e6:.0f} MB, {n} lines (one rank's NCCL log, every byte real)")
    print(f"  grep -c 'NCCL INFO'        {t_grep:7.2f} s  {size / t_grep / 1e9:6.2f} GB/s  (count "
          f"{grep.stdout.strip()})")
    print(f"  logscan full (pre-filter)  {t_full:7.2f} s  {size / t_full / 1e9:6.2f} GB/s  = {ratio:.2f} of "
          f"grep's throughput "
          f"(goal >= {GOAL_RATIO}): {'MET' if ratio >= GOAL_RATIO else 'NOT MET'}; {len(full.events)} events kept, "
          f"{full.facts['scan']['ops_parsed']} ops parsed")
    print(f"  logscan head-tail          {t_ht:7.2f} s  read {ht.facts['scan']['bytes_read'] / 1e6:.1f} MB of "
          f"{size / 1e6:.0f} MB; {len(ht.events)} events kept")
    print(f"  per-line reader (all lines, from a {len(lines)}-line slice) {t_line:7.1f} s  = "
          f"{t_grep / t_line:.4f} of grep's")
    path.unlink()


def _usage() -> tuple[float, float]:
    """CPU seconds and bytes read from disk, this process and its finished children (the pool's workers)."""
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return (me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime, (me.ru_inblock + kids.ru_inblock) * 512.0)


def drop_cache(files: list[Path]) -> int:
    """Drop these files' pages from the page cache (clean pages: no root needed); returns how many
    files it was done for. Why not drop_caches: that needs root and drops other users' caches too."""
    n = 0
    for f in files:
        try:
            fd = os.open(f, os.O_RDONLY)
        except OSError:
            continue
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            n += 1
        finally:
            os.close(fd)
    return n


def folder(ranks: int, file_mb: float, head_kb: int, tail_kb: int, workdir: Path, workers: int,
           reuse: bool = False) -> None:
    size = int(file_mb * 1e6)
    culprit = ranks // 3
    t = time.perf_counter()
    real = 0
    files = [workdir / f"node{r:05d}" / f"nccl.node{r:05d}.{10000 + r}.log" for r in range(ranks)]
    reused = reuse and all(f.is_file() and f.stat().st_size == size for f in files)
    for r, f in enumerate(files):
        if reused:
            real += f.stat().st_blocks * 512
            continue
        f.parent.mkdir(parents=True, exist_ok=True)
        real += write_sparse(f, r, ranks, size, head_kb, tail_kb, r == culprit)
    dropped = drop_cache(files)
    t_gen = time.perf_counter() - t
    apparent = ranks * size
    print(f"\nfolder: {ranks} ranks x {file_mb} MB = {apparent / 1e9:.1f} GB apparent, {real / 1e9:.2f} GB real "
          f"(sparse middles, see module doc); {'reused (--reuse)' if reused else 'generated'} in {t_gen:.0f} s; "
          f"page cache dropped for {dropped} of {len(files)} files (posix_fadvise DONTNEED, no root needed)")
    kb = knowledge.load(use_env=False)
    for label in ("cold (page cache dropped for these files)", "warm"):
        before = _usage()
        t = time.perf_counter()
        analysis = analyze(workdir, kb)  # the default pipeline, as `forensics analyze` runs it
        total = time.perf_counter() - t
        cpu, disk = (a - b for a, b in zip(_usage(), before))
        c = analysis.verdict.culprit
        read = sum(a.parsed.facts.get("scan", {}).get("bytes_read", 0) for a in analysis.evidence.artifacts if a.parsed)
        ok = c is not None and c.rank == culprit
        scaled = total * GOAL_FOLDER_GB * 1e9 / apparent
        print(f"  {label}: forensics analyze (default: logs over 8 MiB read head and tail) {total:.1f} s for "
              f"{apparent / 1e9:.1f} GB (goal {GOAL_FOLDER_GB:.0f} GB < {GOAL_FOLDER_S:.0f} s; at this size "
              f"{scaled:.1f} s per 100 GB): {'MET' if scaled < GOAL_FOLDER_S and ok else 'NOT MET'}; read "
              f"{read / 1e6:.0f} MB; culprit rank {c.rank if c else None} ({c.reason_class if c else '-'}) "
              f"{'correct' if ok else 'WRONG'}")
        print(f"    CPU {cpu:.1f} s in all processes ({cpu / ranks * 1000:.1f} ms per file; wall/CPU says how much "
              f"the shared cores and the disk cost); disk reads {disk / 1e9:.2f} GB (getrusage blocks in)")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mb", type=float, default=1000)
    ap.add_argument("--ranks", type=int, default=4096)
    ap.add_argument("--file-mb", type=float, default=24.4)
    ap.add_argument("--head-kb", type=int, default=256)
    ap.add_argument("--tail-kb", type=int, default=512)
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--dir", type=Path, help="work folder (default: a temp folder, removed at the end)")
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--skip-throughput", action="store_true")
    ap.add_argument("--skip-folder", action="store_true")
    ap.add_argument("--reuse", action="store_true", help="reuse the folder under --dir from an earlier --keep run")
    args = ap.parse_args()
    workdir = args.dir or Path(tempfile.mkdtemp(prefix="bench-logscan-"))
    workdir.mkdir(parents=True, exist_ok=True)
    print(f"machine: {os.cpu_count()} cores; disk: {shutil.disk_usage(workdir).free / 1e9:.0f} GB free at {workdir}")
    try:
        if not args.skip_throughput:
            throughput(args.mb, workdir)
        if not args.skip_folder:
            folder(args.ranks, args.file_mb, args.head_kb, args.tail_kb, workdir / "job", args.workers, args.reuse)
    finally:
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

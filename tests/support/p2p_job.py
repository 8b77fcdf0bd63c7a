"""A real gloo job whose point-to-point traffic hangs one of three ways (issue 39 item 1), one process a rank.

    python p2p_job.py CASE RANK WORLD PORT OUT CULPRIT NUMEL STEPS FAULT TIMEOUT_S

Cases (every rank runs a pipeline 0 -> 1 -> ... -> WORLD-1 of STEPS micro-batches of NUMEL floats, then a
world all_reduce, unless the case says otherwise):
- `wrongpeer`: at micro-batch FAULT stage CULPRIT (>= 2) posts `recv(src=CULPRIT-2)` instead of CULPRIT-1;
- `wrongpeersend`: at micro-batch FAULT stage CULPRIT (<= WORLD-3) posts `send(dst=CULPRIT+2)` instead of CULPRIT+1;
- `sendsend`: ranks CULPRIT and CULPRIT+1 exchange NUMEL floats, both with send first then recv, while the
  others call the next all_reduce (they wait in it: victims);
- `pipestall`: at micro-batch FAULT stage CULPRIT sleeps after its recv, before its send.

Each rank writes `OUT/nodeNN/rankN.stdout` lines (its stderr goes to rankN.stderr: the driver opens it), and,
when the driver drops `OUT/dump.trigger`, its Flight Recorder buffer as `OUT/nodeNN/fr_trace_rank_N.json` from
a side thread (the main thread hangs; gloo writes no dump of its own on a timeout). The process group's
timeout is TIMEOUT_S: each waiting rank then raises gloo's timeout, as a real job's post-mortem shows it.
Marker files (warm, dumped) go to OUT/markers/, out of the logs folder. The driver
(tests/parsers/judges/test_p2p.py) kills what is left.
"""

from __future__ import annotations

import datetime
import os
import sys
import threading
import time
from pathlib import Path

import torch
import torch.distributed as dist


def dump_on_trigger(out: Path, rank: int) -> None:
    """Write this rank's Flight Recorder buffer (JSON) once the trigger file appears."""
    host = out / f"node{rank:02d}"

    def watch() -> None:
        while not (out / "dump.trigger").exists():
            time.sleep(0.05)
        c10d = torch._C._distributed_c10d
        for api in ("_dump_fr_trace_json", "_dump_nccl_trace_json"):
            fn = getattr(c10d, api, None)
            if fn is not None:
                data = fn()
                (host / f"fr_trace_rank_{rank}.json").write_bytes(data if isinstance(data, bytes) else data.encode())
                break
        (out / "markers" / f"dumped.{rank}").write_text("1")

    threading.Thread(target=watch, name="fr-dump-watcher", daemon=True).start()


def stage_forward(seconds: float) -> None:
    """The stalled stage's compute: its send never comes."""
    time.sleep(seconds)


def pipeline(rank: int, world: int, t: torch.Tensor, steps: int, case: str, culprit: int, fault: int = -1) -> None:
    """Micro-batches down the chain; the culprit breaks micro-batch `fault` the way `case` says."""
    for mb in range(steps):
        broken = mb == fault
        if rank > 0:
            src = rank - 2 if case == "wrongpeer" and rank == culprit and broken else rank - 1
            dist.recv(t, src=src)
        if case == "pipestall" and rank == culprit and broken:
            stage_forward(3600)
        if rank < world - 1:
            dist.send(t, dst=rank + 2 if case == "wrongpeersend" and rank == culprit and broken else rank + 1)
    dist.all_reduce(t)


def send_send(rank: int, t: torch.Tensor, culprit: int) -> None:
    """The pair culprit, culprit+1 both send first; the others go on to the next all_reduce."""
    pair = {culprit: culprit + 1, culprit + 1: culprit}
    if rank in pair:
        dist.send(t, dst=pair[rank])
        dist.recv(t, src=pair[rank])
    dist.all_reduce(t)


def main(argv: list[str]) -> int:
    case, rank, world, port, out, culprit, numel, steps, fault, timeout_s = argv
    rank, world, culprit, numel, steps, out = int(rank), int(world), int(culprit), int(numel), int(steps), Path(out)
    host = out / f"node{rank:02d}"
    host.mkdir(parents=True, exist_ok=True)
    log = open(host / f"rank{rank}.stdout", "w", buffering=1)  # noqa: SIM115 - open for the process's life
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=float(timeout_s)))
    dump_on_trigger(out, rank)
    t = torch.ones(numel)
    for _ in range(2):  # warm-up: connections made, a few collectives and p2p ops completed
        dist.all_reduce(t)
        pipeline(rank, world, t, steps, "", -1)
    log.write(f"rank {rank} pid {os.getpid()} warm\n")
    (out / "markers").mkdir(exist_ok=True)
    (out / "markers" / f"warm.{rank}").write_text("1")
    if case == "sendsend":
        send_send(rank, t, culprit)
    else:
        pipeline(rank, world, t, steps, case, culprit, int(fault))
    log.write(f"rank {rank} done\n")
    time.sleep(3600)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

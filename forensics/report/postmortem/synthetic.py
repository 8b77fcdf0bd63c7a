"""A synthetic verdict of N ranks, for scale checks of the pictures and for trying the API.

Real bundles of 4,096 ranks are not made on a laptop; the renderers only see a
Verdict, so a Verdict shaped like one (ranks table, suspects, stack tree) is enough
to check that pictures stay readable and fast at that size. Not evidence of anything.
"""

from __future__ import annotations

from forensics.report.lastop import tree_from_paths
from parsers.model import Suspect, Verdict
from parsers.model.findings import ReasonClass
from parsers.model.ranges import fold

TRAIN = ["_run_module_as_main (<frozen runpy>:198)", "_run_code (<frozen runpy>:88)", "<module> (train.py:200)"]


def synthetic_verdict(world: int = 4096, culprit: int = 1234, stopped: int | None = 3000, missing: int | None = 4000,
                      ranks_per_host: int = 8, laggards: int = 0) -> Verdict:
    """`world` ranks waiting in all_reduce, one culprit in its data loader, optionally one stopped and one missing.

    `laggards` extra ranks (after the culprit) wait in a broadcast, a second branch of victims.
    """
    special = {culprit, stopped, missing} - {None}
    lag = [r for r in range(world) if r not in special][:laggards]
    rows, paths = [], {}
    for rank in range(world):
        host = f"node{rank // ranks_per_host:04d}"
        if rank == missing:
            rows.append(dict(rank=rank, host=host, pid=None, state=None, activity="missing", op=None, where=None,
                             problems=["no process found"]))
            continue
        if rank == culprit:
            where = "load_batch (data.py:88)"
            rows.append(dict(rank=rank, host=host, pid=10000 + rank, state="S", activity="elsewhere", op=None,
                             where=where, problems=[]))
            paths[rank] = TRAIN + ["main (train.py:150)", where]
        elif rank == stopped:
            where = "main (train.py:151)"
            rows.append(dict(rank=rank, host=host, pid=10000 + rank, state="T", activity="elsewhere", op=None,
                             where=where, problems=[]))
            paths[rank] = TRAIN + [where]
        elif rank in lag:
            where = "sync_params (train.py:120)"
            rows.append(dict(rank=rank, host=host, pid=10000 + rank, state="S", activity="collective", op="broadcast",
                             where=where, problems=[]))
            paths[rank] = TRAIN + ["main (train.py:140)", where,
                                   "broadcast (torch/distributed/distributed_c10d.py:2800)"]
        else:
            where = "train_step (train.py:60)"
            rows.append(dict(rank=rank, host=host, pid=10000 + rank, state="S", activity="collective", op="all_reduce",
                             where=where, problems=[]))
            paths[rank] = TRAIN + ["main (train.py:160)", where,
                                   "all_reduce (torch/distributed/distributed_c10d.py:3252)"]
    suspects = []
    if stopped is not None:
        suspects.append(Suspect(stopped, f"node{stopped // ranks_per_host:04d}", 10000 + stopped, ReasonClass.STOPPED,
                                "is stopped (state T)", 0.95))
    if missing is not None:
        suspects.append(Suspect(missing, f"node{missing // ranks_per_host:04d}", None, ReasonClass.MISSING,
                                "has no process", 0.9))
    suspects.append(Suspect(culprit, f"node{culprit // ranks_per_host:04d}", 10000 + culprit, ReasonClass.OUTSIDE,
                            "is in no collective: its main thread runs load_batch (data.py:88)", 0.8))
    suspects.sort(key=lambda s: -s.confidence)
    waiting = [r["rank"] for r in rows if r["activity"] == "collective"]
    verdict = Verdict(suspects=suspects,
                      summary=f"{suspects[0].label} {suspects[0].reason}; ranks {fold(waiting)} wait in all_reduce")
    verdict.sections["ranks"] = rows
    verdict.sections["stack_tree"] = tree_from_paths(paths)
    return verdict

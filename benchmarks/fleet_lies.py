"""Fleet bundles whose evidence lies, built on benchmarks/bundle_scale.py's synthetic job (issue 40 item 3, issue 43).

Each function changes a bundle that `write_bundle` wrote, the way a real collection could show it:
- `stop_rank`: one rank stopped (state T), as SIGSTOP or a debugger leaves it;
- `add_stray`: another process on another host with a rank's environment (RANK=N inherited by a child);
- `relabel`: a host's own rank that says RANK=N (a wrong or inherited environment); its logs keep its own rank;
- `write_digests`: each host's digest as `collect` writes it;
- `claim_all`: one host's digest that holds a summary for `count` ranks it does not run (a hostile host).

Used by tests/parsers/judges/test_claims.py and tests/parsers/test_digest_lies.py, and by the fuzzer's fleet
mutators (benchmarks/fuzz_fleet.py).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from parsers.scale.digest import DIGEST_NAME, write_json
from parsers.scale.digest_first import digest_host
from parsers.gather.source import open_source


def _manifest(root: Path) -> dict[str, Any]:
    return json.loads((root / "manifest.json").read_text())


def _record(man: dict[str, Any], rank: int) -> dict[str, Any]:
    return next(x for x in man["ranks"] if x["rank"] == rank)


def stop_rank(root: Path, rank: int) -> str:
    """Rank `rank` stopped (state T before and after, in /proc's record too); its host."""
    man = _manifest(root)
    rec = _record(man, rank)
    rec["state_before"] = rec["state_after"] = "T"
    proc = root / rec["dir"] / "proc.json"
    doc = json.loads(proc.read_text())
    doc["state"] = doc["threads"][0]["state"] = "T"
    proc.write_text(json.dumps(doc))
    (root / "manifest.json").write_text(json.dumps(man))
    return rec["host"]


def add_stray(root: Path, host: str, rank: int, pid: int = 99999, world: int = 1024) -> None:
    """A stray process on `host` with rank `rank`'s environment: sleeping in a select loop, no NCCL log."""
    man = _manifest(root)
    rel = f"hosts/{host}/rank{rank}-pid{pid}"
    d = root / rel
    d.mkdir(parents=True)
    (d / "proc.json").write_text(json.dumps({"pid": pid, "state": "S", "comm": "python3", "ppid": 1, "uid": 0,
                                             "wchan": "do_select", "threads": [{"tid": pid, "name": "python3",
                                                                                "state": "S", "wchan": "do_select"}]}))
    (d / "environ.json").write_text(json.dumps({"RANK": str(rank), "WORLD_SIZE": str(world), "LOCAL_RANK": "3",
                                                "LOCAL_WORLD_SIZE": "8"}))
    (d / "pyspy.json").write_text(json.dumps([{"pid": pid, "thread_id": pid, "os_thread_id": pid,
                                               "thread_name": "MainThread", "active": False, "owns_gil": False,
                                               "frames": [{"name": "select", "filename": "selectors.py", "line": 468},
                                                          {"name": "worker_loop", "filename": "helper.py",
                                                           "line": 3}]}]))
    cols = [{"name": "process_state", "status": "ok", "files": [f"{rel}/proc.json"]},
            {"name": "environment", "status": "ok", "files": [f"{rel}/environ.json"]},
            {"name": "py-spy", "status": "ok", "files": [f"{rel}/pyspy.json"]}]
    man["ranks"].append({"host": host, "pid": pid, "dir": rel, "rank": rank, "world_size": world, "local_rank": 3,
                         "local_world_size": 8, "job_id": "node00000:29500", "state_before": "S", "state_after": "S",
                         "collectors": cols})
    (root / "manifest.json").write_text(json.dumps(man))


def relabel(root: Path, own: int, says: int) -> str:
    """Rank `own`'s process says RANK=`says` (environment and manifest); its NCCL log still says `own`. Its host."""
    man = _manifest(root)
    rec = _record(man, own)
    rec["rank"] = says
    env = root / rec["dir"] / "environ.json"
    doc = json.loads(env.read_text())
    doc["RANK"] = str(says)
    env.write_text(json.dumps(doc))
    (root / "manifest.json").write_text(json.dumps(man))
    return rec["host"]


def write_digests(root: Path, kb: Any) -> None:
    """Every host's digest.json, as collect writes it at the end of a collection."""
    with open_source(root) as src:
        for rec in src.manifest.hosts:
            (root / rec.dir / DIGEST_NAME).write_bytes(write_json(digest_host(src, rec.host, kb)))


def claim_all(root: Path, host_dir: str, count: int, state: str = "R") -> None:
    """Host `host_dir`'s digest made to hold `count` rank summaries of ranks it does not run (each running)."""
    path = root / host_dir / DIGEST_NAME
    doc = json.loads(path.read_text())
    fake = {"rank": 0, "pid": 1, "state": state, "stack": {"kind": "collective", "op": "all_reduce", "where": None},
            "top": [], "comms": {}, "recorder_waits": [], "exception": None, "exits": [], "flags": []}
    doc["ranks"] += [dict(fake, rank=r, pid=500000 + r) for r in range(count)]
    path.write_bytes(write_json(doc))

"""The peer of a point-to-point wait, from py-spy --locals, keeping nothing else.

Why: a stack says a rank waits in torch.distributed's `send` or `recv`, never to or from whom, and gloo keeps no
record of it; without the peer no wait can be matched with the other side's (parsers/judges/p2p_stacks.py). The
call's own arguments hold it (`dst`, `src`). Why so narrow: `--locals` reads the repr of every local of every
frame, and those may hold secrets (a token in a string, a user's config). So it runs only where the first dump
shows the main thread inside one of torch.distributed's own point-to-point functions, and of its output only
the integers of an allow-list of argument names in those frames are kept (parsers/readers/pyspy.py: p2p_args);
the rest is dropped in memory, never written: not even a failed run's output is saved. The manifest says it ran,
its cost and what it kept (docs/security.md).
"""

from __future__ import annotations

import json
import time
from typing import Any

from forensics.collect.tool import ToolResult, run_tool
from forensics.collectors.base import CollectOptions, RankTarget
from parsers.readers.pyspy import MAX_ARG, P2P_ARG_NAMES, is_p2p_frame, p2p_args, p2p_call_frames

#: py-spy --locals output read at most (held in memory only, then dropped): a main thread of 1,000 frames with
#: their locals' reprs is well under it
LOCALS_READ_BYTES = 8 << 20
#: what the manifest says of this run
KEPT = (f"py-spy --locals, run because the main thread waits in torch.distributed's point-to-point call: of its "
        f"frames in torch/distributed only the integer arguments {', '.join(P2P_ARG_NAMES)} kept; every other "
        f"local dropped unwritten")

Peers = dict[tuple[str, str, int], list[dict[str, Any]]]  #: (function, file, line) -> kept locals, py-spy's form


def p2p_locals(target: RankTarget, options: CollectOptions, result: ToolResult, details: dict) -> Peers:
    """The kept arguments of the main thread's point-to-point frames, by frame; {} where its first dump shows no
    such frame (py-spy is not run again) or the run fails. Runs inside the caller's state guard."""
    doc = _decoded(result.stdout) if result.ok and not result.cut else None
    if not isinstance(doc, list) or not _main_p2p_frames(doc, target.pid):
        return {}
    argv = ["py-spy", "dump", "--pid", str(target.pid), "--json", "--locals"]
    if details.get("nonblocking"):
        argv.append("--nonblocking")
    start = time.monotonic()
    second = run_tool(argv, timeout=options.timeout, target_pid=target.pid, max_stdout=LOCALS_READ_BYTES)
    seconds = round(time.monotonic() - start, 3)
    raw = _decoded(second.stdout) if second.ok and not second.cut else None
    limit = _world(target.environ)
    peers: Peers = {}
    for frame in _main_p2p_frames(raw, target.pid) if isinstance(raw, list) else ():
        kept = p2p_args(frame, limit)
        if kept:
            peers[_key(frame)] = [{"name": n, "repr": str(v)} for n, v in kept]
    note = {"argv": argv, "seconds": seconds, "kept": KEPT,
            "frames": [f"{k[0]}: " + ", ".join(f"{d['name']}={d['repr']}" for d in v) for k, v in peers.items()]}
    if raw is None:
        note["error"] = ("no output" if second.ok else f"py-spy --locals failed (exit {second.returncode}, "
                         f"timed out {second.timed_out}, cut {second.cut}); its output dropped")
    details["p2p_locals"] = note
    return peers


def attach_peers(doc: Any, peers: Peers) -> None:
    """Each kept frame's arguments into the first dump's matching frame (same function, file and line: a frame the
    process left between the two runs gets none), as py-spy's own `locals` list of that frame."""
    if not peers or not isinstance(doc, list):
        return
    for thread in doc:
        for frame in thread.get("frames") or () if isinstance(thread, dict) else ():
            if isinstance(frame, dict) and is_p2p_frame(frame) and (kept := peers.get(_key(frame))):
                frame["locals"] = kept


def _main_p2p_frames(doc: list, pid: int) -> list[dict]:
    """The point-to-point frames among the main thread's innermost Python frames (the thread whose id is the pid)."""
    main = next((t for t in doc if isinstance(t, dict) and t.get("os_thread_id") == pid), None)
    frames = main.get("frames") if main else None
    return p2p_call_frames(frames) if isinstance(frames, list) else []


def _key(frame: dict) -> tuple[str, str, int]:
    line = frame.get("line")
    return str(frame.get("name")), str(frame.get("filename")), line if isinstance(line, int) else -1


def _world(environ: dict[str, str]) -> int:
    """Ranks are below the job's WORLD_SIZE where its environment says it (a spawned process's does not)."""
    text = (environ or {}).get("WORLD_SIZE", "")
    return int(text) if text.isascii() and text.isdigit() and 0 < len(text) <= 7 else MAX_ARG


def _decoded(text: str) -> Any:
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return None

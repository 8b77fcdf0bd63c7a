"""Reads our stack-samples file (N `py-spy dump --json` answers of one process) into StackSamples.

The file (written by forensics/collectors/pyspy_samples.py, name `pyspy-samples.json`):
    {"format": "hang-forensics-stack-samples", "version": 1, "tool": "py-spy", "pid": P,
     "requested": N, "interval_s": S,
     "samples": [{"t": unix seconds, "threads": <py-spy dump --json>}, ...],
     "failures": [{"t": unix seconds, "error": "..."}, ...]}
Each sample's main thread is classified like a single dump (parsers.stacks.classify):
in a collective, waiting on the GPU, or elsewhere at its innermost user frame; py-spy's
`active` flag splits 'elsewhere' into on the CPU and idle (sleep, I/O, a lock).
The input is hostile: counts are bounded and anything malformed is skipped, not trusted.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from parsers.model.samples import IDLE, NO_STACK, ON_CPU, Share, StackSamples
from parsers.readers.ours import check_header, names_format
from parsers.readers.pyspy import PySpyFormatError, parse_pyspy_data
from parsers.stacks.classify import classify

FORMAT = "hang-forensics-stack-samples"
VERSION = 1
#: the most samples read from one file (the collector takes at most 200)
MAX_SAMPLES = 1000
#: the most distinct places kept per file (the rest are counted under 'other places')
MAX_PLACES = 50


def looks_like(text: str) -> bool:
    return names_format(text, FORMAT)


def parse_samples_data(data: Any, pid: int | None = None) -> StackSamples:
    """StackSamples from the decoded JSON; ValueError when it is not our format."""
    data = check_header(data, FORMAT, VERSION, "stack samples")
    own_pid = data.get("pid") if isinstance(data.get("pid"), int) else pid
    raw = data.get("samples") if isinstance(data.get("samples"), list) else []
    failures = data.get("failures") if isinstance(data.get("failures"), list) else []
    where: Counter[str] = Counter()
    idle: Counter[str] = Counter()
    states: Counter[str] = Counter()
    ops: Counter[str] = Counter()
    times: list[float] = []
    bad = 0
    for sample in raw[:MAX_SAMPLES]:
        if not isinstance(sample, dict):
            bad += 1
            continue
        try:
            threads = parse_pyspy_data(sample.get("threads"), own_pid)
        except (PySpyFormatError, TypeError, ValueError):
            bad += 1
            continue
        t = sample.get("t")
        if isinstance(t, (int, float)):
            times.append(float(t))
        main = next((th for th in threads if th.is_main and th.frames), None)
        state, place, op = _one(main)
        states[state] += 1
        if place:
            where[place] += 1
            idle[place] += state == IDLE
        if op:
            ops[op] += 1
    taken = sum(states.values())
    interval = data.get("interval_s")
    requested = data.get("requested")
    return StackSamples(
        pid=own_pid,
        requested=requested if isinstance(requested, int) else len(raw),
        taken=taken,
        failed=len(failures) + bad,
        span_s=(max(times) - min(times)) if len(times) >= 2 else 0.0,
        interval_s=float(interval) if isinstance(interval, (int, float)) else 0.0,
        tool=str(data.get("tool") or "py-spy")[:40],
        where=_shares(where, taken, MAX_PLACES, idle),
        states=_shares(states, taken),
        ops=_shares(ops, taken),
        errors=[str(f.get("error", ""))[:300] for f in failures[:5] if isinstance(f, dict)],
    )


def _one(main) -> tuple[str, str | None, str | None]:
    """(state, place, collective) of one sample's main thread."""
    if main is None:
        return NO_STACK, None, None
    act = classify(main)
    if act.waiting:
        return act.kind, act.op, act.op  # waiting samples are placed in their collective, not a user frame
    return (ON_CPU if main.active else IDLE), act.where, None


def _shares(counts: Counter[str], total: int, keep: int | None = None, idle: Counter[str] | None = None) -> list[Share]:
    if not total:
        return []
    ranked = counts.most_common()
    head = ranked[:keep] if keep else ranked
    out = [Share(label[:300], n, n / total, (idle or {}).get(label, 0)) for label, n in head]
    rest = sum(n for _, n in ranked[len(head):])
    if rest:
        out.append(Share("other places", rest, rest / total))
    return out

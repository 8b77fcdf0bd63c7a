"""What a rank does between collectives, from its stack samples (collect --samples N).

Why a judge of its own: the straggler verdict says *who* enters collectives last (enter
times); the samples say *why*, as shares of the main thread's time: "samples: 70% in
slow_data_step (train.py:31), 30% in all_reduce". A straggler spends little time waiting
in collectives (it is the one the others wait for); its time goes to the places listed.
Pure functions of parsers.model.samples.StackSamples; the sentence cites its file.
"""

from __future__ import annotations

from typing import Any

from parsers.gather.evidence import Evidence
from parsers.model.findings import cite
from parsers.model.samples import IDLE, NO_STACK, ON_CPU, Share, StackSamples


#: places shown in the sentence; the rest are summed as 'elsewhere'
TOP_PLACES = 3
#: fewest samples for a share worth quoting (below it the sentence says how few there were)
MIN_SAMPLES = 5


def describe_activity(samples: StackSamples | None, cite: str | None = None) -> str | None:
    """One line: where the main thread's samples fall, most frequent first, and the source; None without samples."""
    if samples is None:
        return None
    where = f", {cite}" if cite else ""
    if not samples.taken:
        why = f": {samples.errors[0]}" if samples.errors else ""
        return f"samples: none of {samples.requested} readable{why} ({samples.tool}{where})"
    places = [p for p in samples.where if p.label != "other places"]
    shown = places[:TOP_PLACES]
    waits = {o.label for o in samples.ops}
    parts = [f"{p.share:.0%} in {p.label}" + ("" if p.label in waits else _state_note(p)) for p in shown]
    rest = 1.0 - sum(p.share for p in shown) - samples.state_share(NO_STACK)
    if rest >= 0.005:
        parts.append(f"{rest:.0%} elsewhere")
    if samples.state_share(NO_STACK) >= 0.005:
        parts.append(f"{samples.state_share(NO_STACK):.0%} without a main-thread stack")
    few = " (too few samples to trust the shares)" if samples.taken < MIN_SAMPLES else ""
    return (f"samples: {', '.join(parts)}{few} ({samples.taken} {samples.tool} samples over "
            f"{samples.span_s:.1f} s{where})")


def _state_note(place: Share) -> str:
    """' [off CPU]' where most of a place's samples were off the CPU (a sleep, I/O, a lock: not compute),
    ' [on CPU]' where most ran; nothing for a collective (waiting is its nature) or a mixed place."""
    if place.count < 2:
        return ""
    if place.idle >= 0.8 * place.count:
        return " [off CPU]"
    if place.idle <= 0.2 * place.count:
        return " [on CPU]"
    return ""


def is_moving(samples: StackSamples | None) -> bool | None:
    """Whether the samples show the main thread moving: seen in two or more places (a wait and
    the work between, or two lines of work). None: too few samples to tell.

    Why it helps decide hang vs progress: a hung rank sits in one place in every sample (its
    collective, or the call it never returns from); a running one is caught in different
    places. One place in all samples is not proof of a hang (a long kernel, a long sleep),
    so a caller weighs it with time-based evidence; several places are proof of motion."""
    if samples is None or samples.taken < MIN_SAMPLES:
        return None
    places = [p for p in samples.where if p.label != "other places"]
    return len(places) >= 2 or any(p.label == "other places" for p in samples.where)


def activity_facts(samples: StackSamples | None, cite: str | None = None) -> dict[str, Any] | None:
    """The same for `analyze --json`: the sentence, the shares, and the file."""
    if samples is None:
        return None
    return dict(samples.to_dict(), text=describe_activity(samples, cite), file=cite,
                waiting_share=round(samples.state_share("collective") + samples.state_share("gpu-sync"), 3),
                on_cpu_share=round(samples.state_share(ON_CPU), 3), idle_share=round(samples.state_share(IDLE), 3),
                moving=is_moving(samples))


def rank_activities(ev: Evidence) -> dict[int, dict[str, Any]]:
    """rank -> activity_facts for every rank of `ev` (parsers.gather.evidence.Evidence) that has samples."""
    out: dict[int, dict[str, Any]] = {}
    for r in getattr(ev, "ranks", []):
        if r.rank is not None and r.samples is not None:
            facts = activity_facts(r.samples, r.samples_file)
            if facts is not None:
                out[r.rank] = facts
    return out


def with_activity(suspects: list, ev: Evidence) -> list:
    """A straggler's evidence says what it does between collectives, from its stack samples when collected
    (`collect --samples`): the one fact that says *why* it is late."""
    by_rank = {r.rank: r for r in ev.ranks if r.rank is not None and r.samples is not None}
    for s in suspects:
        r = by_rank.get(s.rank)
        samples = r.samples if r is not None else None
        line = describe_activity(samples, r.samples_file) if r is not None and samples is not None else None
        if r is not None and samples is not None and line:
            s.evidence.insert(0, cite(line, tool=samples.tool or "py-spy", file=r.samples_file))
    return suspects

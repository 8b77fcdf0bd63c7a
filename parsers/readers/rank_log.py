"""A rank's stdout/stderr (or any text log): every line goes to the reader that knows it.

Why one dispatcher: real rank logs mix NCCL records (NCCL_DEBUG without a file),
c10d watchdog lines, gloo errors, proxy dumps, tracebacks and the user's own prints,
all behind launcher prefixes. Each line is unwrapped once (parsers.prefix), then
tried against each format; what nobody recognises is counted, never fatal.
"""

from __future__ import annotations

from typing import Iterable

from parsers.model.events import Origin, Parsed
from parsers.prefix import strip_prefix
from parsers.readers import c10d, gloo, nccl_log, proxy_dump

_BENIGN = ("Traceback (most recent call last)", "File \"", "^^^", "~~~", "raise ", "return ", "work.wait()",
           "sys.exit(", "frame #", "Exception raised from", "Warning:", "warnings.warn(")


def parse_lines(lines: Iterable[str], file: str | None = None) -> Parsed:
    """Events from a mixed text log. `facts` gets the global rank/host the prefixes reveal."""
    out = Parsed(kind="rank-log")
    nccl_lines: list[str] = []
    block: list[str] | None = None
    ranks: dict[int, int] = {}
    benign = 0
    broken: tuple[str, Origin, list] | None = None  #: last unrecognised line, in case the next continues it
    for lineno, raw in enumerate(lines, 1):
        out.lines += 1
        text, pre = strip_prefix(raw)
        if pre.rank is not None:
            ranks[pre.rank] = ranks.get(pre.rank, 0) + 1
        if pre.host:
            out.facts.setdefault("host", pre.host)
        if block is not None:
            block.append(text)
            if proxy_dump.is_end(text):
                _proxy(out, block, file, lineno)
                block = None
            continue
        if not text:
            continue
        if proxy_dump.is_start(text):
            block = [text]
            continue
        if ("NCCL INFO" in text or "NCCL WARN" in text or "NCCL TRACE" in text) and nccl_log.looks_like(text):
            nccl_lines.append(raw)
            continue
        origin = Origin(host=pre.host, pid=pre.pid, rank=pre.rank, file=file, line=lineno)
        events = c10d.match_line(text, origin) or gloo.match_line(text, origin)
        if broken is not None and (not events or _generic(events)):
            # a hard wrap split one record over two lines ('... OpTy' + 'pe=ALLREDUCE ...'): rejoin
            joined = broken[0] + text
            rejoined = c10d.match_line(joined, broken[1]) or gloo.match_line(joined, broken[1])
            if rejoined and not _generic(rejoined):
                if broken[2]:  # drop the generic event the first half produced
                    del out.events[-len(broken[2]):]
                else:
                    out.unknown_lines -= 1
                out.facts["rejoined_lines"] = out.facts.get("rejoined_lines", 0) + 1
                out.events.extend(rejoined)
                broken = None
                continue
        broken = None
        if events:
            out.events.extend(events)
            if _generic(events):
                broken = (text, origin, events)
        elif text.startswith(_BENIGN) or text.lstrip().startswith(_BENIGN):
            benign += 1
        else:
            out.unknown_lines += 1
            broken = (text, origin, [])
    if block is not None:
        _proxy(out, block, file, out.lines)
    if nccl_lines:
        sub = nccl_log.parse_lines(nccl_lines, file)
        out.events.extend(sub.events)
        out.unknown_lines += sub.unknown_lines
        for key, value in sub.facts.items():
            out.facts.setdefault(key, value)
    if len(ranks) == 1:
        out.facts["rank"] = next(iter(ranks))
    elif ranks:  # a launcher-merged log of several ranks: each line keeps its own rank
        out.facts["ranks"] = sorted(ranks)
        out.facts.pop("rank", None)
    out.facts["benign_lines"] = benign
    return out


def _generic(events: list) -> bool:
    """Only an unspecific c10d error: the line may be the first half of a wrapped record."""
    return all(getattr(e, "kind", "") == "c10d-error" for e in events)


def _proxy(out: Parsed, block: list[str], file: str | None, lineno: int) -> None:
    ops, unknown = proxy_dump.parse_block(block)
    out.unknown_lines += unknown
    out.facts.setdefault("proxy_ops", []).extend(ops)

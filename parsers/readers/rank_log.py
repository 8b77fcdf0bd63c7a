"""A rank's stdout/stderr (or any text log): every line goes to the reader that knows it.

Why one dispatcher: real rank logs mix NCCL records (NCCL_DEBUG without a file),
c10d watchdog lines, gloo errors, proxy dumps, tracebacks and the user's own prints,
all behind launcher prefixes. Each line is unwrapped once (parsers.prefix), then
tried against each format; what nobody recognises is counted, never fatal.
"""

from __future__ import annotations

from typing import Iterable

from parsers.events import Origin, Parsed
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
        if events:
            out.events.extend(events)
        elif text.startswith(_BENIGN) or text.lstrip().startswith(_BENIGN):
            benign += 1
        else:
            out.unknown_lines += 1
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


def _proxy(out: Parsed, block: list[str], file: str | None, lineno: int) -> None:
    ops, unknown = proxy_dump.parse_block(block)
    out.unknown_lines += unknown
    out.facts.setdefault("proxy_ops", []).extend(ops)

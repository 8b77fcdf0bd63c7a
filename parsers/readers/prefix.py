"""Strip what launchers and log shippers glue in front of a line, keeping what it says.

Real logs arrive wrapped: Open MPI `[1,0]<stdout>:`, Slurm `--label` `11: `, Ray
`(RayTrainWorker pid=..., ip=...)` with ANSI colours, `host [stderr] `, timestamps,
console borders, PyTorch's `[rank3]:`. NCCL and c10d formats can only be matched once
these are gone, and what they say (host, rank, pid) is often the only place a line
names its origin, so it is kept in a LinePrefix instead of being thrown away.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
#: colour codes whose ESC byte was lost on the way (Ray's `[36m(RayTrainWorker ...`)
#: (`[m` alone only where no word goes on: Horovod's `[missing ranks: 1]` is text)
_ANSI_REMNANT = re.compile(r"(?<![\w\]])\[(?:\d{1,3}(?:;\d{1,3})*m|m(?![a-z]))")
_OMPI = re.compile(r"^(?:\w{3} \w{3} +\d+ \d\d:\d\d:\d\d \d{4})?\[(\d+),(\d+)\]<(?:stdout|stderr)>:")
#: Ray's `(Actor pid=P, ip=X)`: X is the node's address, or its host name where the cluster names nodes
#: (`ip=train-...-worker-0` on Kubernetes); either way it says which machine printed the line
_RAY = re.compile(r"^\((?P<who>[^()]*?)pid=(?P<pid>\d+)(?:, ip=(?P<ip>[0-9A-Za-z][\w.:-]{0,252}))?\)\s?")
#: (?<!\s): a match starts where a whitespace run starts, never inside one (a long run cost its square)
_RAY_REPEAT = re.compile(r"(?<!\s)\s*\[repeated \d++x across cluster\]\s*$")
_SHIPPER = re.compile(r"^(?P<host>[A-Za-z0-9][\w.-]*) \[(?:stdout|stderr)\]:? ?")
#: pdsh / DeepSpeed multi-node launcher: `worker-1: ...` (a host-like token: lower case, with a hyphen), or the
#: IPv4 address a hostfile listed (`202.197.0.170: [rank1]:[E...`)
#: one possessive run of host words (a lookahead asks for its '-'): no split of 'a-a-a-...' is tried twice
_PDSH = re.compile(r"^(?P<host>(?:\d{1,3}\.){3}\d{1,3}|(?=[a-z0-9.]*-[a-z0-9])[a-z0-9]++(?:[-.][a-z0-9]++)*+): ")
#: pdsh/clush with a host name of letters then digits (`gpu003: `, `node01: `), taken as a host only before what a
#: rank prints (a traceback, an NCCL record, `[rankN]:`, an indented traceback line) or nothing: such a word before
#: other text (`epoch12: loss ...`) is the program's own
_PDSH_SHORT = re.compile(r"^(?P<host>[a-z]{2,16}\d{1,5}):(?:$| (?=Traceback \(|\s*File \"|[\w.-]+:\d+:\d+ \[|\[rank\d|"
                         r"[\w.]*(?:Error|Exception)\b|\s+\S))")
_SLURM = re.compile(r"^\s*(\d{1,6}): ")
#: Open MPI's tag again inside a line: platforms that split a process's output into chunks re-insert it
#: before each chunk, down to one per token (horovod/horovod#1666: `[[1,0]<stderr>:2020-01-14 13:49:07[1,0]<stderr>:.`)
_OMPI_INNER = re.compile(r"\[(\d+),(\d+)\]<(?:stdout|stderr)>:")
#: a training platform's replica label after its timestamp (polyaxon: `2020-01-15 22:44:33 UTC master.0 -- `):
#: which replica printed the line, not a rank
#: a log collector's `<time> <host> >> ` (NVIDIA/nccl#1808: `2025-08-12 09:37:02.216313 worker-9 >> `)
_ARROW = re.compile(r"^(?P<host>[A-Za-z0-9][\w.-]{0,252}) >> ")
_REPLICA = re.compile(r"^(?:UTC|GMT) [A-Za-z][\w-]{0,63}\.\d{1,6} -- ")
_TORCH_RANK = re.compile(r"^\[rank(\d+)\]:")
#: torchrun's label of a worker's output with --tee/--redirects: `[default3]:` (role 'default', local rank 3;
#: NeMo: `[default0]:[rank0]: Traceback ...`); after _TORCH_RANK, so `[rank3]:` stays a global rank
TORCHRUN_LABEL = re.compile(r"^\[(?P<role>[A-Za-z_][\w-]{0,63}?)(?P<local>\d{1,6})\]:")
#: `[rankN]:[E...` glued after a progress bar or other text on the same line
_TORCH_RANK_GLUED = re.compile(r"\[rank(\d+)\]:(?=\[[EWIF])")
#: `[N] ` at the start: a launcher's rank label, or a log viewer's line number (the caller decides);
#: not when NCCL's own `[dev] ` bracket follows directly (a record whose host:pid:tid was cut), nor in
#: TORCH_NCCL_DESYNC_DEBUG's report, whose `[7] finished collective #182, but didn't join ...` and
#: `[7] finished ALLREDUCE` name the rank the report is about (parsers.readers.c10d), not the printer
_LABEL = re.compile(r"^\[(\d{1,7})\] (?!(?:[\w./-]+:\d+ )?NCCL )"
                    r"(?!(?:joined but didn't finish|finished) collective #"
                    r"|(?:started|finished) _?[A-Z][A-Z_]*\s*$)(?=\S)")
_ISO_TS = re.compile(
    r"^\[?\d{4}-\d\d-\d\d[ T]\d\d:\d\d(?::\d\d(?:[.,]\d+)?)?(?:Z|[+-]\d\d:?\d\d)?\]?(?: [-|] | - [\w.]+ - |\s+|$)"
)
#: Python logging level words left after a timestamp ('... - name - ERROR - msg')
_PY_LEVEL = re.compile(r"^(?:DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL|FATAL)\s*(?:-|:|\|)\s+")
#: vLLM / SGLang logger: `ERROR 08-03 13:35:33 [multiproc_executor.py:912] ` (minute-precision stamp)
_VLLM = re.compile(
    r"^(?P<lvl>DEBUG|INFO|WARNING|ERROR|CRITICAL) (?P<ts>\d\d-\d\d \d\d:\d\d:\d\d)(?:\.\d+)? \[?[\w.]+:\d+\]\s?"
)
#: an application logger's own rank label in capitals (SimpleTuner: `[RANK 4] 2026-05-19 10:10:29,604 [ERROR] `);
#: never c10d's `[Rank N]`, which is part of the record
_APP_RANK = re.compile(r"^\[RANK (\d{1,7})\] ")
#: Determined AI's trial log after its timestamp: '<8-hex trial container> [rank=2] || ' (determined-ai/determined#8915)
_DETERMINED = re.compile(r"^(?:[0-9a-f]{8} )?\[rank=(\d{1,7})\] \|\| ")
#: a bracketed level word after a timestamp (`[ERROR] `)
_PY_LEVEL_BRACKET = re.compile(r"^\[(?:DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL|FATAL)\]\s+")
_QUOTE = re.compile(r"^(?:>\s?)+")
#: a child's stream name before each of its lines, as a runner that captures the child's output echoes it (accelerate's
#: `accelerate test`: 'stderr: torch.distributed.elastic...ChildFailedError:', hiyouga/LlamaFactory#701)
_STREAM = re.compile(r"^(?:stdout|stderr): ")
#: pytest's report of a failure: `E       RuntimeError: ...` (the exception's lines, `E` then the line; `--tb=short`
#: indents by 3), a bare `E` for an empty one, and the summary's `FAILED tests/t.py::test_x - RuntimeError: ...`
_PYTEST_E = re.compile(r"^E(?: {3,}|$)")
_PYTEST_SUMMARY = re.compile(r"^(?:FAILED|ERROR) [\w/.-]{1,512}::\S{1,512} - ")
_BORDER = re.compile(r"^[│|┃]\s+")
_BORDER_END = re.compile(r"(?<!\s)\s+[│|┃]\s*$")  # starts where a whitespace run starts (linear)


@dataclass
class LinePrefix:
    """What the wrappers of one line said about where it came from."""

    host: str | None = None
    rank: int | None = None  #: global rank (launcher rank or PyTorch's [rankN])
    pid: int | None = None
    timestamp: str | None = None
    label: int | None = None  #: a bare `[N] ` in front: a rank label or a line number (caller decides)
    #: a Slurm-style `N: ` in front; also the start of a Horovod stall listing (`1: [tensor, ...]`), which
    #: the caller may know better (parsers.readers.horovod): then `rank_from_slurm` says the rank came from it
    slurm: int | None = None
    rank_from_slurm: bool = False
    local_rank: int | None = None  #: torchrun's `[<role><local rank>]:` (`--tee`): a local rank, never a global one


_FIELDS = tuple(LinePrefix.__dataclass_fields__)
#: lines stripped already (line -> payload, LinePrefix fields): logs repeat lines (progress bars, warnings, a
#: fuzzer's repetitions), and stripping is a pure function of the line; bounded, cleared when full
_SEEN: dict[str, tuple[str, tuple]] = {}
SEEN_LINES = 8192
SEEN_LINE_CHARS = 1024  #: longer lines are not kept (the memory stays under SEEN_LINES * this)


def strip_prefix(line: str) -> tuple[str, LinePrefix]:
    """Remove every known wrapper from the front of `line`; return the payload and what they said
    (a fresh LinePrefix each call: callers fill in what the file says besides)."""
    hit = _SEEN.get(line)
    if hit is not None:
        return hit[0], LinePrefix(*hit[1])
    text, info = _strip_prefix(line)
    if len(line) <= SEEN_LINE_CHARS:
        if len(_SEEN) >= SEEN_LINES:
            _SEEN.clear()
        _SEEN[line] = (text, tuple(getattr(info, f) for f in _FIELDS))
    return text, info


def _strip_prefix(line: str) -> tuple[str, LinePrefix]:
    """strip_prefix's work, for a line not seen before.

    Wrappers nest (Ray around a timestamp around `[rank0]:`), so strip until none matches.
    `[rankN]` names the global rank and wins over a launcher's label; a launcher's label
    wins over nothing. Host and pid come from Ray, log shippers and pdsh labels.
    """
    info = LinePrefix()
    if "\x1b" in line:
        line = _ANSI.sub("", line)
    text = line.rstrip("\r\n")
    if "m" in text and "[" in text:
        text = _ANSI_REMNANT.sub("", text)
    if "repeated" in text:
        text = _RAY_REPEAT.sub("", text)
    torch_rank: int | None = None
    for _ in range(12):
        stripped = text.lstrip()
        step = _strip_one(stripped, info)
        if step is None:
            break
        text, rank = step
        if rank is not None:
            torch_rank = rank
    else:
        stripped = text.lstrip()
    if "]<std" in stripped and info.rank is not None:  # the same process's tag again, inside the line
        stripped = _OMPI_INNER.sub(lambda t: "" if int(t.group(2)) == info.rank else t.group(0), stripped)
    m = _TORCH_RANK_GLUED.search(stripped)
    if m and torch_rank is None:  # '... 158.06s/i[rank0]:[E ...': a progress bar glued in front
        torch_rank = int(m.group(1))
        stripped = stripped[m.end():]
    if torch_rank is not None:
        info.rank = torch_rank
    if "│" in stripped or "┃" in stripped:
        stripped = _BORDER_END.sub("", stripped)
    return stripped, info


def _strip_one(text: str, info: LinePrefix) -> tuple[str, int | None] | None:
    """Peel one wrapper off `text`: (rest, torch rank if it was `[rankN]:`), or None when none matches."""
    if not _ANY_WRAPPER.match(text):
        return None  # the common case, a line with no wrapper (left): one C-level match instead of nineteen
    m = _OMPI.match(text)
    if m:
        if info.rank is None:
            info.rank = int(m.group(2))
        return text[m.end():], None
    m = _RAY.match(text)
    if m:
        info.pid = int(m.group("pid"))
        if m.group("ip"):
            info.host = m.group("ip")
        return text[m.end():], None
    m = _TORCH_RANK.match(text)
    if m:
        return text[m.end():], int(m.group(1))
    m = TORCHRUN_LABEL.match(text)
    if m:
        if info.local_rank is None:
            info.local_rank = int(m.group("local"))
        return text[m.end():], None
    m = _ISO_TS.match(text)
    if m and not _is_nccl_ts(text):
        info.timestamp = m.group(0).strip(" []-|")
        return text[m.end():], None
    m = _REPLICA.match(text)
    if m and info.timestamp:
        return text[m.end():], None
    m = _ARROW.match(text)
    if m and info.timestamp and info.host is None:
        info.host = short_host(m.group("host"))
        return text[m.end():], None
    m = _VLLM.match(text)
    if m:
        info.timestamp = info.timestamp or m.group("ts")
        return text[m.end():], None
    m = _PY_LEVEL.match(text) or _PY_LEVEL_BRACKET.match(text)
    if m and info.timestamp:
        return text[m.end():], None
    m = _APP_RANK.match(text) or _DETERMINED.match(text)
    if m:
        if info.rank is None:
            info.rank = int(m.group(1))
        return text[m.end():], None
    m = _SHIPPER.match(text)
    if m:
        info.host = short_host(m.group("host"))  # short name: what NCCL prints for the same host
        return text[m.end():], None
    m = _SLURM.match(text)
    if m:
        info.slurm = int(m.group(1))
        if info.rank is None:
            info.rank, info.rank_from_slurm = info.slurm, True
        return text[m.end():], None
    m = _PDSH.match(text) or _PDSH_SHORT.match(text)
    if m and info.host is None:
        info.host = m.group("host")
        return text[m.end():], None
    m = _LABEL.match(text)
    if m and info.label is None:
        info.label = int(m.group(1))
        return text[m.end():], None
    m = _PYTEST_E.match(text) or _PYTEST_SUMMARY.match(text)
    if m:
        return text[m.end():], None
    m = _QUOTE.match(text) or _STREAM.match(text)
    if m:
        return text[m.end():], None
    m = _BORDER.match(text)
    if m:
        return text[m.end():], None
    return None


_WRAPPERS = (_OMPI, _RAY, _TORCH_RANK, TORCHRUN_LABEL, _ISO_TS, _REPLICA, _ARROW, _VLLM, _PY_LEVEL, _PY_LEVEL_BRACKET,
             _APP_RANK, _DETERMINED, _SHIPPER, _SLURM, _PDSH, _PDSH_SHORT, _LABEL, _PYTEST_E, _PYTEST_SUMMARY, _QUOTE,
             _STREAM, _BORDER)
#: every pattern _strip_one tries, as one alternation (group names taken out: several share one): it matches
#: exactly when one of them does, so a line it does not match has no wrapper and skips the pattern-by-pattern walk
_ANY_WRAPPER = re.compile("|".join("(?:%s)" % re.sub(r"\(\?P<\w+>", "(?:", p.pattern) for p in _WRAPPERS))


_IPV4 = re.compile(r"(?:\d{1,3}\.){3}\d{1,3}")


def short_host(name: str) -> str:
    """The short name NCCL prints for a host: 'node1.cluster.local' -> 'node1'. An IPv4 address stays whole (its
    first octet names no machine), and a name a poster redacted to its tail ('...-48', lit-llama#380) keeps its
    leading dots: the tail is all that tells its lines from another host's."""
    if _IPV4.fullmatch(name):
        return name
    lead = len(name) - len(name.lstrip("."))
    return name[:lead] + name[lead:].split(".")[0]


def _is_nccl_ts(text: str) -> bool:
    """NCCL 2.26+ puts `[%F %T] ` before its own prefix: leave it for the NCCL reader."""
    return text.startswith("[") and " NCCL " in text[:200]


#: an interactive shell's prompt before a command: `zeyer@cn-234 ~ % nvidia-smi`, `root@node1:~# dmesg`,
#: `[user@gpu07 work]$ nvidia-smi` (user@host, an optional directory, then %, $ or #), after an optional
#: virtualenv/conda marker (`(venv) root@node1:~/kubespray# nvidia-smi`)
_PROMPT = re.compile(r"^(?:\([\w.-]{1,64}\) )?\[?[a-z_][\w.-]{0,31}@(?P<host>[A-Za-z0-9][\w.-]{0,62})"
                     r"(?::\S*|\s+\S+)?\]?\s?[%$#] +\S")


def prompt_host(text: str) -> str | None:
    """The host a pasted shell prompt names (short name), or None when `text` is not a prompt.

    Why: users paste `nvidia-smi` and `dmesg` output under the command they typed; the prompt is
    the only place that says which machine printed it, and it holds for the lines that follow.
    """
    m = _PROMPT.match(text)
    return m.group("host").split(".")[0] if m else None


_LEADING_LABEL = re.compile(r"^\s*\[(\d{1,7})\] ")


def labels_are_line_numbers(head: list[str]) -> bool:
    """True when the `[N] ` in front of a file's lines counts lines (a log viewer's numbering,
    `[80746] [rank0]:...`) rather than naming ranks (`[0] node0:13571:...`).

    Decided per file from its first lines: line numbers rise by one from line to line.
    """
    labels = []
    for raw in head[:200]:
        m = _LEADING_LABEL.match(raw)
        if m:
            labels.append(int(m.group(1)))
    if len(labels) < 3:
        return False
    steps = sum(1 for a, b in zip(labels, labels[1:]) if b == a + 1)
    return steps >= 0.8 * (len(labels) - 1)

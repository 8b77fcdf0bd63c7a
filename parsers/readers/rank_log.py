"""A rank's stdout/stderr (or any text log): every line goes to the reader that knows it.

Why one dispatcher: real rank logs mix NCCL records (NCCL_DEBUG without a file),
c10d watchdog lines, gloo errors, proxy dumps, launcher reports, pasted host evidence,
tracebacks and the user's own prints, all behind launcher prefixes. Lines broken by
hard wraps are re-joined first where it is safe (below), each line is unwrapped once
(parsers.readers.prefix), then tried against each format; what nobody recognises is counted,
and what looks like a known format but was not understood is reported (Parsed.unread).

Re-joining (field notes: wraps at 80/120 columns split tokens such as `OpTy`/`pe=`):
- a file whose long lines share one length W was hard-wrapped at W: a W-long line
  continues on the next line unless that line starts a record;
- a file whose lines carry a launcher prefix (Slurm, Ray, Open MPI, a shipper, pdsh)
  wrapped where a line has none;
- Python tracebacks wrapped between `File` / `"path",` / `line N, in f`, and the
  driver's multi-line NVRM messages;
- a line that only yields an unspecific c10d error is tried together with the next.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import replace
from itertools import chain, islice
from typing import Iterable, Iterator, cast

from parsers.model.events import (CollectiveStack, ErrorEvent, ErrorKind, Origin, Parsed, RankStated, WorkerReport,
                                  group_rank)
from parsers.readers.prefix import (_OMPI, _PDSH, _RAY, _SHIPPER, _SLURM, TORCHRUN_LABEL, labels_are_line_numbers,
                                    prompt_host, strip_prefix)
from parsers.readers import (c10d, faulthandler, fr_report, horovod, last_error, launcher, nccl_log, proxy_dump,
                             pyspy_text, textline)

HEAD_LINES = 2000
MIN_WRAP = 70
MAX_JOIN = 64  #: physical lines one logical line may absorb (bounded work on hostile input)
_LAUNCHER_PREFIXES = (_OMPI, _RAY, _SHIPPER, _SLURM, _PDSH)
#: what a new record looks like at the start of a line (so it is never glued to the previous one)
_RECORD_START = re.compile(
    r"^\s*(?:\[rank\d+\]:|\[[EWIF]\d*+[ \d:.]*+[\w.]+:\d+\]|[EWIF]\d{4} \d|\(\w[^()]*pid=\d+"
    r"|(?:\w{3} \w{3} +\d+ [\d:]+ \d{4})?\[\d+,\d+\]<"
    r"|\d{1,6}: |[\w.-]+:\d+:\d+ \[|\[\d{4}-\d\d-\d\d|\d{4}-\d\d-\d\d[ T]|frame #|Exception raised|Traceback"
    r"|terminate called"
    r"|(?:INFO|WARNING|ERROR|DEBUG|CRITICAL) |[\w.]*(?:Error|Exception|Warning)\b|NCCL |\S+ \[std(?:out|err)\]"
    r"|\[\d+\] |\[ *[\d.+]+\] |kernel: |NVRM|[│|┃>] |\$ |" + TORCHRUN_LABEL.pattern.lstrip("^")
    + r"|File \"|(?:Current thread|Thread) 0x|Fatal Python error: |" + fr_report.LINE_START + ")"
)
#: a record's own header a little way into a line, behind a wrapper no prefix pattern knows
#: (VITA-Audio #34: '【2025-09-25 14:27:49】[rank2]:[E ProcessGroupNCCL.cpp:563] ...'): such a line is a
#: record, not the continuation of a wrapped one, even when the lines share one length
_HEADER_NEAR_START = re.compile(r"\[rank\d+\]:|\[[EWIF]\d{0,4}+[ \d:.]*+[\w.]+\.(?:cpp|cc|py|h):\d+\]"
                                r"|:\d+:\d+ \[\d+\] NCCL ")
HEADER_WINDOW = 60
#: Open MPI's `--tag-output` tag at a physical line's start, with its stream (the chunk-per-line rejoin below)
_TAG = re.compile(r"^(?:\w{3} \w{3} +\d+ \d\d:\d\d:\d\d \d{4})?\[(\d{1,10}),(\d{1,10})\]<(stdout|stderr)>:")
#: a chunk that is only punctuation or blanks (`[`, `.`, `: `, `] `): never a line a program prints on its own
_PUNCT_CHUNK = re.compile(r"^[\s\[\](){}.,:;=|/-]{1,4}$")
#: a record that starts in the middle of a physical line, glued to the one before it (no newline between them:
#: a flattened paste, a missing newline): a Ray/vLLM worker prefix (`...incorrect.(RayWorkerVllm pid=5304) For
#: debugging`, vllm-project/vllm#2682), a vLLM/SGLang logger record or Gloo's connection line (`... backend=nccl DEBUG
#: 11-04 18:02:55 [distributed/parallel_state.py:1029] world_size=2 rank=1 ...`, vllm-project/vllm#21661)
_GLUED = re.compile(r"(?<=\S)(?=\((?:\w[\w ]{0,40} )?pid=\d{1,10}(?:, ip=[\w.:-]{1,64})?\) )"
                    r"|(?<=\S )(?=(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) \d\d-\d\d \d\d:\d\d:\d\d(?:\.\d{1,9})? \[)"
                    r"|(?<=\S )(?=\[Gloo\] Rank )"
                    #: a glog-style record (torchelastic, c10d: `W0201 10:55:55.570000 290975 .../api.py:897] `)
                    #: after a space, in a paste that lost its line breaks (huggingface/open-r1#152)
                    r"|(?<=\S )(?=[EWIF]\d{4} \d\d:\d\d:\d\d\.\d{1,9} \d{1,10} [\w./-]{1,256}:\d{1,7}\] )")
#: what a glued glog-style record needs (a blank, then `W0201 10:55:55.`): a cheap search that decides whether
#: _GLUED's four-way lookahead runs at all (it ran on every line with a `] `, ~19 us each)
_GLOG_INSIDE = re.compile(r"\s[EWIF]\d{4} \d\d:\d\d:\d\d\.")
MAX_PIECES = 64  #: records one physical line may be split into
#: a piece that is only a worker prefix: the record after it is that worker's, not glued to anything
_PREFIX_ONLY = re.compile(r"^\s*\((?:\w[\w ]{0,40} )?pid=\d{1,10}(?:, ip=[\w.:-]{1,64})?\)\s*$")
#: a traceback wrapped after `File` / after `"path",` (_Layout.continues tests these ends with str methods, the same
#: as a search for `File\s*$` and `"[^"]*",\s*$` on a line without its newline)
_TB_LINE = re.compile(r"^\s*line \d+, in ")


def parse_lines(lines: Iterable[str], file: str | None = None) -> Parsed:
    """Events from a mixed text log. `facts` gets the global rank/host the prefixes reveal."""
    return parse_pairs(enumerate(lines, 1), file)


def parse_pairs(pairs: Iterable[tuple[int, str]], file: str | None = None) -> Parsed:
    """parse_lines for (line number, line) pairs picked out of a bigger file (logscan's full scan
    leaves out runs of NCCL op lines): records keep their real line numbers, and a hard wrap is
    re-joined only across lines that were neighbours in the file."""
    out = Parsed(kind="rank-log")
    it = iter(pairs)
    head = list(islice(it, HEAD_LINES))
    head_text = [t for _, t in head]
    scan = _Scan(out, file, head_text)
    for lineno, raw in _split_glued(_logical_lines(chain(head, it), _Layout(head_text), out), out):
        scan.line(lineno, raw)
    return scan.finish()


class _Scan:
    """One pass over a rank log's logical lines: the state that spans lines (open multi-line blocks, the
    last unrecognised line that the next may continue, the host of a pasted shell prompt, the ranks seen).

    Why a class: the line loop keeps a dozen pieces of state across lines; as methods, each step of a
    line's path (blocks, one-line records, re-joining a wrapped record, noting the rest) is one small
    function instead of one 170-line loop."""

    def __init__(self, out: Parsed, file: str | None, head_text: list[str]) -> None:
        self.out = out
        self.file = file
        self.numbered = labels_are_line_numbers(head_text)
        #: a `[N] ` label that the file calls a pid elsewhere is that pid, not a rank
        self.pids = _pids_named(head_text)
        self.nccl_pairs: list[tuple[int, str]] = []
        self.block: list[str] | None = None
        self.elastic = launcher.ElasticBlock()
        self.mpirun = launcher.MpirunBlock()  #: Open MPI's banners: the first process to exit, a lost MPI peer
        self.fr_block = fr_report.FrReportBlock()  #: the Flight Recorder analyzer's findings, pasted with the output
        self.dumps = faulthandler.FaulthandlerBlock()  #: Python faulthandler dumps (an abort, forensics.arm()'s stacks)
        self.spy = pyspy_text.PySpyBlock()  #: py-spy dumps pasted with the job's output (SGLang's crash diagnostics)
        self.stalls = horovod.StallBlock()  #: Horovod's stall inspector reports (its `<rank>: [...]` listings)
        self.reasons = last_error.LastErrorBlock()  #: NCCL's reason under a c10d NCCL error's 'Last error:' heading
        #: per writer (Origin.writer): the failed collective's stack whose frame lines come next (c10d.COLLECTIVE_STACK)
        self.call_sites: dict[tuple, object] = {}
        self.ranks: dict[int, int] = {}
        self.benign = 0
        self.broken: tuple[str, Origin, list] | None = None  #: last unrecognised line, in case the next continues it
        self.after_frame = False  #: the previous line was a traceback `File "..."` line: this one may echo its source
        self.shell_host: str | None = None  #: host of the last pasted shell prompt: the output below it is that host's
        self.pid_rank: dict[tuple, int] = {}  #: (host, pid) -> the rank that process said it is (`world_size=2 rank=1`)
        self.per_node: set[int] = set()  #: `[rankN]:` prefixes a default-group tag shows to be per-node labels

    def line(self, lineno: int, raw: str) -> None:
        """Take one logical line: a block's line, a record, a wrapped record's second half, or noted as unread."""
        out = self.out
        if textline.is_absurd(raw):
            out.unknown_lines += 1
            return
        text, pre = strip_prefix(textline.matched_part(raw))
        listed = self.stalls.listed_rank(text, pre.slurm)
        if listed is not None and pre.rank_from_slurm:  # a stall listing's `<rank>: `, not whose line it is
            pre.rank = None
        echo, self.after_frame = self.after_frame, text.startswith('File "')
        prompted = prompt_host(text) if "@" in text[:100] else None
        if prompted:
            self.shell_host = prompted
            self.benign += 1
            return
        origin = self._origin(pre, lineno)
        if self.block is not None:
            self.block.append(text)
            if proxy_dump.is_end(text):
                _proxy(out, self.block)
                self.block = None
            return
        if self._taken_by_block(text, origin, listed):
            return
        if lineno <= HEAD_LINES and (armed := faulthandler.trigger_identity(text)):
            for key in ("rank", "pid", "host"):
                out.facts.setdefault(key, armed[key])
            self.benign += 1
            return
        if proxy_dump.is_start(text):
            self.block = [text]
            return
        if "NCCL" in text and nccl_log.looks_like_line(text):
            self.nccl_pairs.append((lineno, raw))
            return
        taken, reason = self.reasons.feed(raw, text, origin)
        if taken:
            self.benign += 1
            return
        events = textline.match_text(text, origin)
        self.reasons.saw(events, origin)
        events = events or reason  # the reason's own record (a socket error, ...) says more than 'the reason'
        if self._rejoined(text, events):
            return
        self.broken = None
        self._note(lineno, text, origin, events, echo)

    def _origin(self, pre, lineno: int) -> Origin:
        """Where the line comes from: its prefix's host/pid/rank, completed by the shell prompt above it and by
        the rank its process said it is; counts the line for its rank."""
        if pre.host is None:
            pre.host = self.shell_host
        if pre.rank is None and pre.pid is not None and self.pid_rank:
            pre.rank = self.pid_rank.get((pre.host, pre.pid))
        rank = pre.rank if pre.rank is not None else (None if self.numbered or pre.label in self.pids else pre.label)
        if rank is not None:
            self.ranks[rank] = self.ranks.get(rank, 0) + 1
        if pre.host:
            self.out.facts.setdefault("host", pre.host)
        return Origin(host=pre.host, pid=pre.pid, rank=rank, file=self.file, line=lineno, local_rank=pre.local_rank)

    def _taken_by_block(self, text: str, origin: Origin, listed) -> bool:
        """Feed the multi-line readers (torchelastic and mpirun reports, Flight Recorder findings, faulthandler
        and py-spy dumps, a failed collective's stack, Horovod's stall listings); True when one took the line
        (an empty line is taken too: nothing after them reads it)."""
        for feeder in (self.elastic, self.mpirun, self.fr_block):
            taken, done = feeder.feed(text, origin)
            self.out.events.extend(done)
            if taken:
                return True
        taken, done = self.dumps.feed(text, origin)
        self.out.events.extend(done)
        if taken or self.spy.feed(text, origin):
            return True
        if self.call_sites and _call_site_frame(self.call_sites, text, origin):
            return True
        if not text:
            return True
        taken, done = self.stalls.feed(text, origin, listed)
        self.out.events.extend(done)
        return taken

    def _rejoined(self, text: str, events: list) -> bool:
        """The last unrecognised (or only generically recognised) line and this one are one record wrapped
        mid-token or mid-sentence: replace what the first half gave with the joined record's events."""
        broken, out = self.broken, self.out
        if broken is None:
            return False
        sentence = _continues(broken, text, events)
        if events and not _generic(events) and not sentence:
            return False
        joined = broken[0] + text  # a record wrapped mid-token (`OpTy`/`pe=`, `NCCL wor`/`k: 15`)
        rejoined = textline.match_text(joined, broken[1])
        if sentence and not broken[0].endswith(" "):  # or a sentence wrapped at a space the wrap took
            spaced = textline.match_text(broken[0] + " " + text, broken[1])
            if len(spaced) > len(rejoined) and not _generic(spaced):
                rejoined = spaced
        if not rejoined or _generic(rejoined):
            return False
        if broken[2]:  # drop the generic event the first half produced
            del out.events[-len(broken[2]):]
        elif broken[1].line in {ln for ln, _ in out.unread[-1:]}:
            out.unread.pop()
            out.facts["unread_lines"] -= 1
            out.unknown_lines -= 1
        else:
            textline.unnote_unknown(out, broken[1].line)
        out.facts["rejoined_lines"] = out.facts.get("rejoined_lines", 0) + 1
        out.events.extend(rejoined)
        self.broken = None
        return True

    def _note(self, lineno: int, text: str, origin: Origin, events: list, echo: bool) -> None:
        """Keep a line's events (and what they say about the file: a failed collective's stack to come, a
        process's rank, the job's size); else count it benign, or note it unread for the next line to continue."""
        out = self.out
        if events:
            out.events.extend(events)
            _note_per_node(events, origin, self.per_node)
            for e in events:
                if getattr(e, "kind", "") == c10d.COLLECTIVE_STACK:
                    self.call_sites[origin.writer] = e
                elif getattr(e, "kind", "") == ErrorKind.RANK_IDENTITY:
                    _identity_said(out, e, self.pid_rank, self.ranks)
                elif getattr(e, "kind", "") == launcher.SIZE_KIND:  # a launch line's word on the job's size
                    stated = cast(RankStated, e.data).world_size or 0
                    out.facts["world_size"] = max(out.facts.get("world_size") or 0, stated)
            if _generic(events):
                self.broken = (text, origin, events)
        elif textline.is_benign(text) or echo:
            self.benign += 1
        elif textline.looks_known(text):
            out.note_unread(lineno, text)
            self.broken = (text, origin, [])
        else:
            textline.note_unknown(out, lineno, text)
            self.broken = (text, origin, [])

    def finish(self) -> Parsed:
        """Close the open blocks, read the NCCL lines set aside, and say whose file this is."""
        out, ranks = self.out, self.ranks
        out.events.extend(self.elastic.finish())
        out.events.extend(self.mpirun.finish())
        out.events.extend(self.fr_block.finish())
        self.dumps.finish()
        self.spy.finish()
        out.stacks.extend(self.dumps.stacks)
        out.stacks.extend(self.spy.stacks)
        for resolved in _local_ranks_resolved(out):
            ranks[resolved] = ranks.get(resolved, 0) + 1
        _drop_per_node(out, self.per_node, ranks)
        if self.dumps.dropped:
            out.problems.append(f"faulthandler dumps: {self.dumps.dropped} frames beyond the reader's bounds "
                                "were not kept")
        if self.block is not None:
            _proxy(out, self.block)
        if self.nccl_pairs:
            _nccl_lines(out, nccl_log.parse_numbered(self.nccl_pairs, self.file, numbered=self.numbered))
        if len(ranks) == 1:
            out.facts["rank"] = next(iter(ranks))
        elif ranks:  # a launcher-merged log of several ranks: each line keeps its own rank
            out.facts["ranks"] = sorted(ranks)
            out.facts.pop("rank", None)
            # nor is it one process's: an NCCL line of one of them does not give the file its pid (which every
            # line without one would then take: torchrun's own traceback became 'pid 504's' in nccl_tee/diverge)
            out.facts.pop("pid", None)
        out.facts["benign_lines"] = self.benign
        return out


def _nccl_lines(out: Parsed, sub: Parsed) -> None:
    """Add what the NCCL reader found in the lines set aside for it: events, counts, and facts the log's own
    lines did not already give."""
    out.events.extend(sub.events)
    out.unknown_lines += sub.unknown_lines
    out.unread.extend(sub.unread)
    sample = sorted(out.facts.get("unknown_sample", []) + sub.facts.pop("unknown_sample", []))
    if sample:
        out.facts["unknown_sample"] = sample[:textline.UNKNOWN_SAMPLE]
    for key, value in sub.facts.items():
        out.facts.setdefault(key, value)


class _Layout:
    """What the first lines say about how the file was broken: its wrap width, whether its
    lines carry a launcher prefix."""

    def __init__(self, head: list[str]) -> None:
        lengths = [len(ln.rstrip("\r\n")) for ln in head if ln.strip()]
        long = [n for n in lengths if n >= MIN_WRAP]
        self.width: int | None = None
        if long:
            width, count = Counter(long).most_common(1)[0]
            if count >= 3 and count >= 0.3 * len(long):
                self.width = width
        nonempty = [ln for ln in head if ln.strip()]
        self.prefixed = len(nonempty) >= 3 and _share_at_least(nonempty, 0.6)

    @staticmethod
    def chunk(prev_segment: str, prev: str, nxt: str, joins: int) -> str | None:
        """`nxt` without its tag, where it is the next chunk of the same record as `prev`; else None.

        Why: Open MPI tags every chunk a process writes (`--tag-output`), so a record written in pieces gets
        its tag again before each piece (horovod/horovod#1666: `[1,0]<stderr>:2020-01-14 13:49:07[1,0]<stderr>:.`);
        a platform that also ends each chunk with a newline leaves one token a line. A chunk continues the record
        where it or the one before is punctuation only (`[`, `.`, `] `), or where a joined run still has a
        bracket open. A long chunk ends the run, as the end of the record's text does.
        """
        a, b = _TAG.match(prev_segment), _TAG.match(nxt)
        if a is None or b is None or a.groups() != b.groups():
            return None
        before, after = prev_segment[a.end():].rstrip("\r\n"), nxt[b.end():].rstrip("\r\n")
        if not after or len(before) > 64:
            return None
        if _PUNCT_CHUNK.match(before) or _PUNCT_CHUNK.match(after):
            return after
        if joins and (prev.count("[") > prev.count("]") or prev.count("(") > prev.count(")")):
            return after
        return None

    def continues(self, prev_segment: str, prev: str, nxt: str) -> str | None:
        """The separator to join `nxt` onto the logical line `prev` with, or None to keep them apart."""
        if not nxt.strip() or nxt.rstrip() == prev_segment.rstrip():
            return None  # a repeated line is a new record (the same message again), never its own continuation
        end = prev.rstrip()  # `File\s*$` and `"[^"]*",\s*$` tested by str methods, no regex per line
        if end.endswith("File") and nxt.lstrip().startswith('"'):
            return " "
        if end.endswith('",') and end.rfind('"', 0, len(end) - 2) >= 0 and _TB_LINE.match(nxt):
            return " "
        if "NVRM:" in prev and nxt[:1].isspace() and nxt.lstrip().startswith("NVRM:"):
            return " "
        if self.width is None and not self.prefixed:
            return None  # no wrap width, no launcher prefixes: nothing below could join them (no regex per line)
        if _RECORD_START.match(nxt) or _HEADER_NEAR_START.search(nxt[:HEADER_WINDOW]):
            return None
        labelled = any(p.match(nxt.lstrip()) for p in _LAUNCHER_PREFIXES)
        wrapped = self.width is not None and len(prev_segment.rstrip("\r\n")) == self.width
        if wrapped and not (self.prefixed and labelled):
            return ""  # (a launcher's label starts a record: pdsh's boxes of a rich traceback share one width)
        if self.prefixed and not labelled:
            return ""
        return None


def _share_at_least(lines: list[str], share: float) -> bool:
    """Whether at least `share` of `lines` start with a launcher's prefix; the count stops once the answer is
    known (a log without prefixes: after 40% of its head lines, not all 2,000)."""
    need, left, have = share * len(lines), len(lines), 0
    for ln in lines:
        if have >= need or have + left < need:
            break
        left -= 1
        if any(p.match(ln.lstrip()) for p in _LAUNCHER_PREFIXES):
            have += 1
    return have >= need


def _logical_lines(pairs: Iterable[tuple[int, str]], layout: _Layout, out: Parsed) -> Iterator[tuple[int, str]]:
    """(number of the first physical line, logical line) after re-joining hard wraps."""
    pending: tuple[int, str, str, int] | None = None  #: (lineno, text so far, last physical segment, joins)
    last = 0  #: number of the previous physical line: a wrap continues only on the very next one
    for lineno, raw in pairs:
        out.lines += 1
        if pending is not None:
            start, text, segment, joins = pending
            near = lineno == last + 1
            piece = layout.chunk(segment, text, raw, joins) if near and joins < MAX_JOIN else None
            if piece is not None:  # one chunk of a record a line, each behind its tag: the record again
                pending = (start, text + piece, raw, joins + 1)
                out.facts["rejoined_chunks"] = out.facts.get("rejoined_chunks", 0) + 1
                last = lineno
                continue
            sep = layout.continues(segment, text, raw) if near and joins < MAX_JOIN else None
            if sep is not None:
                piece = raw.rstrip("\r\n")
                if sep:
                    piece = piece.lstrip()
                pending = (start, text + sep + piece, raw, joins + 1)
                out.facts["rejoined_lines"] = out.facts.get("rejoined_lines", 0) + 1
                last = lineno
                continue
            yield start, text
        pending = (lineno, raw.rstrip("\r\n"), raw, 0)
        last = lineno
    if pending is not None:
        yield pending[0], pending[1]


def _split_glued(lines: Iterable[tuple[int, str]], out: Parsed) -> Iterator[tuple[int, str]]:
    """Each logical line, cut where another record starts in its middle (_GLUED); the pieces keep its number."""
    for lineno, text in lines:
        if len(text) < 40 or ("pid=" not in text and " DEBUG " not in text and " INFO " not in text
                              and " WARNING " not in text and " ERROR " not in text and "[Gloo]" not in text
                              and " CRITICAL " not in text and not _GLOG_INSIDE.search(text)):
            yield lineno, text
            continue
        start = 0
        for n, m in enumerate(_GLUED.finditer(text)):
            if n >= MAX_PIECES:
                break
            if m.start() > start and not _PREFIX_ONLY.match(text, start, m.start()):
                yield lineno, text[start:m.start()]
                out.facts["split_records"] = out.facts.get("split_records", 0) + 1
                start = m.start()
        yield lineno, text[start:]


def _identity_said(out: Parsed, e, pid_rank: dict, ranks: dict[int, int]) -> None:
    """A process said its rank and the job's size: the size is the job's, the rank is that process's (and the
    line is one of that rank's, whatever prefix it lost)."""
    said: RankStated = e.data  # the model bounds both (plausible_rank, plausible_size): None where implausible
    rank = said.rank
    if rank is not None and e.origin.rank in (None, rank):
        ranks[rank] = ranks.get(rank, 0) + 1
    if said.world_size is not None:
        out.facts["world_size"] = max(out.facts.get("world_size") or 0, said.world_size)
    if e.origin.pid is not None and rank is not None:
        pid_rank.setdefault((e.origin.host, e.origin.pid), rank)


def _call_site_frame(open_stacks: dict, text: str, origin: Origin) -> bool:
    """Add a line's frame to its stream's open failed-collective stack; a line of that stream that is
    no frame closes it. True when the line was a frame."""
    key = origin.writer
    event = open_stacks.get(key)
    if event is None:
        return False
    frame = c10d.collective_frame(text)
    if frame is None:
        del open_stacks[key]
        return False
    frames = cast(CollectiveStack, event.data).frames  # the heading's event: its list fills from the lines below
    if len(frames) < c10d.MAX_STACK_FRAMES:
        frames.append(frame)
    return True


def _retagged(e, prefix: int | None) -> bool:
    """Whether c10d gave this event the default group's own `Rank r` over a `[rankN]:` prefix that disagrees."""
    o = getattr(e, "origin", None)
    return (prefix is not None and o is not None and o.rank is not None and o.rank != prefix
            and getattr(e, "comm", None) == "pg:0" and type(e) is ErrorEvent and group_rank(e) == o.rank)


def _note_per_node(events: list, origin: Origin, per_node: set[int]) -> None:
    """The line's `[rankN]:` is a per-node label where its own default-group tag names another rank (torchtitan-
    style output keeps each node's local rank in the prefix: `[rank0]:` before `[PG ID 0 PG GUID 0(default_pg)
    Rank 4]`, pytorch/torchtitan#810)."""
    if any(_retagged(e, origin.rank) for e in events):
        per_node.add(origin.rank)


def _drop_per_node(out: Parsed, per_node: set[int], ranks: dict[int, int]) -> None:
    """A prefix shown to be per-node names no global rank anywhere in the file: it is not counted as one of the
    file's ranks, and a record that has only it for a rank keeps it as its local rank instead (one node's
    `[rank0]:` is every node's, so a frame line behind it may be any of them)."""
    if not per_node:
        return
    for p in per_node:
        ranks.pop(p, None)
    for item in chain(out.events, out.stacks):
        o = getattr(item, "origin", None)
        if o is None or o.rank not in per_node:
            continue
        if getattr(item, "comm", None) == "pg:0" and type(item) is ErrorEvent and group_rank(item) == o.rank:
            continue  # its own default-group tag says this rank: a global rank after all
        item.origin = replace(o, rank=None, local_rank=o.rank if o.local_rank is None else o.local_rank)
    out.facts["per_node_prefixes"] = sorted(per_node)


#: torchelastic's reports of its workers
_AGENT_KINDS = (ErrorKind.CHILD_FAILURE, ErrorKind.ROOT_CAUSE, ErrorKind.LAUNCHER_EXIT)


def _local_ranks_resolved(out: Parsed) -> list[int]:
    """Give lines labelled only with a local rank (torchrun's `[default3]:`) the global rank and pid that
    torchelastic's own failure report in the same file gives that local rank; the ranks so given.

    Why only from that report: a local rank is the worker's place on its host, and the agent's table
    (`rank: 3 (local_rank: 3)`, `pid`) is the one line that ties it to a global rank. A local rank the
    report maps to two ranks (agents of several hosts in one file) stays unmapped."""
    rank_of: dict[int, set] = {}
    pid_of: dict[int, set] = {}
    for e in out.events:
        said = e.data if type(e) is ErrorEvent and e.kind in _AGENT_KINDS else None
        if type(said) is WorkerReport and said.local_rank is not None:
            if said.rank is not None:
                rank_of.setdefault(said.local_rank, set()).add(said.rank)
            if said.pid is not None:
                pid_of.setdefault(said.local_rank, set()).add(said.pid)
    if not rank_of and not pid_of:
        return []
    given = []
    for item in chain(out.events, out.stacks):
        o = getattr(item, "origin", None)
        if o is None or o.local_rank is None or o.rank is not None:
            continue
        if len(rank_of.get(o.local_rank, ())) == 1:
            o.rank = next(iter(rank_of[o.local_rank]))
            given.append(o.rank)
        if o.pid is None and len(pid_of.get(o.local_rank, ())) == 1:
            o.pid = next(iter(pid_of[o.local_rank]))
    return given


#: without its leading word boundary, which `_pids_named` tests (the pattern then starts with a literal, found fast)
_PID_NAMED = re.compile(r"pid\s?[:=]\s?(\d{1,10})\b", re.IGNORECASE)


def _pids_named(head: list[str]) -> set[int]:
    """Process ids the first lines name as such (`PID:163686`, `[PID: 163686]`, Ray's `pid=1230`).

    Why: some loggers label each line with the process id in the same `[N] ` form a launcher uses
    for a rank (torch_npu: `[163686] [2026-07-07 07:20:43:938] torch.distributed: [ERROR] ...`, sglang
    #30453, whose other lines say `(PID:163686, Device:1, ...)`); such a label is no rank."""
    # one search over the lines joined by a NUL (no part of the pattern matches it, and a word boundary next to it
    # is one at a line's end), `\bpid` tested by hand: the matches of `\bpid...` line by line, 5x faster
    text = "\0".join(line[:4096] for line in head)
    return {int(m.group(1)) for m in _PID_NAMED.finditer(text) if not _word_before(text, m.start())}


def _word_before(text: str, at: int) -> bool:
    """Whether a word character (as `\\b` tells one: alphanumeric or `_`) comes right before `at`."""
    return at > 0 and (text[at - 1].isalnum() or text[at - 1] == "_")


def _continues(broken: tuple, text: str, events: list) -> bool:
    """A line that goes on with the sentence an unspecific c10d error stopped in (`... Exception (either an error or
    timeout) detected` / `by watchdog at work: 2070, last enqueued ...`, milabench #269, wrapped by hand): it starts
    in lower case, says no error of its own (`terminate called ...` does: a record of its own), and the line
    before it yielded only that generic error."""
    return bool(broken[2]) and text[:1].islower() and not any(type(e) is ErrorEvent for e in events)


def _generic(events: list) -> bool:
    """Only an unspecific c10d error: the line may be the first half of a wrapped record."""
    return all(getattr(e, "kind", "") == ErrorKind.C10D_ERROR for e in events)


def _proxy(out: Parsed, block: list[str]) -> None:
    ops, unknown = proxy_dump.parse_block(block)
    out.unknown_lines += unknown
    out.facts.setdefault("proxy_ops", []).extend(ops)

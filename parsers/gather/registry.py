"""The one reader registry: every kind of evidence file, how it is recognised, read, and written.

Why one table: a bundle's manifest, a loose folder and an archive all reach the
readers through here, and the collectors name their files with the names declared
here (`collector_file`, `collector_folder`: asking for a kind a collector does not
write is a programming error), so recognition and collection cannot drift apart.
A collector that copies files under their own names (Flight Recorder dumps, NCCL
logs, recorder state files) takes the folder it puts them in from here; a second
file of one name in one folder is written as `2.<name>` (bundle.writer.unique_name). A kind is recognised by its
file name when a collector of ours wrote it (and the content agrees), otherwise by
content alone, in the order of `KINDS`: names lie in users' folders, content does not.

Reading is total: a reader returns a `Parsed` (events, stacks, process state, host
facts, notes) or raises ValueError/OSError, which the pipeline records as a problem
of that file; nothing here stops the analysis.
"""

from __future__ import annotations

import fnmatch
import io
import re
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

from parsers.input import bounded_json
from parsers.readers import prefix
from parsers.model.manifest import collector_name
from parsers.model.events import Origin, Parsed
from parsers.readers import (exception, faulthandler, flight_recorder, fr_report, gdb, gdb_text, host_ib, host_kernel,
                             host_nvml, host_nvsmi, host_system, launcher,
                             native_stack, nccl_log, pasted_host, proc, pyspy, pyspy_samples, pyspy_text, rank_log, ras,
                             recorder,
                             second_look)
from parsers.input.errors import FileFormatError
from parsers.steps.series import parse_series

HEAD_BYTES = 64 * 1024
#: the largest text file read whole; larger logs are read as head + tail (see read_text_lines)
MAX_TEXT_BYTES = 2 * 1024 * 1024 * 1024
#: the largest JSON/XML file parsed whole
MAX_DOC_BYTES = 256 * 1024 * 1024

#: line-oriented kinds whose real files are small (a host's or a process's snapshot, an analyzer's report): a
#: reader sees the first this many bytes, to a line end, and the rest is recorded as not read. Why: each such
#: reader runs 2-10 MB/s on hostile shapes (a 32 MB RAS text of 80 KB lines took over 5 s), while the largest
#: real ones are kilobytes (a py-spy dump of 1,000 threads is about 3 MB); see Kind.max_bytes
SNAPSHOT_BYTES = 4 * 1024 * 1024
SMALL_TEXT_BYTES = 1024 * 1024

#: scopes: whose evidence a file is
RANK, HOST, JOB = "rank", "host", "job"


@dataclass(frozen=True)
class ReadInput:
    """What a reader gets: the file, its first bytes, its size, what is known of its origin."""

    path: Path
    head: bytes
    size: int
    origin: Origin
    line_filter: Callable[[int, str], None] | None = None  #: sees every text line once (knowledge-base lines)
    observed_ns: int | None = None  #: recorder files: when the collector copied them
    limit: int | None = None  #: the kind's max_bytes: a reader sees the file's first `limit` bytes, to a line end

    @property
    def cut(self) -> bool:
        """The file is larger than its kind's limit: the reader sees only its first part."""
        return self.limit is not None and self.size > self.limit

    @property
    def whole(self) -> bool:
        """The head holds the whole file (most collector files): no second read needed."""
        return self.size <= len(self.head)

    def first_part(self) -> bytes:
        """The first `limit` bytes of a cut file, ending at its last whole line (all of them if no line ends)."""
        assert self.limit is not None
        if len(self.head) >= self.limit:
            data = self.head[:self.limit]
        else:
            with open(self.path, "rb") as fh:
                data = fh.read(self.limit)
        end = data.rfind(b"\n")
        return data[:end + 1] if end >= 0 else data

    def text(self) -> str:
        if self.cut:
            return self.first_part().decode("utf-8", errors="replace")
        if self.size > MAX_DOC_BYTES:
            raise FileFormatError(f"file too large to parse whole ({self.size} bytes)")
        if self.whole:
            return self.head.decode("utf-8", errors="replace")
        return self.path.read_text(encoding="utf-8", errors="replace")


@dataclass(frozen=True)
class Kind:
    """One kind of evidence file."""

    name: str
    scope: str  #: RANK, HOST or JOB
    what: str  #: one line for `--help`, docs and 'skipped' notes
    read: Callable[[ReadInput], Parsed] | None  #: None: recognised but not evidence (skipped with a reason)
    sniff: Callable[[bytes, bool], bool] | None = None  #: content test on the head (complete: head is the file)
    names: tuple[str, ...] = ()  #: file names our collector writes (fnmatch patterns)
    collector: str | None = None  #: the collector that writes it
    text_stream: str | None = None  #: knowledge-base stream for its lines ('rank-log', 'kernel')
    name_sniff: Callable[[bytes, bool], bool] | None = None  #: looser content test when our file name matches
    folder: str | None = None  #: the rank-folder subfolder a collector copies these files into, keeping their names
    #: line-oriented kinds only: the most of a file its reader sees (ReadInput.limit); None: the whole file
    max_bytes: int | None = None

    def file_name(self, **fields: Any) -> str:
        """The name a collector gives this kind's file (the first pattern, formatted)."""
        return self.names[0].format(**fields)


# ----------------------------------------------------------------------------- content tests


def _json_head(head: bytes) -> str | None:
    text = head.lstrip()[:HEAD_BYTES].decode("utf-8", errors="replace")
    return text if text[:1] in "{[" else None


def _json_has(*needles: str) -> Callable[[bytes, bool], bool]:
    def test(head: bytes, complete: bool) -> bool:
        text = _json_head(head)
        return text is not None and all(n in text for n in needles)
    return test


def _text_has(*needles: str, within: int = 4096) -> Callable[[bytes, bool], bool]:
    raw = [n.encode() for n in needles]

    def test(head: bytes, complete: bool) -> bool:
        part = head[:within]
        return any(n in part for n in raw)
    return test


def _is_environment(head: bytes, complete: bool) -> bool:
    """Our environ.json: one flat object of variable names (a PATH or RANK key among them)."""
    text = _json_head(head)
    return (text is not None and text.startswith("{")
            and ('"PATH"' in text or '"RANK"' in text or '"WORLD_SIZE"' in text)
            and '"pg_status"' not in text and '"threads"' not in text)


_NCCL_REC = re.compile(rb"[\w.-]{1,253}:\d{1,10}:\d{1,10} \[[^\]\n]{0,16}\] (?:[\w./-]{1,200}:\d{1,7} )?NCCL "
                       rb"(?:INFO|WARN|TRACE)")
#: a parallel shell's `node044: ` or `srun --label`'s `3: ` before a kernel line (parsers.readers.host_kernel)
_LABEL = rb"(?:[A-Za-z0-9][\w.-]{0,252}: |[ \t]{0,16}\d{1,6}: )?"
_KERNEL_LINE = re.compile(_LABEL + rb"(?:<\d>)?\[[ \t]{0,16}"
                          rb"(?:\d{1,12}\.\d{1,9}|\w{3} \w{3} [ \d]\d [\d:]{8} \d{4})\] ", re.M)
#: syslog, journalctl short / short-precise / short-iso / short-monotonic ('kernel[PID]:' through the journal)
_JOURNAL_LINE = re.compile(_LABEL + rb"(?:\w{3} [ \d]\d "
                                    rb"[\d:]{8}(?:\.\d{1,9})?|\d{4}-\d\d-\d\dT[\d:.,]{1,32}(?:[+-]\d\d:?\d\d|Z)?"
                           rb"|\[[ \t]{0,16}\d{1,12}\.\d{1,9}\]) \S{1,255} kernel(?:\[\d{1,10}\])?: ", re.M)


def _is_nccl_log(head: bytes, complete: bool) -> bool:
    lines = [ln for ln in head[:HEAD_BYTES].splitlines()[:400] if ln.strip()]
    return bool(lines) and sum(1 for ln in lines if _NCCL_REC.search(ln[:2048])) * 2 >= len(lines)


def _is_kernel_log(head: bytes, complete: bool) -> bool:
    lines = [ln for ln in head[:HEAD_BYTES].splitlines()[:400] if ln.strip()]
    if not lines:
        return False
    start = head[:HEAD_BYTES]
    if ((b"\n    _TRANSPORT=kernel" in start or b"\n    SYSLOG_IDENTIFIER=kernel" in start)
            and host_kernel.is_verbose_journal(start.decode("utf-8", errors="replace"))):
        return True  # journalctl -k -o verbose
    hits = sum(1 for ln in lines if _KERNEL_LINE.match(ln) or _JOURNAL_LINE.match(ln))
    return hits * 2 >= len(lines)


def _is_json_object(head: bytes, complete: bool) -> bool:
    text = _json_head(head)
    return text is not None and text.startswith("{")


def _is_nvsmi_text(head: bytes, complete: bool) -> bool:
    """nvidia-smi -q text: its banner, or (a pasted copy) its 'Attached GPUs' and 'GPU 0000...' lines."""
    part = head[:8192]
    return b"==NVSMI LOG==" in part or (b"Attached GPUs" in part and re.search(rb"^GPU [0-9A-Fa-f]{4,8}:", part,
                                                                               re.M) is not None)


def _is_ras_text(head: bytes, complete: bool) -> bool:
    text = head[:HEAD_BYTES].decode("utf-8", errors="replace")
    return "SERVER PROTOCOL" in text[:200] or ras.looks_like_text(text)


def _is_ras_json(head: bytes, complete: bool) -> bool:
    # `ncclras` keeps its greeting ('SERVER PROTOCOL 2') before the JSON when the answer is saved raw
    start = head.find(b"{", 0, 512)
    text = _json_head(head[start:] if start > 0 and b"SERVER PROTOCOL" in head[:start] else head)
    if text is None:
        return False
    if '"missing_ranks"' in text or '"collective_counts"' in text or ('"ranks"' in text and '"secondary_hash"' in text):
        return True
    if complete:
        try:
            return ras.looks_like_json(bounded_json.loads(ras.repair_json(text)))
        except (ValueError, RecursionError):
            return False
    return False


def _text_looks(looks_like: Callable[..., bool], lstrip: bool = False,
                whole: bool = False) -> Callable[[bytes, bool], bool]:
    """A sniff for readers that judge decoded text (py-spy, gdb, faulthandler and Flight Recorder report
    text). `whole`: the reader's test also takes whether the head is the whole file (faulthandler's: a
    file of nothing but a dump is one process's stacks)."""
    def test(head: bytes, complete: bool) -> bool:
        text = head[:HEAD_BYTES].decode("utf-8", errors="replace")
        text = text.lstrip() if lstrip else text
        return looks_like(text, complete) if whole else looks_like(text)
    return test


def _is_text(head: bytes, complete: bool) -> bool:
    return b"\x00" not in head[:4096] and head[:1] != b"\x80"


def _is_binary(head: bytes, complete: bool) -> bool:
    return not _is_text(head, complete)


def _is_empty(head: bytes, complete: bool) -> bool:
    return complete and not head.strip()


# ----------------------------------------------------------------------------- readers


def read_text_lines(inp: ReadInput) -> Iterator[str]:
    """Lines as a file opened with newline='' gives them (endings kept), each shown to the line filter
    with its number; a file the head holds whole is not read again. Files over MAX_TEXT_BYTES are refused."""
    if inp.size > MAX_TEXT_BYTES:
        raise FileFormatError(f"file too large to read ({inp.size} bytes)")
    look = inp.line_filter
    if inp.cut:  # its kind's limit: the first part, to a line end
        fh_ctx = io.StringIO(inp.first_part().decode("utf-8", errors="replace"), newline="")
    elif inp.whole:  # the head is the file: the same lines as the file read with newline=''
        fh_ctx = io.StringIO(inp.head.decode("utf-8", errors="replace"), newline="")
    else:
        fh_ctx = open(inp.path, encoding="utf-8", errors="replace", newline="")
    with fh_ctx as fh:
        for n, line in enumerate(fh, start=1):
            if look is not None:
                look(n, line)
            yield line


def _fr_dump(inp: ReadInput) -> Parsed:
    if inp.size > MAX_DOC_BYTES:
        raise FileFormatError(f"Flight Recorder dump too large ({inp.size} bytes)")
    data = inp.head if inp.whole else inp.path.read_bytes()
    return flight_recorder.parse(flight_recorder.load_bytes(data), inp.origin)


def _nccl_log(inp: ReadInput) -> Parsed:
    return nccl_log.parse_lines(read_text_lines(inp), str(inp.path))


#: the last lines of a rank log searched for its last Python exception (tracebacks end a log)
EXCEPTION_TAIL_LINES = 4000


def _rank_log(inp: ReadInput) -> Parsed:
    """Events from a rank's output, and the Python exceptions at its end (how the rank ended)."""
    tail: deque[str] = deque(maxlen=EXCEPTION_TAIL_LINES)
    counted = [0]

    def lines() -> Iterator[str]:
        for line in read_text_lines(inp):
            counted[0] += 1
            tail.append(line)
            yield line

    out = rank_log.parse_lines(lines(), str(inp.path))
    first = counted[0] - len(tail)
    found = exception.read_lines(list(tail), inp.origin.file)
    for exc in found.exceptions:
        if exc.line is not None:
            exc.line += first
    out.exceptions = list(found.exceptions)
    return out


def _fr_report(inp: ReadInput) -> Parsed:
    """The Flight Recorder analyzer's text report: read by the rank-log dispatch (which holds its block
    reader), under a kind of its own because the analyzer speaks for the job, not for one rank."""
    out = rank_log.parse_lines(read_text_lines(inp), str(inp.path))
    out.kind = "fr-report"
    return out


def _faulthandler_text(inp: ReadInput) -> Parsed:
    """A file that is a Python faulthandler dump (forensics.arm()'s stacks-*.txt, a rank's own
    faulthandler file): read by the rank-log dispatch, which holds the dump reader, under a kind of
    its own because the file is one process's stacks and attaches to that process."""
    out = rank_log.parse_lines(read_text_lines(inp), str(inp.path))
    out.kind = "faulthandler-text"
    return out


def _ras_text(inp: ReadInput) -> Parsed:
    """A RAS report, and whatever the file holds besides it: a report is often pasted above the
    job's own lines (the watchdog timeout it was asked about), which go to the rank-log reader
    with their own line numbers, so neither is dropped."""
    others: dict[int, str] = {}
    out = ras.parse_text(read_text_lines(inp), others)
    if not others:
        return out
    rest = rank_log.parse_lines((others.get(n, "\n") for n in range(1, out.lines + 1)), str(inp.path))
    out.events.extend(rest.events)
    out.unread.extend(rest.unread)  # (unknown lines stay counted once, as the report's other_lines)
    for key, value in rest.facts.items():
        out.facts.setdefault(key, value)
    return out


def _ras_json(inp: ReadInput) -> Parsed:
    return ras.parse_json_text(inp.text())


def _gdb_text(inp: ReadInput) -> Parsed:
    return gdb_text.parse_lines(read_text_lines(inp))


def _pyspy_text(inp: ReadInput) -> Parsed:
    return pyspy_text.parse_lines(read_text_lines(inp))


def _pyspy_json(inp: ReadInput) -> Parsed:
    data = bounded_json.loads(inp.text())
    out = Parsed(kind="pyspy-json")
    out.stacks = pyspy.parse_pyspy_data(data, inp.origin.pid)
    pid = data[0].get("pid") if isinstance(data, list) and data and isinstance(data[0], dict) else None
    if isinstance(pid, int):
        out.facts["pid"] = pid
    return out


def _pyspy_samples(inp: ReadInput) -> Parsed:
    """N py-spy dumps of one process over seconds: shares of places and states, no single stack."""
    out = Parsed(kind="pyspy-samples")
    out.samples = pyspy_samples.parse_samples_data(bounded_json.loads(inp.text()), inp.origin.pid)
    if out.samples.pid is not None:
        out.facts["pid"] = out.samples.pid
    return out


def _second_look(inp: ReadInput) -> Parsed:
    """Two looks at one process a few seconds apart (collect --second-look): what moved between them."""
    out = Parsed(kind="second-look")
    out.second_look = second_look.parse_second_look_data(bounded_json.loads(inp.text()), inp.origin.pid)
    if out.second_look.pid is not None:
        out.facts["pid"] = out.second_look.pid
    if out.second_look.rank is not None:
        out.facts["rank"] = out.second_look.rank
    out.problems += list(out.second_look.problems)
    return out


def _step_series(inp: ReadInput) -> Parsed:
    """forensics.arm()'s per-step times of one rank: compared across ranks by the slowness judges."""

    out = Parsed(kind="step-series")
    out.step_series = parse_series(inp.text(), inp.origin.file or str(inp.path))
    out.lines = len(out.step_series.seconds)
    if out.step_series.rank is not None:
        out.facts["rank"] = out.step_series.rank  # its own column says whose series it is: above any name
    return out


def _gdb_json(inp: ReadInput) -> Parsed:
    out = Parsed(kind="gdb-json")
    data = bounded_json.loads(inp.text())
    out.stacks = gdb.parse_gdb_data(data, inp.origin.pid)
    if isinstance(data, dict) and isinstance(data.get("pid"), int):
        out.facts["pid"] = data["pid"]
    return out


def _native_stack(inp: ReadInput) -> Parsed:
    out = Parsed(kind="native-stack")
    out.stacks = native_stack.parse_native(bounded_json.loads(inp.text()), inp.origin.pid)
    return out


def _process_state(inp: ReadInput) -> Parsed:
    out = Parsed(kind="process-state")
    out.process = proc.parse_proc_data(bounded_json.loads(inp.text()))
    out.facts["pid"] = out.process.pid
    return out


def _environment(inp: ReadInput) -> Parsed:
    out = Parsed(kind="environment")
    data = bounded_json.loads(inp.text())
    if not isinstance(data, dict):
        raise FileFormatError("not an environment object")
    out.facts.update(proc.identity_from_environ(data))
    return out


def _launcher(inp: ReadInput) -> Parsed:
    out = Parsed(kind="launcher")
    out.exits = launcher.parse_launcher_data(bounded_json.loads(inp.text()))
    return out


def _recorder(inp: ReadInput) -> Parsed:
    out = Parsed(kind="recorder-state")
    state = recorder.read_recorder_file(inp.path, observed_ns=inp.observed_ns)
    out.recorder.append(state)
    out.facts["pid"] = state.pid
    if state.host:
        out.facts["host"] = state.host
    return out


def _kernel_log(inp: ReadInput) -> Parsed:
    """Kernel messages, kept numbered for the knowledge base, and the host errors among them as events
    (Xid, GPU off the bus, PCIe AER), so a loose kernel log speaks in the same terms as pasted lines.

    Each line's host is the one it names itself (syslog's and journalctl's host field, clush/pdsh's label), else
    the shell prompt pasted above it (`root@node1:~# dmesg -T`). One host for every line: the file is that host's
    (`facts['host']`); several: `facts['line_hosts']` maps each named line to its host, so one syslog of many
    machines is each machine's evidence (parsers.gather.evidence splits it)."""
    out = Parsed(kind="kernel-log")
    lines = host_kernel.read_kernel_log(inp.text())
    joined: list[tuple[int, str, str | None]] = []  # messages with their unstamped continuation lines (the driver
    # splits some), each with its host
    shell_host: str | None = None
    line_hosts: dict[int, str] = {}
    for ln in lines:
        out.notes.append((ln.line_no, ln.message))
        if ln.stamp:  # the line's own time as printed, beside its message (decoded where a judge needs it)
            out.kernel_stamps[ln.line_no] = ln.stamp
        prompted = prefix.prompt_host(ln.raw) if "@" in ln.raw[:100] else None
        if prompted:
            shell_host = prompted
        elif joined and ln.stamp is None and ln.host is None and ln.raw[:1].isspace():
            n, text, host = joined[-1]
            joined[-1] = (n, f"{text} {ln.message[5:].strip() if ln.message.startswith('NVRM:') else ln.message}", host)
            if host:
                line_hosts[ln.line_no] = host
        else:
            host = ln.host or shell_host
            joined.append((ln.line_no, ln.message, host))
            if host:
                line_hosts[ln.line_no] = host
    for n, text, host in joined:
        out.events.extend(pasted_host.match_line(text, Origin(host=host or inp.origin.host, file=inp.origin.file,
                                                              line=n)))
    named = set(line_hosts.values())
    if len(named) == 1:  # every line that names a machine names one: the file is that host's (else left unsaid)
        out.facts["host"] = named.pop()
    elif named:
        out.facts["line_hosts"] = line_hosts
    out.lines = len(out.notes)
    return out


def _host_facts(kind: str, parse: Callable[[str], Any], wrap: str | None = None,
                prefix: str = "") -> Callable[[ReadInput], Parsed]:
    """A host-facts reader: `parse(text)` gives {subject: facts} (or facts, wrapped under `wrap`)."""
    def read(inp: ReadInput) -> Parsed:
        out = Parsed(kind=kind)
        got = parse(inp.text())
        subjects = {wrap: got} if wrap else got
        for subject, facts in subjects.items():
            name = f"{prefix} {subject}".strip() if prefix else subject
            out.host_facts.setdefault(name, {}).update(facts)
        return out
    return read


# ----------------------------------------------------------------------------- the table

KINDS: tuple[Kind, ...] = (
    Kind("empty", JOB, "an empty file", None, sniff=_is_empty),
    Kind("bundle-manifest", JOB, "a bundle's own manifest (read as hints, not evidence)", None,
         sniff=_json_has('"hang-forensics-bundle"'), names=("manifest.json",)),
    Kind("host-digest", JOB, "a host's digest of its ranks' evidence (read instead of raw files, parsers.scale.digest)",
         None, sniff=lambda h, c: _json_has('"hang-forensics-digest"')(h, c)
         or _json_has('"hang-forensics-merged-digest"')(h, c), names=("digest.json", "merged-digest.json")),
    Kind("recorder-state", RANK, "the recorder's state file (NCCL profiler plugin, nccl_patches/)", _recorder,
         sniff=lambda h, c: h.startswith(recorder.MAGIC), names=("nccl-recorder.*.bin",), collector="recorder",
         folder="recorder"),
    Kind("recorder-text", RANK, "the recorder's human-readable snapshot (the .bin is read)", None,
         names=("nccl-recorder.*.txt",), collector="recorder", folder="recorder"),
    Kind("fr-dump", RANK, "PyTorch Flight Recorder dump (pickle or JSON)", _fr_dump,
         sniff=lambda h, c: flight_recorder.looks_like(h) or _json_has('"pg_status"')(h, c)
         or _json_has('"entries"', '"profiling_name"')(h, c),
         names=("fr_*", "nccl_trace_rank_*"), collector="flight_recorder", folder="flight_recorder"),
    Kind("binary", JOB, "a binary file no reader knows", None, sniff=_is_binary),
    Kind("second-look", RANK, "two looks at one process seconds apart (second-look.json)", _second_look,
         sniff=_json_has(f'"{second_look.FORMAT}"'), names=("second-look.json",), collector="second-look"),
    Kind("process-state", RANK, "process state from /proc (proc.json)", _process_state,
         sniff=_json_has('"state"', '"pid"', '"threads"'), names=("proc.json",), collector="process_state"),
    Kind("environment", RANK, "a process's environment, secrets redacted (environ.json)", _environment,
         sniff=_is_environment, names=("environ.json",), collector="environment", name_sniff=_is_json_object),
    Kind("gdb-json", RANK, "gdb backtraces of every thread (gdb.json)", _gdb_json,
         sniff=_json_has('"threads"', '"stacks"'), names=("gdb.json",), collector="gdb"),
    Kind("native-stack", RANK, "native stacks of every thread through libdw (native.json)", _native_stack,
         sniff=_json_has('"tool": "libdw"', '"threads"'), names=("native.json",), collector="native-stack",
         name_sniff=_is_json_object),
    Kind("pyspy-samples", RANK, "py-spy dumps of one process taken over seconds (pyspy-samples.json)", _pyspy_samples,
         sniff=_json_has(f'"{pyspy_samples.FORMAT}"'), names=("pyspy-samples.json",), collector="py-spy-samples"),
    Kind("pyspy-json", RANK, "py-spy dump --json", _pyspy_json,
         sniff=_json_has('"thread_id"', '"frames"'), names=("pyspy.json",), collector="py-spy"),
    Kind("step-series", JOB, "forensics.arm()'s step times of one rank (steps-rankN.csv)",
         _step_series, sniff=lambda h, c: h.startswith(b"step,seconds,") and b"first_enter_unix" in h[:200],
         names=("steps-rank*.csv",)),
    Kind("launcher", JOB, "a launcher record: per rank, pid and exit", _launcher,
         sniff=_json_has('"ranks"', '"returncode"'), names=("launcher.json",)),
    Kind("ras-json", HOST, "NCCL RAS answer, JSON", _ras_json, sniff=_is_ras_json,
         names=("ras_status.json", "ras_status_later.json"), collector="ras"),
    Kind("nvml-json", HOST, "NVML values of every GPU (nvml.json)",
         _host_facts("nvml-json", host_nvml.parse_nvml_json, prefix="gpu"),
         sniff=_json_has('"gpus"', '"bus_id"'), names=("nvml.json",), collector="nvml"),
    Kind("infiniband-json", HOST, "InfiniBand ports and counters (infiniband.json)",
         _host_facts("infiniband-json", host_ib.parse_ib_json),
         sniff=_json_has('"devices"'), names=("infiniband.json",), collector="infiniband"),
    Kind("cpufreq-json", HOST, "CPU frequencies (cpufreq.json)",
         _host_facts("cpufreq-json", host_system.parse_cpufreq_json, wrap="cpu"),
         sniff=_json_has('"cpuinfo_mhz"'), names=("cpufreq.json",), collector="cpufreq"),
    Kind("memory-json", HOST, "memory and pressure (memory.json)",
         _host_facts("memory-json", host_system.parse_memory_json, wrap="memory"),
         sniff=_json_has('"meminfo"'), names=("memory.json",), collector="memory"),
    Kind("nvidia-smi-xml", HOST, "nvidia-smi -q -x", _host_facts("nvidia-smi-xml", host_nvsmi.parse_xml, prefix="gpu"),
         sniff=_text_has("<nvidia_smi_log"), names=("nvidia-smi-q.xml",), collector="nvidia_smi"),
    Kind("nvidia-smi-text", HOST, "nvidia-smi -q", _host_facts("nvidia-smi-text", host_nvsmi.parse_text, prefix="gpu"),
         sniff=_is_nvsmi_text, names=("nvidia-smi-q.txt",), collector="nvidia_smi", name_sniff=_is_text,
         max_bytes=SNAPSHOT_BYTES),
    Kind("nvidia-smi-topo", HOST, "nvidia-smi topo -m (kept for people; no facts read)", None,
         sniff=lambda h, c: h.lstrip().startswith(b"\x1b[4mGPU0") or b"Legend:" in h[:8192] and b"GPU0" in h[:512],
         names=("nvidia-smi-topo.txt",), collector="nvidia_smi"),
    Kind("df", HOST, "df -P -T (disk space)", _host_facts("df", host_system.parse_df),
         sniff=lambda h, c: h.startswith(b"Filesystem") and b"Inodes" not in h[:200] and b"IUsed" not in h[:200],
         names=("df.txt",), collector="disk", max_bytes=SMALL_TEXT_BYTES),
    Kind("df-inodes", HOST, "df -P -T -i (inodes)",
         _host_facts("df-inodes", lambda t: host_system.parse_df(t, inodes=True)),
         sniff=lambda h, c: h.startswith(b"Filesystem") and (b"Inodes" in h[:200] or b"IUsed" in h[:200]),
         names=("df-inodes.txt",), collector="disk", max_bytes=SMALL_TEXT_BYTES),
    Kind("kernel-log", HOST, "kernel messages (dmesg, journal)", _kernel_log, sniff=_is_kernel_log,
         names=("kernel.log",), collector="kernel_log", text_stream="kernel"),
    Kind("ras-text", HOST, "NCCL RAS answer, text", _ras_text, sniff=_is_ras_text,
         names=("ras_status.txt", "ras_verbose.txt"), collector="ras", max_bytes=SNAPSHOT_BYTES),
    Kind("pyspy-text", RANK, "py-spy dump text", _pyspy_text, sniff=_text_looks(pyspy_text.looks_like, lstrip=True),
         max_bytes=SNAPSHOT_BYTES),
    Kind("gdb-text", RANK, "gdb 'thread apply all bt' text, as pasted", _gdb_text,
         sniff=_text_looks(gdb_text.looks_like),
         max_bytes=2 * SNAPSHOT_BYTES),
    Kind("faulthandler-text", RANK, "Python faulthandler dump (a fatal signal's, or forensics.arm()'s stacks-*.txt)",
         _faulthandler_text, sniff=_text_looks(faulthandler.looks_like, whole=True), max_bytes=SMALL_TEXT_BYTES),
    Kind("tool-error", RANK, "a stack tool's error output (pyspy.err.txt)", None, names=("pyspy.err.txt", "*.err.txt"),
         collector="py-spy"),
    Kind("fr-report", JOB, "PyTorch Flight Recorder analyzer's report (fr_trace / torchfrtrace text)", _fr_report,
         sniff=_text_looks(fr_report.looks_like), max_bytes=SNAPSHOT_BYTES),
    Kind("nccl-log", RANK, "NCCL debug log (NCCL_DEBUG=INFO)", _nccl_log, sniff=_is_nccl_log,
         names=("nccl.*.log",), collector="nccl_log", text_stream="rank-log", folder="nccl"),
    Kind("rank-log", RANK, "a rank's stdout/stderr or any other text log", _rank_log, sniff=_is_text,
         names=("stdout.log", "stderr.log", "torchrun.stdout.log", "torchrun.stderr.log", "torchelastic_error.json",
                "slurm-output.log"), collector="stdio", text_stream="rank-log"),
)

BY_NAME: dict[str, Kind] = {k.name: k for k in KINDS}
#: kinds whose files are recognised but are not evidence
NOT_EVIDENCE = frozenset(k.name for k in KINDS if k.read is None)


def kind(name: str) -> Kind:
    """The kind called `name` (KeyError for an unknown one: a programming error)."""
    return BY_NAME[name]


def for_collector(collector: str) -> list[Kind]:
    """Kinds a collector writes: the names it must use."""
    collector = collector_name(collector)
    return [k for k in KINDS if k.collector == collector]


def _written_by(collector: str, kind_name: str) -> Kind:
    found = next((k for k in for_collector(collector) if k.name == kind_name), None)
    if found is None:  # a collector naming a file the registry does not give it: a bug, never a user's error
        raise KeyError(f"collector {collector!r} writes no {kind_name!r} file (parsers.gather.registry.KINDS)")
    return found


def collector_file(collector: str, kind_name: str, name: str | None = None) -> str:
    """The file name collector `collector` gives its file of kind `kind_name`: the kind's first name, or
    `name` when the kind declares it (a kind of several files: ras_status.txt, ras_verbose.txt).
    KeyError when the collector does not write that kind or the kind does not declare `name`."""
    kind_ = _written_by(collector, kind_name)
    if name is None:
        return kind_.file_name()
    if name not in kind_.names:
        raise KeyError(f"kind {kind_name!r} declares no file {name!r} (it declares {', '.join(kind_.names)})")
    return name


def collector_folder(collector: str, kind_name: str) -> str:
    """The subfolder of a rank's folder where collector `collector` copies its files of kind `kind_name`,
    keeping their names (KeyError when it declares none)."""
    kind_ = _written_by(collector, kind_name)
    if kind_.folder is None:
        raise KeyError(f"kind {kind_name!r} declares no folder")
    return kind_.folder


def declares(collector: str, rel_path: str) -> bool:
    """Whether a bundle path that collector `collector` wrote is one the registry gives it: the file's
    name matches a name of a kind the collector writes (a `N.` duplicate prefix aside), or the file
    sits in the folder of such a kind. For tests and checks of bundles."""
    parts = rel_path.split("/")
    name = re.sub(r"^[0-9]{1,6}\.", "", parts[-1])
    for k in for_collector(collector):
        if k.folder is not None and len(parts) >= 2 and parts[-2] == k.folder:
            return True
        if any(fnmatch.fnmatchcase(name, pat) for pat in k.names):
            return True
    return False


def recognise(file_name: str, head: bytes, complete: bool) -> Kind:
    """The kind of a file: our own file name when its content agrees, else content alone."""
    for k in _named_kinds(file_name):
        test = k.name_sniff or k.sniff
        if test is None or test(head, complete):
            return k
    for k in KINDS:
        if k.sniff is not None and k.sniff(head, complete):
            return k
    return BY_NAME["binary"]


#: exact collector file names -> kinds, and the wildcard patterns, for a quick look-up by name
_EXACT: dict[str, list[Kind]] = {}
_PATTERNS: list[tuple[str, Kind]] = []
for _k in KINDS:
    for _pat in _k.names:
        if any(c in _pat for c in "*?["):
            _PATTERNS.append((_pat, _k))
        else:
            _EXACT.setdefault(_pat, []).append(_k)


def _named_kinds(file_name: str) -> list[Kind]:
    """Kinds whose collector file names match `file_name`, in table order."""
    found = list(_EXACT.get(file_name, ()))
    found += [k for pat, k in _PATTERNS if fnmatch.fnmatchcase(file_name, pat) and k not in found]
    order = {k.name: i for i, k in enumerate(KINDS)}
    return sorted(found, key=lambda k: order[k.name]) if len(found) > 1 else found


def describe() -> Iterable[tuple[str, str, str]]:
    """(kind, scope, what) for docs and --help."""
    return ((k.name, k.scope, k.what) for k in KINDS)

"""The second look (`forensics collect --second-look S`): the same cheap reads of every rank twice, S seconds apart.

Why: one snapshot cannot tell a hang from progress (a healthy rank caught inside a collective
looks like a waiting one). Where nothing time-stamped (the recorder, watchdog lines) says which,
two looks a few seconds apart do: a main-thread stack that changed, NCCL op lines that were added,
recorder counters that advanced, read/write system calls that grew are progress; the same stacks and counters twice
are "no progress over S seconds". CPU time is recorded but is not progress: NCCL waits spin at 100% CPU.

Each look, per rank: the time; /proc state, wchan, CPU time, read/write system-call counts (/proc/P/io)
and per-thread state/wchan/CPU time;
DUMPS nonblocking `py-spy dump --json` answers (py-spy reads memory without pausing the target, as
the samples collector does; the run state is still compared before and after by StateGuard); the
size of the rank's NCCL debug file; the recorder's per-communicator counters (its state files are
read, never signalled). Look 2 also counts NCCL op lines ("opCount") added since look 1, from at
most MAX_NEW_LOG_BYTES of the new bytes. Everything is bounded (threads, frames, files, bytes,
time); the file records what was seen and how long the collection waited. The reader is
parsers/readers/second_look.py; this module interprets nothing.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from forensics import safefs
from forensics.collect import tool as tools
from forensics.collect.guard import StateGuard
from forensics.collect.tool import run_tool
from forensics.collectors.files import process_path, target_user
from forensics.collectors.flight_recorder import PREFIX_KEYS as FR_PREFIX_KEYS, dump_candidates
from forensics.collectors.nccl_logs import find_debug_file
from forensics.collectors.pyspy_samples import _threads
from forensics.collectors.recorder import MAX_STATE_BYTES, recorder_dir, state_files
from forensics.discover import procfs
from parsers.input import safeio
from parsers.model.manifest import CollectorRecord, Status
from parsers.model.states import letter_rule
from parsers.readers.recorder import RecorderFormatError, decode_recorder
from parsers.readers.second_look import FORMAT, VERSION
from parsers.gather.registry import collector_file

NAME = "second-look"
FILE_NAME = collector_file(NAME, "second-look")
#: py-spy dumps per look (a few, so that one look of a moving rank is not one instant)
DUMPS = 3
#: seconds between two dumps of one look
DUMP_SPACING_S = 0.15
DUMP_TIMEOUT_S = 3.0
#: the longest gap between the looks, seconds (the option is capped here)
MAX_GAP_S = 60.0
MAX_THREADS = 256  #: /proc threads read per look
MAX_PY_THREADS = 32  #: py-spy threads kept per dump
MAX_FRAMES = 64  #: frames kept per py-spy thread
MAX_RECORDER_FILES = 16
MAX_NEW_LOG_BYTES = 4 * 1024 * 1024
OP_MARK = b"opCount"
IO_KEYS = ("rchar", "wchar", "syscr", "syscw")


def _stat_fields(text: str) -> tuple[str, int, int] | None:
    """(state, utime, stime) in clock ticks from a /proc stat line (the name may hold spaces and parens)."""
    rest = text[text.rfind(")") + 2:].split()
    if len(rest) < 13:
        return None
    try:
        return rest[0], int(rest[11]), int(rest[12])
    except ValueError:
        return None


def _read_small(path: Path) -> str | None:
    try:
        with open(path, "rb") as fh:
            return fh.read(4096).decode("utf-8", "replace").strip()
    except OSError:
        return None


def proc_look(pid: int) -> dict[str, Any] | None:
    """State, wchan and CPU ticks of the process and of each thread (at most MAX_THREADS); None when gone."""
    base = Path(f"/proc/{pid}")
    stat = _read_small(base / "stat")
    fields = _stat_fields(stat) if stat else None
    if fields is None:
        return None
    out: dict[str, Any] = {"state": fields[0], "wchan": _read_small(base / "wchan") or None,
                           "cpu_ticks": fields[1] + fields[2], "clock_ticks": os.sysconf("SC_CLK_TCK"), "threads": []}
    io = _read_small(base / "io")  # read/write system calls: gloo's sockets move data through them
    if io:
        pairs = (line.split(":", 1) for line in io.splitlines() if ":" in line)
        out["io"] = {k.strip(): int(v) for k, v in pairs if k.strip() in IO_KEYS and v.strip().isdigit()}
    try:
        tids = sorted(int(t) for t in os.listdir(base / "task") if t.isdigit())[:MAX_THREADS]
    except OSError:
        tids = []
    for tid in tids:
        tstat = _read_small(base / "task" / str(tid) / "stat")
        tf = _stat_fields(tstat) if tstat else None
        if tf is None:
            continue
        name = tstat[tstat.find("(") + 1:tstat.rfind(")")][:32]
        wchan = _read_small(base / "task" / str(tid) / "wchan")
        out["threads"].append({"tid": tid, "name": name, "state": tf[0],
                               "wchan": wchan if wchan and wchan != "0" else None, "cpu_ticks": tf[1] + tf[2]})
    return out


def stack_dumps(pid: int, count: int = DUMPS) -> tuple[list[dict], list[str]]:
    """`count` nonblocking py-spy dumps (never pausing the target): (dumps, errors)."""
    dumps: list[dict] = []
    errors: list[str] = []
    argv = ["py-spy", "dump", "--pid", str(pid), "--json", "--nonblocking"]
    for i in range(count):
        if tools.INTERRUPTED.is_set():
            break
        stamp = time.time()
        res = run_tool(argv, timeout=DUMP_TIMEOUT_S)
        if res.missing:
            errors.append("py-spy is not installed")
            break
        threads = _threads(res.stdout) if res.ok else None
        if threads is not None:
            kept = [{**th, "frames": (th.get("frames") or [])[:MAX_FRAMES]} for th in threads[:MAX_PY_THREADS]]
            dumps.append({"t": round(stamp, 4), "threads": kept})
        else:
            text = (res.stderr.strip() or res.stdout.strip() or f"exit {res.returncode}").splitlines()[:2]
            errors.append(" / ".join(text)[:300] + (" (timed out)" if res.timed_out else ""))
        if i + 1 < count:
            time.sleep(DUMP_SPACING_S)
    return dumps, errors


class _Sources:
    """Where one rank's NCCL log and recorder state files are (found once, before the first look)."""

    def __init__(self, pid: int, environ: dict[str, str]) -> None:
        pattern = environ.get("NCCL_DEBUG_FILE")
        self.log = find_debug_file(pattern, pid) if pattern else None
        self.recorder = [p for p in state_files(recorder_dir(pid, environ), pid) if p.name.endswith(".bin")]
        self.recorder = sorted(self.recorder)[:MAX_RECORDER_FILES]


def _log_size(pid: int, src: Path) -> int | None:
    try:
        with safefs.open_for_job(src, target_user(pid)) as fh:
            return safeio.file_size(fh)
    except OSError:
        return None


def _new_op_lines(pid: int, src: Path, since: int) -> tuple[int, int]:
    """(NCCL op lines, bytes read) in the log after offset `since`, reading at most MAX_NEW_LOG_BYTES."""
    try:
        with safefs.open_for_job(src, target_user(pid)) as fh:
            fh.seek(since)
            data = fh.read(MAX_NEW_LOG_BYTES)
    except OSError:
        return 0, 0
    return sum(1 for line in data.split(b"\n") if OP_MARK in line), len(data)


def _recorder_counts(pid: int, path: Path) -> dict[str, Any]:
    """One state file's counters: ops recorded, completed, newest progress stamp (the file is read, not signalled)."""
    try:
        with safefs.open_for_job(path, target_user(pid)) as fh:
            data, _ = safeio.read_bytes(fh, MAX_STATE_BYTES, tail=False)
        st = decode_recorder(data, path.name)
    except (OSError, RecorderFormatError, ValueError) as err:
        return {"file": path.name, "error": str(err)[:200]}
    newest = max([c.last_progress_ns or 0 for c in st.colls] + [op.last_progress_ns or 0 for op in st.proxy_ops] + [0])
    return {"file": path.name, "comm": f"{st.comm_id:x}", "coll_next": st.coll_next, "p2p_next": st.p2p_next,
            "proxy_next": st.proxy_next, "completed": sum(1 for c in st.colls if c.complete_ns),
            "max_seq": max((c.seq for c in st.colls), default=None), "newest_progress_ns": newest,
            "heartbeat_count": st.heartbeat_count}


def look(pid: int, sources: _Sources, log_since: int | None = None) -> dict[str, Any]:
    """One look at one rank (see the module docstring)."""
    out: dict[str, Any] = {"t": round(time.time(), 4), "proc": proc_look(pid)}
    if out["proc"] is not None and letter_rule(out["proc"]["state"]) != "gone":
        with StateGuard(pid) as guard:
            out["stacks"], out["stack_errors"] = stack_dumps(pid)
        out["state_after"] = guard.outcome.after
        if guard.outcome.action:
            out["guard"] = guard.outcome.action
    if sources.log is not None:
        size = _log_size(pid, sources.log)
        entry: dict[str, Any] = {"file": sources.log.name, "size": size}
        if log_since is not None and size is not None and size > log_since:
            entry["new_op_lines"], entry["new_bytes_read"] = _new_op_lines(pid, sources.log, log_since)
        out["nccl_log"] = entry
    if sources.recorder:
        out["recorder"] = [_recorder_counts(pid, p) for p in sources.recorder]
    out["t_end"] = round(time.time(), 4)
    return out


def gap_seconds(requested: float) -> float:
    return max(0.0, min(float(requested), MAX_GAP_S))


def stamps_decide(pid: int, environ: dict[str, str], rank: int | None) -> str | None:
    """Why no second look is needed for this rank, or None: time-stamped evidence of its own decides hang or
    progress already (issue 39 item 8). The recorder's state files of this very process (named by its pid)
    carry a heartbeat and per-op progress stamps; a Flight Recorder dump this process wrote (newer than its
    start) means its watchdog fired: a timeout."""
    if any(p.name.endswith(".bin") for p in state_files(recorder_dir(pid, environ), pid)):
        return "the recorder's time stamps decide hang or progress"
    configured = next((environ[k] for k in FR_PREFIX_KEYS if environ.get(k)), None)
    if rank is None or not configured:
        return None
    started = procfs.start_unix(pid)
    for dump in dump_candidates(process_path(pid, configured), rank):
        try:
            if started is not None and dump.stat().st_mtime >= started:
                return "a Flight Recorder dump of this run (its watchdog fired) decides hang"
        except OSError:
            continue
    return None


class RankLooks:
    """One rank's second look, spread around its collectors: look 1 before them, look 2 once they are done and
    the gap has passed. Why: the gap used to be waited after every collector had finished (3 s added to every
    collection); now the stack reads fill it, and only what is left of it is waited."""

    def __init__(self, proc: Any, gap_s: float) -> None:
        self.proc, self.gap = proc, gap_seconds(gap_s)
        self.skip = stamps_decide(proc.pid, proc.environ, proc.rank) if self.gap > 0 else "not requested"
        self.sources: _Sources | None = None
        self.first: dict[str, Any] | None = None
        self.started = time.monotonic()
        self.look_s = 0.0

    def begin(self) -> None:
        """Look 1 (before any collector touches the rank), unless time stamps decide or the rank is gone."""
        if self.skip is not None or not procfs.pid_exists(self.proc.pid):
            return
        t = time.monotonic()
        self.started = t
        self.sources = _Sources(self.proc.pid, self.proc.environ)
        self.first = look(self.proc.pid, self.sources)
        self.look_s += time.monotonic() - t

    def finish(self, record: Any, bundle_root: Path, budget: Any = None) -> None:
        """Look 2 after what is left of the gap; write second-look.json and its record in the manifest."""
        if self.skip is not None:
            if self.skip != "not requested":
                record.collectors.append(CollectorRecord(NAME, Status.SKIPPED, error=self.skip))
            return
        if self.first is None or self.sources is None:
            record.collectors.append(CollectorRecord(NAME, Status.GONE, error=f"pid {self.proc.pid} no longer exists"))
            return
        overlapped = time.monotonic() - self.started
        interrupted = tools.INTERRUPTED.wait(max(0.0, self.gap - overlapped))
        second = None
        if not interrupted:
            t = time.monotonic()
            second = look(self.proc.pid, self.sources, (self.first.get("nccl_log") or {}).get("size"))
            self.look_s += time.monotonic() - t
        self._write(record, bundle_root, second, min(overlapped, self.gap), budget)

    def _write(self, record: Any, bundle_root: Path, second: dict[str, Any] | None, overlapped: float,
               budget: Any = None) -> None:
        first, proc = self.first, self.proc
        doc = {"format": FORMAT, "version": VERSION, "pid": proc.pid, "rank": proc.rank, "requested_gap_s": self.gap,
               "waited_s": round(second["t"] - first["t"], 3) if second is not None else None,
               "looks": [first] + ([second] if second is not None else [])}
        rel = f"{record.dir}/{FILE_NAME}"
        text = _within_budget(doc, budget, proc.pid)
        try:
            safefs.write_new(safefs.make_dirs(bundle_root, record.dir) / FILE_NAME, text)
        except OSError as err:  # a full disk: said in the manifest, what was gathered before stays
            record.collectors.append(CollectorRecord(NAME, Status.FAILED, error=f"not written: {err.strerror or err}"))
            return
        status = Status.OK if second is not None else Status.SKIPPED
        record.collectors.append(CollectorRecord(
            NAME, status, seconds=round(self.look_s, 3), files=[rel],
            error=None if second is not None else "collection interrupted before look 2",
            details={"gap_s": self.gap, "waited_s": doc["waited_s"], "overlapped_s": round(overlapped, 3)}))


def _within_budget(doc: dict[str, Any], budget: Any, pid: int) -> str:
    """The looks' text, counted against the rank's and the collection's byte budget (a ByteBudget; None outside
    `collect`): py-spy's stack dumps are what can be large, so they are left out first, and the cut said."""
    text = json.dumps(doc, separators=(",", ":"))
    if budget is None:
        return text
    granted = budget.reserve(len(text))
    if granted < len(text):
        for one in doc["looks"]:
            if one.get("stacks"):
                one["stacks"], one["stacks_cut"] = [], budget.which()
        budget.note(f"pid {pid} {FILE_NAME}: py-spy's stack dumps left out ({budget.which()} reached)")
        text = json.dumps(doc, separators=(",", ":"))
    budget.settle(granted, len(text))
    return text

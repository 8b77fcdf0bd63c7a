"""Reads a launcher record: per rank, its pid and how and when it exited.

Written by `forensics demo` (and by any launcher that wants to hand us the same
facts). Exit order matters: in a collapsing job the first to die is usually the
culprit, while the launcher's own 'root cause' names the first it noticed.
"""

from __future__ import annotations

import re as _re
from dataclasses import dataclass
from pathlib import Path

from parsers.input import bounded_json
from parsers.input.errors import FileFormatError
from parsers.input.ints import as_int
from parsers.model.events import ErrorEvent, ErrorKind, NetFailure, Origin, RankStated, WorkerReport
from parsers.readers.prefix import short_host
from parsers.model.ranges import unfold


@dataclass
class RankExit:
    rank: int
    pid: int
    host: str | None
    returncode: int | None  #: negative: killed by that signal; None: still running
    exited_at: float | None

    @property
    def how(self) -> str:
        import signal as _signal

        if self.returncode is None:
            return "still running"
        if self.returncode < 0:
            try:
                return f"killed by {_signal.Signals(-self.returncode).name}"
            except ValueError:
                return f"killed by signal {-self.returncode}"
        return f"exited with code {self.returncode}"


def read_launcher_json(path: Path) -> list[RankExit]:
    return parse_launcher_data(bounded_json.loads(Path(path).read_text(errors="replace")))


def parse_launcher_data(data: object) -> list[RankExit]:
    """Exits from a decoded launcher record; FileFormatError when it is not one (every field's type is
    checked here: a judge sorts by exit time and compares ranks, so a wrong type must stop at the reader)."""
    if not isinstance(data, dict) or not isinstance(data.get("ranks"), list):
        raise FileFormatError("not a launcher record")
    return [_rank_exit(i, r) for i, r in enumerate(data["ranks"][:MAX_LAUNCHER_RANKS])]


#: ranks read from one launcher record (a job of more ranks than this is not one launcher's)
MAX_LAUNCHER_RANKS = 1 << 20


def _rank_exit(i: int, r: object) -> RankExit:
    """One entry of a launcher record, its types checked."""
    if not isinstance(r, dict):
        raise FileFormatError(f"launcher record: ranks[{i}] is not an object")
    rank, pid, host, code, at = (r.get(k) for k in ("rank", "pid", "host", "returncode", "exited_at"))
    if as_int(rank) is None or as_int(pid) is None:
        raise FileFormatError(f"launcher record: ranks[{i}] has no integer rank and pid")
    if host is not None and not isinstance(host, str):
        raise FileFormatError(f"launcher record: ranks[{i}].host is not a string")
    if code is not None and as_int(code) is None:
        raise FileFormatError(f"launcher record: ranks[{i}].returncode is not an integer")
    if at is not None and (isinstance(at, bool) or not isinstance(at, (int, float)) or at != at):
        raise FileFormatError(f"launcher record: ranks[{i}].exited_at is not a number")
    return RankExit(rank=rank, pid=pid, host=host, returncode=code, exited_at=at)


# --- launcher lines in job output -------------------------------------------------------------
# torchelastic, vLLM and Slurm print how each worker ended. Exit order matters (see above),
# and the `ChildFailedError` block's "Root Cause (first observed failure)" is only the first
# exit the agent noticed (field notes: usually a victim), so each entry keeps its role.


_ELASTIC_EXIT = _re.compile(r"failed \(exitcode: (?P<code>-?\d+)\) local_rank: (?P<lr>\d+) \(pid: (?P<pid>\d+)\)")
_SIGNAL = _re.compile(r"Sending process (?P<pid>\d+) closing signal (?P<sig>SIG\w+)")
#: the torchelastic agent itself got a signal from outside (a user's kill or Ctrl-C, the scheduler, kubectl delete):
#: 'W0409 07:28:49.530000 1359 torch/distributed/elastic/agent/server/api.py:719] Received 15 death signal, shutting
#: down workers' (pytorch/pytorch#150916); the pid in the logging header is the agent's own. Said as a fact about
#: how the job ended: the same line follows a user's kill of a job that already hung
_AGENT_SIGNAL = _re.compile(r"Received (?P<sig>\d{1,3}|SIG[A-Z]{2,8}) death signal, shutting down workers")
_LOG_HEADER_PID = _re.compile(r"^[EWIFD]\d{4} \d\d:\d\d:\d\d\.\d+ (?P<pid>\d{1,10}) ")
_VLLM_EXIT = _re.compile(r"Worker (?P<who>\S+) pid (?P<pid>\d+) died, exit code: (?P<code>-?\d+)")
#: DeepSpeed's launcher (deepspeed/launcher/launch.py): '[launch.py:324:sigkill_handler] ['/usr/bin/python3', '-u',
#: 'main.py', '--local_rank=1', ...] exits with return code = -11' and '... Killing subprocess 94984' (it kills
#: the other workers when one ends)
_DS_EXIT = _re.compile(r"sigkill_handler\] \[(?P<cmd>.{0,8000}?)\] exits with return code = (?P<code>-?\d{1,6})\b")
_DS_KILL = _re.compile(r"sigkill_handler\] Killing subprocess (?P<pid>\d{1,10})\b")
_DS_LOCAL_RANK = _re.compile(r"--local_rank=(?P<lr>\d{1,6})\b")
#: torch.multiprocessing.spawn (mp.spawn) in the parent's traceback, as torch 2.x words it (spawn.py, join()):
#: 'ProcessExitedException: process 1 terminated with signal SIGSEGV' (or 'with exit code 1'), and
#: '-- Process 1 terminated with the following error:' above the traceback it raised; the number is the
#: process index mp.spawn passes to the worker (its local rank). It stops the others first:
#: 'torch/multiprocessing/spawn.py:165] Terminating process 23184 via signal SIGTERM'.
_SPAWN_EXIT = _re.compile(r"\bprocess (?P<idx>\d{1,6}) terminated with (?:signal (?P<sig>SIG[A-Z0-9]{1,12})"
                          r"|exit code (?P<code>-?\d{1,6}))")
SPAWN_RAISED = _re.compile(r"^-- Process (?P<idx>\d{1,6}) terminated with the following error:")
_SPAWN_TERM = _re.compile(r"Terminating process (?P<pid>\d{1,10}) via signal (?P<sig>SIG\w{1,12})")
#: the report's sections; torch 1.9-1.10 printed 'Root Cause:' first, then 'Other Failures:' (pytorch/pytorch#65041)
_BLOCK_ROLE = (("Root Cause (first observed failure):", ErrorKind.ROOT_CAUSE), ("Failures:", ErrorKind.CHILD_FAILURE),
               ("Root Cause:", ErrorKind.ROOT_CAUSE), ("Other Failures:", ErrorKind.CHILD_FAILURE))
_BLOCK_MARKERS = tuple(marker for marker, _role in _BLOCK_ROLE)
_ENTRY = _re.compile(r"^\[(?P<rank>\d+)\]:\s*$")
_RULE = _re.compile(r"^(?:={8,}|-{8,})$")
_FIELD = _re.compile(r"^(?P<key>time|host|rank|exitcode|error_file|traceback)\s*: ?(?P<value>.*)$")
#: an entry's field as the report pads it ('rank      : 7 (local_rank: 7)', 'exitcode  : 1 (pid: 4227)'), seen before
#: any section marker: a paste or a stored copy that starts inside the Failures list (microsoft/nnscaler#10,
#: FangyunWei/SLRT#66). The padding and the value's own shape keep a log's 'host : x' from opening an entry.
_MID_TABLE = _re.compile(r"^(?:(?:time|host) {1,9}: \S|rank {1,9}: \d{1,7} \(local_rank: \d"
                         r"|exitcode {1,9}: -?\d{1,4} \(pid: \d)")
_RANK_FIELD = _re.compile(r"(?<!\d)(?P<rank>\d+) \(local_rank: (?P<lr>\d+)\)")
_EXIT_FIELD = _re.compile(r"(?<![\d-])(?P<code>-?\d+) \(pid: (?P<pid>\d+)\)")
_SIGNAL_NAME = _re.compile(r"Signal (?P<sig>\d+) \((?P<name>SIG\w+)\)")
#: where a part of the report starts, for a report flattened onto one line (its line breaks lost in a paste or a
#: markdown quote, ByteDance-Seed/Bagel#245): a section, an entry, or a field label ('local_rank:' is no label)
_FLAT_CUT = _re.compile(r"Root Cause \(first observed failure\):|Failures:|<NO_OTHER_FAILURES>|\[\d{1,7}\]:"
                        r"|(?<![\w])(?:time|host|rank|exitcode|error_file|traceback)[ \t]{0,16}:")
#: the report's labels as a browser's Chinese translation prints them (Bagel#245: the whole Failures section, and
#: each Root Cause field followed by its translation) -> torchelastic's own; longer labels first ('本地排名' holds
#: '排名'). A leading space: the translation follows the English value with no space between.
_TRANSLATED = (("根本原因（首次观察到的故障）：", " Root Cause (first observed failure):"), ("失败：", " Failures:"),
               ("本地排名：", "local_rank: "), ("进程 ID：", "pid: "), ("时间：", " time : "), ("主机：", " host : "),
               ("排名：", " rank : "), ("退出代码：", " exitcode : "), ("错误文件：", " error_file: "),
               ("回溯信息：", " traceback : "), ("（", " ("), ("）", ")"), ("]：", "]:"))
#: Slurm's srun when tasks of a step end badly: 'srun: error: node-0-1: tasks 8-13,15: Exited with exit code 1',
#: '... task 3: Killed' / 'Aborted (core dumped)' / 'Segmentation fault'; the numbers are Slurm task ids
#: (SLURM_PROCID: the global ranks when srun starts one task per rank, node indices under `srun torchrun`)
_SRUN_EXIT = _re.compile(r"srun: error: (?P<host>[A-Za-z0-9][\w.-]{0,252}): tasks? (?P<tasks>[\d,-]{1,4000}): "
                         r"(?P<how>Exited with exit code (?P<code>\d{1,6})|Killed|Terminated"
                         r"|Aborted(?: \(core dumped\))?|Segmentation fault(?: \(core dumped\))?)")


#: torchelastic's error_handler when a worker decorated with @record wrote its error file but the agent has
#: none of its own: '... error_handler: [ERROR] no error file defined for parent, to copy child error file
#: (/tmp/torchelastic_x/none_y/attempt_0/0/error.json)'; the file sits in attempt_<restart>/<local rank>/
_CHILD_ERROR_FILE = _re.compile(r"no error file defined for parent, to copy child error file "
                                r"\((?P<path>[^()\n]{0,4096})\)")
_ATTEMPT_DIR = _re.compile(r"/attempt_(?P<attempt>\d{1,6})/(?P<lr>\d{1,6})/error\.json$")


#: a worker's own statement of its place in the job (vLLM's parallel_state: `world_size=2 rank=1 local_rank=1
#: distributed_init_method=tcp://... backend=nccl`, vllm-project/vllm#21661): which rank that process is
_RANK_IDENTITY = _re.compile(r"\bworld_size=(?P<ws>\d{1,7}) rank=(?P<rank>\d{1,7})(?: local_rank=(?P<lr>\d{1,7}))?"
                             r" distributed_init_method=")


#: PaddlePaddle's launcher (paddle.distributed.launch): `LAUNCH ERROR 2022-11-21 02:35:54,385 Container failed !!!`,
#: then `Container rank 0 status failed cmd [...] code 1 log log/workerlog.0` (PaddleDetection #7380)
_PADDLE = _re.compile(r"^LAUNCH (?:ERROR|INFO|WARNING) \d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:,\d{1,6})? "
                      r"(?P<what>Pod failed|Container failed !!!)")
_PADDLE_RANK = _re.compile(r"^Container rank (?P<rank>\d{1,7}) status failed cmd .{0,8000}? "
                           r"code (?P<code>-?\d{1,6}) log ")


#: launch lines that state the job's size (issue 42): Lightning's per-process `Initializing distributed:
#: GLOBAL_RANK: 2, MEMBER: 3/4` and `All distributed processes registered. Starting with 4 processes`, Accelerate's
#: `Num processes: 4`, DeepSpeed's `dist_world_size=16` and `WORLD INFO DICT: {'gpu1504': [0], 'gpu1505': [0]}`,
#: torchelastic's `global_world_sizes=[8, 8, ...]`, and the command lines of mpirun/horovodrun (`-np 8`), torchrun
#: (`--nproc_per_node=8 --nnodes=2`) and accelerate launch (`--num_processes 4`)
_LIGHTNING_MEMBER = _re.compile(r"Initializing distributed: GLOBAL_RANK: (?P<rank>\d{1,7}), "
                                r"MEMBER: \d{1,7}/(?P<ws>\d{1,7})")
_SIZE_SAID = _re.compile(
    r"All distributed processes registered\. Starting with (?P<lightning>\d{1,7}) processes"
    r"|^Num processes: (?P<accelerate>\d{1,7})\s*$"
    r"|\bdist_world_size=(?P<deepspeed>\d{1,7})\b"
    r"|\bglobal_world_sizes=\[(?P<elastic>\d{1,7})[,\]]"
)
#: DeepSpeed's map of hosts to their slots: the job's size is the count of slots
_WORLD_INFO = _re.compile(r"WORLD INFO DICT: \{(?P<dict>[^{}]{1,4096})\}")
#: a command line of an MPI launcher (mpirun, mpiexec, horovodrun, prterun) with its process count
_MPI_COMMAND = _re.compile(r"(?:^|[\s/])(?:mpirun|mpiexec|horovodrun|prterun)\s(?:.{0,512}?\s)?"
                           r"(?:-np|-n|--np)[\s=](?P<n>\d{1,7})\b")
#: torchrun's (and torch.distributed.launch/run's) workers per node, and its node count (1 when not given)
_NPROC = _re.compile(r"--nproc[_-]per[_-]node[\s=](?P<n>\d{1,5})\b")
_NNODES = _re.compile(r"--nnodes[\s=](?P<n>\d{1,5})\b")
#: accelerate launch's total process count
_NUM_PROCESSES = _re.compile(r"\baccelerate launch\b.{0,512}?--num_processes[\s=](?P<n>\d{1,7})\b")
SIZE_KIND = ErrorKind.JOB_SIZE


def job_size_line(text: str, origin: Origin) -> list:
    """The job's size (and a process's rank) where a launch line states it; [] if the line states none."""
    if "MEMBER: " in text:
        m = _LIGHTNING_MEMBER.search(text)
        if m:
            return [ErrorEvent(kind=ErrorKind.RANK_IDENTITY, message=text.strip()[:500], origin=origin,
                               source="launcher",
                               data=RankStated(rank=int(m.group("rank")), world_size=int(m.group("ws")),
                                               launcher="lightning"))]
    size, launcher = _stated_size(text)
    if not size:
        return []
    return [ErrorEvent(kind=SIZE_KIND, message=text.strip()[:500], origin=origin, source="launcher",
                       data=RankStated(world_size=size, launcher=launcher))]


def _stated_size(text: str) -> tuple[int | None, str | None]:
    """(size, who said it) from one launch line, or (None, None)."""
    if "processes" in text or "Num processes" in text or "world_size" in text or "world_sizes" in text:
        m = _SIZE_SAID.search(text)
        if m:
            who = next(k for k, v in m.groupdict().items() if v is not None)
            return int(m.group(who)), who
    if "WORLD INFO DICT" in text:
        m = _WORLD_INFO.search(text)
        slots = _re.findall(r"\[([\d, ]{0,2048})\]", m.group("dict")) if m else []
        n = sum(len(_re.findall(r"\d+", s)) for s in slots)
        return (n, "deepspeed") if n else (None, None)
    if "-n" in text and ("mpi" in text or "horovodrun" in text or "prterun" in text):
        m = _MPI_COMMAND.search(text)
        if m:
            return int(m.group("n")), "mpirun"
    if "--nproc" in text:
        m, nodes = _NPROC.search(text), _NNODES.search(text)
        if m:
            return int(m.group("n")) * (int(nodes.group("n")) if nodes else 1), "torchrun"
    if "--num_processes" in text:
        m = _NUM_PROCESSES.search(text)
        if m:
            return int(m.group("n")), "accelerate"
    return None, None


def match_line(text: str, origin: Origin) -> list:
    """One-line launcher facts: a worker's exit or a signal the agent sent, a worker's rank, the job's size;
    [] if none."""
    sized = job_size_line(text, origin)
    if sized:
        return sized
    if "distributed_init_method=" in text:
        m = _RANK_IDENTITY.search(text)
        if m:
            lr = m.group("lr")
            return [ErrorEvent(kind=ErrorKind.RANK_IDENTITY, message=text.strip()[:500], origin=origin,
                               source="launcher",
                               data=RankStated(rank=int(m.group("rank")), world_size=int(m.group("ws")),
                                               local_rank=int(lr) if lr else None))]
    if text.startswith(("LAUNCH ", "Container rank ")):
        m = _PADDLE.match(text)
        if m:
            return [ErrorEvent(kind=ErrorKind.LAUNCHER_EXIT, message=text.strip()[:500], origin=origin,
                               source="launcher",
                               data=WorkerReport(launcher="paddle", what=m.group("what")))]
        m = _PADDLE_RANK.match(text)
        if m:
            return [ErrorEvent(kind=ErrorKind.LAUNCHER_EXIT, message=text.strip()[:500],
                               origin=Origin(origin.host, None, int(m.group("rank")), origin.file, origin.line),
                               source="launcher", data=WorkerReport(launcher="paddle", exitcode=int(m.group("code"))))]
    if text.startswith("srun: error: "):
        return _srun_line(text, origin)
    if "child error file" in text:
        return _child_error_file(text, origin)
    if "noticed that process rank" in text:
        return _mpi_noticed(text, origin)
    if ("exit" not in text and "signal" not in text and "Killing subprocess" not in text
            and "terminated with" not in text):
        return []
    spawned = _spawn_line(text, origin)
    if spawned:
        return spawned
    m = _DS_EXIT.search(text)
    if m:
        lr = _DS_LOCAL_RANK.search(m.group("cmd"))
        return [ErrorEvent(kind=ErrorKind.LAUNCHER_EXIT, message=text.strip(), origin=Origin(host=origin.host,
                                                                                             file=origin.file,
                                                                                      line=origin.line),
                           source="launcher", data=WorkerReport(exitcode=int(m.group("code")), launcher="deepspeed",
                                                                local_rank=int(lr.group("lr")) if lr else None))]
    m = _DS_KILL.search(text)
    if m:
        return [ErrorEvent(kind=ErrorKind.LAUNCHER_SIGNAL, message=text.strip(), origin=_with_pid(origin, m),
                           source="launcher",
                           data=WorkerReport(pid=int(m.group("pid")), launcher="deepspeed"))]
    m = _ELASTIC_EXIT.search(text)
    if m:
        return [ErrorEvent(kind=ErrorKind.LAUNCHER_EXIT, message=text.strip(), origin=_with_pid(origin, m),
                           source="launcher",
                           data=WorkerReport(exitcode=int(m.group("code")), local_rank=int(m.group("lr")),
                                             pid=int(m.group("pid"))))]
    m = _VLLM_EXIT.search(text)
    if m:
        return [ErrorEvent(kind=ErrorKind.LAUNCHER_EXIT, message=text.strip(), origin=_with_pid(origin, m),
                           source="launcher",
                           data=WorkerReport(exitcode=int(m.group("code")), pid=int(m.group("pid")),
                                             worker=m.group("who")))]
    m = _AGENT_SIGNAL.search(text)
    if m:
        sig = m.group("sig")
        header = _LOG_HEADER_PID.match(text.strip())
        who = Origin(host=origin.host, pid=int(header.group("pid")) if header else origin.pid, file=origin.file,
                     line=origin.line)
        return [ErrorEvent(kind=ErrorKind.AGENT_SIGNAL, message=text.strip(), origin=who, source="launcher",
                           data=WorkerReport(signal=int(sig) if sig.isdigit() else sig))]
    m = _SIGNAL.search(text)
    if m:
        return [ErrorEvent(kind=ErrorKind.LAUNCHER_SIGNAL, message=text.strip(), origin=_with_pid(origin, m),
                           source="launcher",
                           data=WorkerReport(pid=int(m.group("pid")), signal=m.group("sig")))]
    return []


def _srun_line(text: str, origin: Origin) -> list:
    """srun's report that tasks of its step ended (exit code or fatal signal), on the node it names; [] if none."""
    m = _SRUN_EXIT.match(text)
    tasks = unfold(m.group("tasks")) if m else None
    if not m or tasks is None:
        return []
    data = {"launcher": "srun", "tasks": tasks, "how": m.group("how")}
    if m.group("code") is not None:
        data["exitcode"] = int(m.group("code"))
    return [ErrorEvent(kind=ErrorKind.LAUNCHER_EXIT, message=text.strip()[:500], source="launcher",
                       data=WorkerReport(**data),
                       origin=Origin(host=m.group("host").split(".")[0], file=origin.file, line=origin.line))]


#: Open MPI's (and PRRTE's) report of the process whose death ended the job: `mpirun noticed that process rank 3
#: with PID 1167 on node 10.10.21.2 exited on signal 11 (Segmentation fault).` (NVIDIA/nccl-tests#218); a poster may
#: redact the PID and node (`with PID xxxxxx on node xxxxxxxx`)
_MPI_NOTICED = _re.compile(
    r"(?P<who>mpirun|mpiexec|prterun|orterun) noticed that process rank (?P<rank>\d{1,7}) with PID (?P<pid>\w{1,16}) "
    r"on node (?P<node>[\w.:-]{1,253}?) exited on signal (?P<sig>\d{1,3})(?: \((?P<name>[^)]{1,64})\))?"
)
#: what a poster writes in place of a value they hide: `xxxxxx`, `XXXX`, `***`, or the field's own name in capitals
#: (`with PID 0 on node HOSTNAME`, horovod/horovod#469)
_REDACTED = _re.compile(r"[xX*#]{2,}|HOSTNAME|NODENAME|NODE|<[^<>]{1,32}>")


def _mpi_noticed(text: str, origin: Origin) -> list:
    """Open MPI's word on the rank that died of a signal, its pid and node (what a poster redacted stays
    unknown, never a host called 'xxxxxxxx' nor pid 0, which no user process has); [] if the line is not that
    report."""
    m = _MPI_NOTICED.search(text)
    if not m:
        return []
    pid, node = m.group("pid"), m.group("node")
    host = None if _REDACTED.fullmatch(node) else short_host(node)
    data = {"launcher": m.group("who"), "signal": int(m.group("sig")), "first": True}
    if m.group("name"):
        data["signal_name"] = m.group("name")
    known_pid = int(pid) if pid.isdigit() and int(pid) > 0 else None
    return [ErrorEvent(kind=ErrorKind.LAUNCHER_EXIT, message=text[m.start():].strip()[:500], source="launcher",
                       data=WorkerReport(**data),
                       origin=Origin(host, known_pid, int(m.group("rank")), origin.file, origin.line))]


def _child_error_file(text: str, origin: Origin) -> list:
    """The worker (by local rank, from the file's folder) that left an error file: it raised, and @record
    wrote why. Information only: the exit line says the same worker failed."""
    m = _CHILD_ERROR_FILE.search(text)
    if not m:
        return []
    where = _ATTEMPT_DIR.search(m.group("path"))
    data = {"local_rank": int(where.group("lr")), "attempt": int(where.group("attempt"))} if where else {}
    return [ErrorEvent(kind=ErrorKind.CHILD_ERROR_FILE, message=text.strip(), origin=origin, source="launcher",
                       data=WorkerReport(**data))]


def _spawn_line(text: str, origin: Origin) -> list:
    """mp.spawn's report of how a worker ended, or of the signal it sends the others; [] if none."""
    m = _SPAWN_EXIT.search(text)
    if m and ("ProcessExitedException" in text or text.lstrip().startswith("process ")):
        code = int(m.group("code")) if m.group("code") is not None else _signal_code(m.group("sig"))
        data = {"local_rank": int(m.group("idx")), "launcher": "mp.spawn", "exitcode": code}
        if m.group("sig"):
            data["signal"] = m.group("sig")
        return [ErrorEvent(kind=ErrorKind.LAUNCHER_EXIT, message=text.strip()[:500], source="launcher",
                           data=WorkerReport(**data),
                           origin=Origin(host=origin.host, file=origin.file, line=origin.line))]
    m = SPAWN_RAISED.match(text.strip())
    if m:  # the traceback below is that worker's; its exit code is not printed
        return [ErrorEvent(kind=ErrorKind.LAUNCHER_EXIT, message=text.strip(), source="launcher",
                           origin=Origin(host=origin.host, file=origin.file, line=origin.line),
                           data=WorkerReport(local_rank=int(m.group("idx")), launcher="mp.spawn", raised=True))]
    m = _SPAWN_TERM.search(text)
    if m and "spawn" in text:
        return [ErrorEvent(kind=ErrorKind.LAUNCHER_SIGNAL, message=text.strip(), origin=_with_pid(origin, m),
                           source="launcher",
                           data=WorkerReport(pid=int(m.group("pid")), signal=m.group("sig"), launcher="mp.spawn"))]
    return []


def _signal_code(name: str | None) -> int | None:
    """'SIGSEGV' -> -11, a return code as subprocess and mp.spawn give it; None for a name this OS lacks."""
    import signal as _signal

    try:
        return -int(_signal.Signals[name]) if name else None
    except KeyError:
        return None


def _with_pid(origin: Origin, m) -> Origin:
    """The line names the worker's pid: that is the event's process, not the agent that printed it."""
    return Origin(host=origin.host, pid=int(m.group("pid")), rank=None, file=origin.file, line=origin.line)


class ElasticBlock:
    """Reads torchelastic's `ChildFailedError` report line by line.

    Layout (torch 1.9+): a `Failures:` section and a `Root Cause (first observed failure):`
    section, each with `[global_rank]:` entries of `time/host/rank/exitcode/error_file/traceback`.
    `feed` returns the finished entries' events and whether the line belonged to the block.
    """

    def __init__(self) -> None:
        self.role: str | None = None
        self.entry: dict | None = None
        self.origin: Origin | None = None
        self.header = False  #: after the `ChildFailedError:` line: its rules and `<script> FAILED` title follow

    def feed(self, text: str, origin: Origin) -> tuple[bool, list]:
        line = text.strip()
        if (self.role is None and not self.header and "：" not in line and "ChildFailedError" not in line
                and not any(marker in line for marker in _BLOCK_MARKERS) and not _mid_table(line)):
            return False, []  # the common case, a log line outside a report (this runs on every line of a log)
        if "：" in line:  # a full-width colon: perhaps the report's labels translated
            line = _untranslated(line)
        parts = self._flattened(line)
        if parts:
            taken, done = False, []
            for part in parts:
                took, closed = self._feed_line(part, origin)
                taken, done = taken or took, done + closed
            return taken, done
        return self._feed_line(line, origin)

    def _flattened(self, line: str) -> list[str]:
        """The report's lines, where one physical line holds several of its parts; [] for a line of its own."""
        if len(line) > 65536:
            return []
        cuts = [m.start() for m in _FLAT_CUT.finditer(line)]
        if len(cuts) < 2 or (self.role is None and not any(m in line for m, _ in _BLOCK_ROLE)):
            return []
        head = line[:cuts[0]].strip(" -=")
        parts = [head] if head else []
        return parts + [line[a:b].strip() for a, b in zip(cuts, cuts[1:] + [len(line)])]

    def _feed_line(self, line: str, origin: Origin) -> tuple[bool, list]:
        if self.role is None:
            if line.endswith("ChildFailedError:") and "elastic" in line:
                self.header = True  # the exception line itself is the other readers' (a python-exception)
                return False, []
            if self.header and (_RULE.match(line) or line.endswith(" FAILED")):
                return True, []  # the report's title between its rules: the entries follow
            self.header = False  # any other line ends the title (a section marker below opens the report)
            if _mid_table(line):  # an entry whose section heading is not in these lines: a failure all the same
                self.role, self.entry, self.origin = ErrorKind.CHILD_FAILURE, {}, origin
        for marker, role in _BLOCK_ROLE:
            if line.startswith(marker):
                done = self._close()
                self.role, self.header = role, False
                return True, done
        if self.role is None:
            return False, []
        m = _ENTRY.match(line)
        if m:
            done = self._close()
            self.entry, self.origin = {"rank": int(m.group("rank"))}, origin
            return True, done
        m = _FIELD.match(line)
        if m and self.entry is not None:
            self._field(m.group("key"), m.group("value").strip())
            return True, []
        if line.startswith(("---", "===", "<NO_OTHER_FAILURES>")) or not line:
            done = self._close()
            if line.startswith("==="):
                self.role = None
            return True, done
        done = self._close()
        self.role = None
        return False, done

    def finish(self) -> list:
        return self._close()

    def _field(self, key: str, value: str) -> None:
        entry = self.entry
        if key == "rank":
            m = _RANK_FIELD.match(value)
            if m:
                entry["rank"], entry["local_rank"] = int(m.group("rank")), int(m.group("lr"))
        elif key == "exitcode":
            m = _EXIT_FIELD.match(value)
            if m:
                entry["exitcode"], entry["pid"] = int(m.group("code")), int(m.group("pid"))
        elif key == "host":
            entry["fqdn"] = value
            entry["host"] = value.split(".")[0]  # NCCL's short form, the join key with NCCL lines
        elif key == "time":
            entry["time"] = value
        elif key == "traceback":
            m = _SIGNAL_NAME.search(value)
            if m:
                entry["signal"] = m.group("name")

    def _close(self) -> list:
        entry, self.entry = self.entry, None
        if entry is None or self.role is None or not (entry.keys() & {"rank", "pid"}):
            return []  # a mid-table entry that gave neither a rank nor a pid names no worker
        base = self.origin or Origin()
        origin = Origin(host=entry.get("host"), pid=entry.get("pid"), rank=entry.get("rank"), file=base.file,
                        line=base.line)
        return [ErrorEvent(kind=self.role, message=f"torchelastic reports {_entry_said(entry)}", origin=origin,
                           timestamp=entry.get("time"), source="launcher", data=WorkerReport(**entry))]


def _mid_table(line: str) -> bool:
    """Whether a line is one of an entry's fields as the report pads them (cheap first test: its first letter)."""
    return line[:1] in ("t", "h", "r", "e") and _MID_TABLE.match(line) is not None


def _untranslated(line: str) -> str:
    """The report's labels back in torchelastic's words where a translation replaced them (else unchanged)."""
    if "排名" not in line and "失败" not in line and "根本原因" not in line:
        return line
    for said, label in _TRANSLATED:
        line = line.replace(said, label)
    return line.strip()


def _entry_said(entry: dict) -> str:
    """'rank 1 (local_rank 1) exited with exitcode 1 (pid 340055 on lenovo, at 2025-03-11_18:33:20)': one
    entry of the report in its own words, each part only where the block gave it."""
    lr = f" (local_rank {entry['local_rank']})" if "local_rank" in entry else ""
    who = f"rank {entry['rank']}{lr}" if "rank" in entry else "a worker"
    if "signal" in entry:
        how = f"was killed by {entry['signal']}"
    elif "exitcode" in entry:
        how = f"exited with exitcode {entry['exitcode']}"
    else:
        how = "failed"
    where = [f"pid {entry['pid']}"] if "pid" in entry else []
    if "host" in entry:
        where.append(f"on {entry['host']}")
    said = " ".join(where)
    if "time" in entry:
        said = f"{said}, at {entry['time']}" if said else f"at {entry['time']}"
    return f"{who} {how}" + (f" ({said})" if said else "")


# --- Open MPI's mpirun banners -------------------------------------------------------------------
# Between lines of dashes, mpirun says which process ended the job ('The first process to do so was:' /
# 'Process name: [[44912,1],251]' / 'Exit code:    3', nccl-tests #322) or that a process lost its MPI peer
# ('An MPI communication peer process has unexpectedly disconnected.' ... 'Local host: gpu' / 'Local PID:  4870'
# / 'Peer host:  gpu', nccl-tests #338). The process name's last number is the rank (MPI_COMM_WORLD).

_MPI_BANNERS = ("mpirun detected that one or more processes exited", "Primary job  terminated normally",
                "An MPI communication peer process has unexpectedly disconnected")
_MPI_NAME = _re.compile(r"^Process name: \[\[\d{1,10},\d{1,10}\],(?P<rank>\d{1,7})\]$")
_MPI_FIELD = _re.compile(r"^(?P<key>Exit code|Local host|Local PID|Peer host):\s+(?P<value>\S{1,253})$")
_DASHES = _re.compile(r"^-{20,200}")
_DASH_RULE = "-" * 20  #: what every _DASHES match starts with


class MpirunBlock:
    """Reads mpirun's banners line by line; `feed` returns whether the line was the banner's and the events
    it closed: the first failing process (`launcher-exit`, rank and exit code) and a lost MPI peer
    (`connection-closed`, from the local process to the peer host)."""

    def __init__(self) -> None:
        self.open = False
        self.fields: dict[str, str] = {}
        self.origin: Origin | None = None

    def feed(self, text: str, origin: Origin) -> tuple[bool, list]:
        line = text.strip()
        done: list = []
        if not self.open and not line.startswith(_MPI_BANNERS) and not line.startswith(_DASH_RULE):
            return False, []  # the common case, a log line outside a banner: no regex for it (runs on every line)
        if "noticed that process rank" in line:  # its own one-line report (match_line), never a banner's prose
            return False, self._close()
        m = _DASHES.match(line)
        if m:  # the rule that ends a banner, or starts one (a wrap repair may have glued the banner's first line on)
            done = self._close()
            line = line[m.end():].strip()
            if not line:
                return bool(done) or bool(self.origin), done
        if line.startswith(_MPI_BANNERS):
            done += self._close()
            self.open, self.origin = True, origin
            self.fields = {"banner": line}
            return True, done
        if not self.open:
            return bool(done), done
        m = _MPI_NAME.match(line)
        if m:
            self.fields["rank"] = m.group("rank")
            return True, []
        m = _MPI_FIELD.match(line)
        if m:
            self.fields[m.group("key")] = m.group("value")
        return True, []  # the banner's prose

    def finish(self) -> list:
        return self._close()

    def _close(self) -> list:
        f, origin, self.open, self.fields = self.fields, self.origin, False, {}
        if not self.open and not f:
            return []
        if origin is None or not f:
            return []
        if "rank" in f and f.get("Exit code", "").lstrip("-").isdigit():
            return [ErrorEvent(kind=ErrorKind.LAUNCHER_EXIT,
                               message=f"mpirun: the first process to exit was rank {f['rank']} "
                               f"(exit code {f['Exit code']})", origin=Origin(origin.host, None, int(f["rank"]),
                                                                                origin.file, origin.line),
                               source="launcher",
                               data=WorkerReport(launcher="mpirun", exitcode=int(f["Exit code"]), first=True))]
        if "Peer host" in f:
            pid = f.get("Local PID", "")
            return [ErrorEvent(kind=ErrorKind.CONNECTION_CLOSED, message=f"mpirun: process {pid or '?'} on "
                               f"{f.get('Local host', '?')} lost its MPI peer on {f['Peer host']}",
                               origin=Origin(f.get("Local host"), int(pid) if pid.isdigit() else None, None,
                                             origin.file, origin.line),
                               peer_addr=f["Peer host"], source="launcher", data=NetFailure(launcher="mpirun"))]
        return []

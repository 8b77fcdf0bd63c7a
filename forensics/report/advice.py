"""Plain words and the next step for each reason class: what an on-call engineer does now.

Why here: a reason class says *what* the evidence shows in the judges' terms ("wait-root",
"gpu-queued"); the person paged at night needs one sentence without jargon and one action
with the host and pid filled in. That is presentation, so it reads a `Suspect` and nothing
else, and every output (text, JSON, HTML, notebook) takes its words from `advise()`.
"""

from __future__ import annotations

from dataclasses import dataclass

from parsers.model import Suspect
from parsers.model.events import UNKNOWN_HOST
from parsers.model.findings import ReasonClass

#: the knob to name when the work a rank does outside collectives is legitimate but long
TIMEOUT_KNOB = ("if that work is legitimate but long, raise the process-group timeout "
                "(init_process_group(timeout=...); TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC for the heartbeat monitor)")

_PY_SPY = "py-spy dump --native --pid {pid}"


@dataclass(frozen=True)
class Advice:
    """One plain sentence (what it means) and one action (what to do next)."""

    meaning: str
    next_step: str

    def to_dict(self) -> dict[str, str]:
        return {"meaning": self.meaning, "next_step": self.next_step}


#: reason class -> (meaning, next step); {host}, {pid}, {rank} are filled from the suspect
_TABLE: dict[ReasonClass, tuple[str, str]] = {
    ReasonClass.STOPPED: (
        "the process is stopped: someone sent it SIGSTOP or a debugger holds it",
        "on {host}: `grep TracerPid /proc/{pid}/status` names a debugger holding it; if none, `kill -CONT {pid}`"),
    ReasonClass.MISSING: (
        "the process the job expects on its host does not exist: it died or never started",
        "on {host}: `dmesg -T | grep -i -e oom -e killed` and the launcher's log say why it ended"),
    ReasonClass.EXITED: (
        "the process ended while the other ranks still wait for it",
        "read its last output (stderr tail in the bundle) for why it ended; restart from the last checkpoint"),
    ReasonClass.HOST_FAULT: (
        "its machine reports a hardware or system fault (GPU, memory, PCIe, network)",
        "drain {host} (`scontrol update NodeName={host} State=DRAIN Reason=forensics`) and restart without it; "
        "`forensics hosts` lists the evidence"),
    ReasonClass.KNOWN_ERROR: (
        "its own log names an error this tool knows",
        "follow the known error's action listed with the evidence; `forensics hosts` says whether to exclude {host}"),
    ReasonClass.KERNEL_WAIT: (
        "it is stuck inside the operating system (state D), usually on storage, a network file system or a driver",
        "on {host}: `cat /proc/{pid}/stack`, `dmesg -T | tail`, and check the file systems it writes to"),
    ReasonClass.FROZEN_IN_OP: (
        "it entered a collective and then stopped making progress inside it",
        "on {host}: `" + _PY_SPY + "`; check its GPU (`nvidia-smi`, Xid lines in `dmesg`) and its network link"),
    ReasonClass.EXITED_FIRST: (
        "it was the first rank to die; the others failed after it",
        "read its output for the first error"),
    ReasonClass.RAISED: (
        "its own Python code raised an exception; the others then waited for it",
        "read the traceback in its output and fix the code or data that raised it"),
    ReasonClass.NEVER_JOINED: (
        "it never reached the rendezvous (init_process_group) the others wait in",
        "on {host}: `py-spy dump --pid {pid}` shows what it does instead (data loading, checkpoint loading); "
        + TIMEOUT_KNOB),
    ReasonClass.NAMED_ABSENT: (
        "another rank's own error names it as a rank that never arrived where the others waited (a monitored "
        "barrier); the rank that printed it only waited",
        "on {host}: `py-spy dump --pid {pid}` shows what it does instead; if it is gone, its output and "
        "`dmesg -T` say why it ended"),
    ReasonClass.NAMED_PEER: (
        "other ranks lost their connection to an address the files pair with it (its own NCCL lines, or its host's "
        "name); the ranks that printed it only lost the peer",
        "on {host}: check whether pid {pid} still runs (`ps -o stat= -p {pid}`); its output and `dmesg -T` say why it "
        "ended or stopped answering"),
    ReasonClass.OUTSIDE: (
        "its Python code is busy outside any collective while the others wait for it",
        "on {host}: `py-spy dump --pid {pid}` shows where; " + TIMEOUT_KNOB),
    ReasonClass.DATA_WAIT: (
        "its main thread waits for its DataLoader worker processes while the others wait for it",
        "on {host}: `py-spy dump --pid` each DataLoader worker (children of {pid}); check the dataset and its storage"),
    ReasonClass.MISMATCH: (
        "it called a different collective (or size) than the other ranks at the same point",
        "compare its call site with the others' in the stacks: look for a branch only some ranks take "
        "(`if rank == ...`, uneven data); TORCH_DISTRIBUTED_DEBUG=DETAIL checks collectives at run time"),
    ReasonClass.WRONG_PEER: (
        "it waits on a send or receive from a peer that never posts the matching op, while another rank's op to "
        "it goes unanswered: its code names the wrong peer (src/dst) at this point",
        "read its call site (the stack's send/recv line) and the src/dst it computes; compare with the rank "
        "whose op to it waits"),
    ReasonClass.UNANSWERED: (
        "it waits in a send that no rank receives, while the others wait in a collective it has not joined: its "
        "receiver is not in a receive (another rank that sends first, or one that receives only after the collective)",
        "read the order of its send and recv against its peer's at this step (each side sending first deadlocks); "
        "`py-spy dump --locals --pid {pid}` on {host} shows the dst it sends to"),
    ReasonClass.FR_MISSING: (
        "PyTorch's Flight Recorder shows it never scheduled a collective the others scheduled",
        "look at what it ran after its last recorded collective (its stack and output)"),
    ReasonClass.FR_CULPRIT: (
        "PyTorch's Flight Recorder shows its collective differs from the other ranks'",
        "compare its call site with the others'; TORCH_DISTRIBUTED_DEBUG=DETAIL checks collectives at run time"),
    ReasonClass.WAIT_ROOT: (
        "the other ranks wait on it, directly or through each other; it waits on nobody",
        "on {host}: `" + _PY_SPY + "` shows what it does instead"),
    ReasonClass.WENT_AHEAD: (
        "it is inside (or past) a collective that every other rank of its group has not reached: it calls one "
        "they skip, or they skip one it calls",
        "compare its call site with the others' (the stacks, the last positions): look for a collective only some "
        "ranks call (`if rank == 0:` around logging, checkpoints or metrics); TORCH_DISTRIBUTED_DEBUG=DETAIL checks "
        "collectives at run time"),
    ReasonClass.MISSING_LINE: (
        "its log stops before the operation the other ranks wait in",
        "look at what it did after its last logged operation: its stack and the end of its output"),
    ReasonClass.NO_DUMP: (
        "it left no Flight Recorder dump where the others did: it may have died or hung hard",
        "on {host}: check whether pid {pid} still exists (`ps -o stat= -p {pid}`) and read its output tail"),
    ReasonClass.ABSENT: (
        "no process of this rank was found on any host that was collected",
        "if its host was collected, the process is gone: read how it ended there (`dmesg -T | grep -i -e oom "
        "-e killed`, the end of its output); else find where it ran (the scheduler's task list) and collect that "
        "host too"),
    ReasonClass.STALLED: (
        "its peers wait for data it should send inside a collective",
        "on {host}: check its GPU and network link (`nvidia-smi`, Xid in `dmesg`, NCCL WARN lines)"),
    ReasonClass.GPU_QUEUED: (
        "its collective was queued on the GPU but never started: work queued ahead of it keeps the GPU busy",
        "on {host}: `" + _PY_SPY + "` and `nvidia-smi`; find what it enqueued before this collective"),
    ReasonClass.FROZEN: (
        "its recorder heartbeat stopped: the process no longer runs (stopped, killed or hung hard)",
        "on {host}: `ps -o stat= -p {pid}` (T: `kill -CONT {pid}`; gone: its output and `dmesg -T` say why)"),
    ReasonClass.NO_RECORDER_STATE: (
        "it left no recorder state while its peers wait on it: it may never have started NCCL, or died",
        "on {host}: check whether pid {pid} is alive (`ps -o stat= -p {pid}`) and read its output tail"),
    ReasonClass.STALLED_FIRST: (
        "it was the first rank to stop making progress",
        "on {host}: `" + _PY_SPY + "`"),
    ReasonClass.WAIT_CYCLE: (
        "ranks wait on each other in a cycle: they call the collectives of several groups in different orders",
        "make every rank call the collectives of these groups in one order (look at the call sites in the stacks)"),
    ReasonClass.BEHIND: (
        "it is behind the other ranks of a communicator",
        "on {host}: `" + _PY_SPY + "` shows what holds it back"),
    ReasonClass.RAS_BEHIND: (
        "NCCL's RAS service reports it behind the others",
        "on {host}: `" + _PY_SPY + "`"),
    ReasonClass.RAS_MISSING: (
        "NCCL's RAS service got no answer from it",
        "on {host}: check whether pid {pid} is alive and not stopped (`ps -o stat= -p {pid}`)"),
    ReasonClass.RAS_DEAD: (
        "NCCL's RAS service reports its process dead",
        "on {host}: `dmesg -T | grep -i -e oom -e killed` and its output say why it ended"),
    ReasonClass.LOST_PEER: (
        "the ranks that lost a network connection all lost it to this one",
        "check {host}'s network: link state, NIC counters, NCCL WARN lines, `dmesg`"),
    ReasonClass.SILENT: (
        "it reported no error while the others failed: a lead, not proof",
        "on {host}: `py-spy dump --pid {pid}` if it still runs; its output otherwise"),
    ReasonClass.ERROR_FIRST: (
        "it logged the first error: a lead, not proof (the first to complain is often a victim)",
        "read the lines around its first error and compare with the other ranks'"),
    ReasonClass.STRAGGLER: (
        "the job runs, but its collectives wait for this rank, operation after operation",
        "on {host}: `py-spy record --pid {pid}` for a minute; compare its data loading and GPU clocks with a peer's"),
    ReasonClass.SLOW_HOST: (
        "every rank of this machine enters collectives last: the machine, not one process, is slow",
        "check {host}: CPU frequency and throttling, GPU clocks (`nvidia-smi -q -d CLOCK,PERFORMANCE`)"),
    ReasonClass.SLOW_LINK: (
        "its data spends longer on the network than any other link's",
        "check {host}'s network link: NIC counters, cable and switch port"),
}


def advise(suspect: Suspect) -> Advice:
    """The plain sentence and the next step for `suspect`, with its host and pid filled in."""
    rc = ReasonClass.of(suspect.reason_class)
    meaning, step = _TABLE.get(rc, (str(suspect.reason_class), "look at its evidence below")) if rc else (
        str(suspect.reason_class), "look at its evidence below")
    return Advice(meaning=meaning, next_step=_fill(step, suspect))


def _fill(template: str, suspect: Suspect) -> str:
    """Host, pid and rank into the template, in words where the evidence does not name them."""
    host = suspect.host if suspect.host and suspect.host != UNKNOWN_HOST else "its host (no evidence names it)"
    rank = suspect.rank if suspect.rank is not None else "?"
    pid = str(suspect.pid) if suspect.pid else f"<pid of rank {rank}>"  # said as what to fill in, never a bare 'PID'
    return template.format(host=host, pid=pid, rank=rank)


def covered() -> set[ReasonClass]:
    """The reason classes that have their own words (a test checks every class does)."""
    return set(_TABLE)


#: the words of a deadlock verdict, which has members but no one culprit
CYCLE_ADVICE = Advice(*_TABLE[ReasonClass.WAIT_CYCLE])
#: a cycle whose every edge is a send or receive (a pair that both send first, or both receive first)
P2P_CYCLE_ADVICE = Advice(
    "ranks wait on each other through send/recv: each posts the op the other must answer, and neither answers",
    "order the pair's ops so that one side receives while the other sends (or post both with isend/irecv or "
    "batch_isend_irecv and wait on both); the stacks' call sites show each rank's send/recv line")

"""How the one pipeline judges each real excerpt alone in a folder, against what its thread establishes.

One place for the test and for docs/realworld.md (scripts/realworld_table.py), so the
table in the docs is what the tests check.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from parsers import knowledge
from forensics.report.words import analyze

from _load import load
from _records import missing, records_of

CORPUS = Path(__file__).resolve().parents[1] / "fixtures" / "realworld"
KB = knowledge.load(use_env=False)

#: Known truths the pipeline does not reach yet, with why (the test expects them to stay unreached:
#: strict xfail, so a fix must move the case out of this list).
GAPS: dict[str, str] = {}

#: Known truths the excerpt alone cannot reach (the thread used what the excerpt lacks): the verdict must be
#: honest there (no culprit at 0.5 or more) and its summary must say what the excerpt does show (the words).
BEYOND_EXCERPT = {
    "pytorch-78514": ("rank 0 returning from its isend without waiting is the reporter's code; the lines are rank 1's "
                      "traceback, its peer named by an address no line pairs with a process",
                      ["18.25.6.30", "no file maps that address"]),
    "pytorch-172398": ("the memset where NCCL 2.29 wants NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER is the maintainer's "
                       "statement; the lines show every rank's NCCL 2.29.2 'invalid usage' in the device-communicator "
                       "manager, no rank at fault", ["invalid usage", "nccl_devcomm_manager"]),
    "pytorch-88000": ("the truth (rank 1 never calls the broadcast) is in the reporter's script; the lines show "
                      "only both ranks starting their watchdog",
                      ["no line that was understood reports an error", "not understood"]),
    "spark-vllm-335": ("the excerpt is the traceback of one worker (pid 213, no rank printed) in the rendezvous; "
                       "'rank 1 never joins' is the thread's title", ["pid 213", "init_process_group"]),
    "fuser-3055": ("the teardown and the NCCL 2.23.4 link come from the thread; the lines show stuck watchdogs "
                   "in three subgroups, no rank that stands out", ["heartbeat", "watchdog got stuck"]),
    "nccl-1612": ("the security scanner is known from the reporter; the WARN line shows only that peer 10.10.1.3 "
                  "closed a bootstrap socket", ["Connection closed by remote peer 10.10.1.3"]),
    "cache-dit-761": ("the code bug in cache-dit's Ulysses path is known from the pull request; the lines show rank 2 "
                      "of mesh_ulysses timing out in the same all-to-all as the others", ["ALLTOALL SeqNum 472025"]),
    "cache-dit-761-what": ("as cache-dit-761; this part names only the rank inside mesh_ulysses, no global rank",
                           ["of group mesh_ulysses", "ALLTOALL SeqNum 472025"]),
    "jade-hpc-194": ("node dgk713 is named only in the thread's title; the lines show the ECC error and put it on "
                     "their (unnamed) host", ["uncorrectable ECC", "is to exclude"]),
    "vllm-3688": ("the NCCL 2.18.1 bug is known from the reporter's upgrade to 2.19.3; the lines show the CUDA "
                  "failure under NCCL 2.18.1, no version comparison", ["NCCL error", "pid 4028887"]),
    "accelerate-3861": ("the extra wait_for_everyone() on the main process is in the reporter's code; the lines show "
                        "only rank 2 timing out in a broadcast", ["BROADCAST SeqNum 22", "rank 2 only"]),
    "accelerate-3861-dump": ("as accelerate-3861; this part shows rank 1 asking for a dump and rank 0 observing it, "
                             "no op of rank 0", ["ranks 0-1 only", "dump-signal"]),
    "lightning-19106": ("the diverging log_dict keys are the reporter's code; the three lines show ranks 0, 2 and 3 "
                        "starting the same ALLREDUCE and no error", ["no error"]),
    "tgi-2099": ("the NCCL regression is known from the PR and its link; the stack shows one process waiting inside "
                 "ncclAllReduce", ["pid 1302975", "ncclGroupEndInternal"]),
    "vllm-3069": ("the incompatible NCCL build (2.19.3+cuda11.0 against CUDA 11.6) is in the reporter's prose and "
                  "fix; the one WARN line states only the graph-capture requirement",
                  ["NCCL cannot be captured in a graph"]),
    "nccl-520": ("the aws-ofi-nccl plugin built without its -aws branch is the reporter's finding; the lines show "
                 "only an internal error under NCCL 2.9.9 on one host", ["NCCL error", "compute-dy-p4d24xlarge-77"]),
    "nccl-1669": ("the RAS query during init and the crash in NCCL's RAS thread are the reporter's reproduction and "
                  "the maintainer's fix; the excerpt stops at Open MPI's '*** Process received signal ***' banner, "
                  "before its 'Signal:' line, and that handler also reports SIGABRT (6), a waiting process's own "
                  "watchdog abort: the lines show which process got a fatal signal, not that it failed first",
                  ["pid 405884 on rtptest1621", "Process received signal"]),
    "vllm-7896": ("the bad instance node is the reporter's finding and is never named; no line carries an ip or "
                  "host, they show Ray worker pid 11305 raising vLLM's NCCL 'unhandled cuda error' in init_device",
                  ["pid 11305", "unhandled cuda error"]),
    "pytorch-150916": ("that the kill started the failure is the reporter's test (an agent killed on purpose); the "
                       "lines show only that agent pid 1359 got signal 15 and shut its worker down, which a user's "
                       "kill of a job that already hung prints the same way", ["pid 1359", "Received 15 death signal"]),
    "rccl-429": ("ranks 0, 1 and 3 calling AllReduce is the maintainer's prose; the lines show one process each "
                 "way (1 against 1), so no odd one out", ["opCount 28c", "pid 45006", "pid 45012"]),
    "mmseg-2137": ("the wandb hook's master-only work is known from the description and sibling threads; the lines "
                   "show rank 1 completing work past the all-gather rank 0 waits in (7560 against 7559), a split "
                   "whose odd side the counters do not say",
                   ["rank 1 completed work up to 7560 while rank 0 waits in work 7559"]),
    "speechbrain-2401": ("checkpointing in a main-process-only section is the maintainer's finding (PR #2404); the "
                         "line shows rank 1 in an all-reduce and rank 0 in a broadcast at one position (1 against 1), "
                         "so no odd one out", ["SequenceNumber 485", "broadcast(count=1)", "allreduce(count=25)"]),
    "ms-swift-9443": ("the text-only batch is the pull request's finding; the line shows ranks 0 and 1 all-reducing "
                      "different sizes at one position (1 against 1), not which rank had the text-only batch",
                      ["SequenceNumber 3104", "count=195812480", "count=51123456"]),
    "horovod-530": ("the job's 7 workers are in the reporter's prose; the ready lists alone leave rank 2 out, but "
                    "ranks above 6 may be missing too where the size is not in the lines",
                    ["leaves rank 2 out of every ready list", "the job's size is not stated"]),
    "nccl-1808": ("the outside TCP request is the reporter's finding; the WARN shows a connection with the wrong "
                  "magic reaching pid 166's socket, not who sent it", ["wrong magic", "pid 166"]),
    "nccl-1996": ("the RAS bug is the reporter's diagnosis (NCCL_RAS_ENABLE=0 avoids it); the lines show pid 288505 "
                  "on n125-011-039 segfaulting inside libnccl, not which NCCL thread",
                  ["pid 288505", "Caught signal 11"]),
    "nccl-2013": ("the rail-only fabric is the maintainer's reading and NCCL_CROSS_NIC=0 the commenter's fix; the "
                  "WARN shows only a QP that could not reach RTR", ["ibv_modify_qp", "host-01"]),
    "nccl-2076": ("the IB faults on some nodes are the reporter's closing word and name no node; the lines show a "
                  "peer resetting the connection",
                  ["DistBackendError", "remote process exited or there was a network error"]),
    "pytorch-97066": ("that rank 0 all-reduces twice the elements is in the reproducer's code and its own print; the "
                      "watchdog lines show only rank 0 timing out", ["rank 0 timed out in ALLREDUCE SeqNum 1"]),
    "nccl-tests-218": ("UCX_TLS=tcp as the fix is the maintainer's advice and the reporter's confirmation; the lines "
                       "show mpirun's word that rank 3 on 10.10.21.2 died of signal 11",
                       ["rank 3", "10.10.21.2", "signal 11"]),
    "ompi-2661": ("the memory each rank needs (98 GB against 64 GB a node) is the benchmark developer's word through "
                  "the reporter; the lines show mpirun's word that rank 0 on host01 died of signal 9",
                  ["rank 0", "host01", "signal 9"]),
    "pytorch-141069": ("the uneven data is the reporter's diagnosis from per-rank prints outside the excerpt; the "
                       "lines show ranks 1-3 timing out at work 19 and no line of rank 0",
                       ["ranks 1-3", "SeqNum 19"]),
}

@dataclass
class Judged:
    stem: str
    url: str
    known: bool
    records: int
    recognised: int
    culprit: str
    summary: str
    outcome: str  #: right | honest | overclaim | gap
    text: str = ""  #: the summary and every line under it (leads, stragglers, consequences, what it shows)

    @property
    def ok(self) -> bool:
        return self.outcome in ("right", "honest")


def judge(stem: str) -> Judged:
    meta = json.loads((CORPUS / f"{stem}.json").read_text())
    expected = meta["records"]
    lost = missing(expected, records_of(load(CORPUS / f"{stem}.log")))
    with tempfile.TemporaryDirectory() as tmp:
        shutil.copy(CORPUS / f"{stem}.log", tmp)
        result = analyze(Path(tmp), KB)
    v = result.verdict
    c = v.culprit
    truth = meta["truth"]
    culprit = f"rank {c.rank} [{c.reason_class}, {c.confidence:.2f}]" if c and c.rank is not None else \
        (f"{c.label} [{c.reason_class}, {c.confidence:.2f}]" if c else "none")
    if truth.get("known") and _right(truth, c, result.hosts, v.text):
        outcome = "right"
    elif not truth.get("known") or stem in BEYOND_EXCERPT:
        shows = all(w in v.text for w in BEYOND_EXCERPT.get(stem, ("", []))[1])
        outcome = "overclaim" if c is not None else ("honest" if shows else "gap")
    else:
        outcome = "gap"
    return Judged(stem, meta["source_url"], bool(truth.get("known")), len(expected), len(expected) - len(lost),
                  culprit, v.summary, outcome, v.text)


def _right(truth: dict, c, hosts, summary: str = "") -> bool:
    """The thread's culprit rank (or host) named; or, for a host cause, that host judged suspect or exclude;
    or, for a cause that is a setting and no rank's (a timeout set too short), the summary saying so."""
    if truth.get("culprit_rank") is not None:
        return c is not None and c.rank == truth["culprit_rank"]
    if truth.get("culprit_pid") is not None:  # a process whose rank no line prints
        return c is not None and c.pid == truth["culprit_pid"]
    bad = [h for h in hosts if h.status in ("suspect", "exclude") and h.reasons]
    if truth.get("culprit_host"):
        return (c is not None and c.host == truth["culprit_host"]) or any(h.host == truth["culprit_host"] for h in bad)
    found = {g.entry.id for h in bad for g in h.reasons}
    cause = (truth.get("cause") or "").lower()
    if any(any(w in cause for w in words) and said in summary for words, said in _SETTING_WORDS):
        return True
    wanted = [ids for words, ids in _CAUSE_WORDS if any(w in cause for w in words)]
    return bool(wanted) and any(found & ids for ids in wanted)


#: words in a thread's stated cause that is a setting -> what the summary says of that setting
_SETTING_WORDS = [(("timeout was set to", "timeout set to"), "the collective timeout applied was"),
                  (("horovod_timeline was set to a directory",), "HOROVOD_TIMELINE names a directory"),
                  # a cause in the code that DDP's reducer states, with the remedy torch prints (issue 42)
                  (("ddp unused parameters",), "find_unused_parameters=True"),
                  # NCCL's own Duplicate GPU check: the job's device assignment, said as the known failure it is
                  (("duplicate gpu",), "two ranks of one communicator on the same GPU"),
                  # PyTorch's own word that its build lacks the backend the job asked for (issue 42, pytest output)
                  (("built without nccl",), "this build has no NCCL backend")]

#: words in a thread's stated cause -> knowledge-base entries that state the same cause
_CAUSE_WORDS = [(("xid 79", "fell off the bus", "fallen off"), {"xid-79", "gpu-fallen-off-bus"}),
                (("gpu was lost", "gpu is lost", "lost on"), {"gpu-lost-nvml", "xid-79", "gpu-fallen-off-bus"}),
                (("driver",), {"cuda-driver-too-old"}),
                (("fabricmanager", "fabric manager", "nvls"), {"nccl-nvls-cuda-failure"})]


def stems() -> list[str]:
    return sorted(p.stem for p in CORPUS.glob("*.log"))

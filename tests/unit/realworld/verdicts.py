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
from parsers.analyze import analyze

from tests.unit.realworld._load import load
from tests.unit.realworld._records import missing, records_of

CORPUS = Path(__file__).resolve().parents[2] / "fixtures" / "realworld"
KB = knowledge.load(use_env=False)

#: Known truths the pipeline does not reach yet, with why (the test expects them to stay unreached:
#: strict xfail, so a fix must move the case out of this list).
GAPS = {
    "pytorch-88000": "the truth (rank 1 never calls the broadcast) is in the thread's code, not in the log lines",
    "spark-vllm-335": "the DistStoreError traceback is cut by vLLM's worker prefix and word wraps: no exception read",
    "horovod-3871": "the WSL2 topology failure has no knowledge-base entry",
    "nccl-976": "the fabric-manager restart is told in prose; the log has no line that says it",
    "fuser-3055": "a teardown hang: the lines show every rank's heartbeat monitor, no rank that stands out",
    "nccl-1612": "a security scanner's connection is known from the thread; the WARN line names only a socket error",
    "returnn-1486": "the GPU stopped answering: the log shows only a corrected PCIe AER, no lost-GPU line",
    "vllm-6042-border": "the worker's death (exit -6) is told by vLLM's own message, not read as a launcher exit",
    "rccl-429": "only two processes' op lines are shown, one each way: the summary names the disagreement at "
                "opCount 28c, but who is the odd one needs the other ranks' lines (the maintainer had them)",
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
    if not truth.get("known"):
        outcome = "honest" if c is None else "overclaim"
    else:
        outcome = "right" if _right(truth, c, result.hosts) else "gap"
    return Judged(stem, meta["source_url"], bool(truth.get("known")), len(expected), len(expected) - len(lost),
                  culprit, v.summary, outcome)


def _right(truth: dict, c, hosts) -> bool:
    """The thread's culprit rank (or host) named; or, for a host cause, that host judged suspect or exclude."""
    if truth.get("culprit_rank") is not None:
        return c is not None and c.rank == truth["culprit_rank"]
    bad = [h for h in hosts if h.status in ("suspect", "exclude") and h.reasons]
    if truth.get("culprit_host"):
        return (c is not None and c.host == truth["culprit_host"]) or any(h.host == truth["culprit_host"] for h in bad)
    found = {g.entry.id for h in bad for g in h.reasons}
    cause = (truth.get("cause") or "").lower()
    wanted = [ids for words, ids in _CAUSE_WORDS if any(w in cause for w in words)]
    return bool(wanted) and any(found & ids for ids in wanted)


#: words in a thread's stated cause -> knowledge-base entries that state the same cause
_CAUSE_WORDS = [(("xid 79", "fell off the bus", "fallen off"), {"xid-79", "gpu-fallen-off-bus"}),
                (("gpu was lost", "gpu is lost", "lost on"), {"gpu-lost-nvml", "xid-79", "gpu-fallen-off-bus"}),
                (("driver",), {"cuda-driver-too-old"})]


def stems() -> list[str]:
    return sorted(p.stem for p in CORPUS.glob("*.log"))

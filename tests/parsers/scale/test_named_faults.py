"""What a file names in an exit, exception or error, said once (parsers.scale.named_faults): digest first reads those
processes raw and the focus reads their hosts, by the one rule, on real bundles and real launcher records."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

from hf_testpaths import FIXTURES
from parsers.gather.evidence import load, read_file
from parsers.gather.source import FileRef, Hints, open_source
from parsers.judges.exceptions import exception_rank, exceptions_by_rank, last_exceptions
from parsers.model.manifest import RankRecord
from parsers.scale import focus as digest_focus
from parsers.scale.digest import decode_parsed, encode_parsed, summaries_of
from parsers.scale.digest_first import load_digest_first
from parsers.scale.named_faults import MAX_SAME_PID, Claims, NamedProcess, named
from forensics.report.words import analyze
from replicate import culprit_key, fleet
from tests.parsers.scale.test_digest import KB, _verdict_key
from tests.parsers.scale.test_focus import _one_host_per_rank

LAUNCHER = FIXTURES / "gloo14/oom/postmortem/launcher.json"


def _read(path: Path, hints: Hints | None = None):
    return read_file(FileRef(path, path.name, hints or Hints()), KB.line_filter)


def test_a_launcher_record_names_each_rank_it_ended():
    art = _read(LAUNCHER)
    assert art.kind == "launcher"
    said = list(named(art))
    want = [(x["rank"], x["host"], x["pid"]) for x in json.loads(LAUNCHER.read_text())["ranks"]]
    assert [(n.rank, n.host, n.pid) for n in said] == want and {n.what for n in said} == {"exit"}


def test_a_file_without_a_fault_of_its_own_names_nobody(tmp_path):
    log = tmp_path / "rank0.log"
    log.write_text("epoch 1 loss 0.5\nepoch 2 loss 0.4\n")
    assert list(named(_read(log, Hints(host="h", pid=7, rank=0)))) == []


def test_a_faulty_file_names_its_own_process_a_childs_its_ranks(tmp_path):
    log = tmp_path / "worker.log"
    log.write_text("Traceback (most recent call last):\n  File \"train.py\", line 3, in <module>\n"
                   "    main()\nRuntimeError: CUDA out of memory\n")
    child = Hints(host="h", pid=9, parent_pid=7)
    said = list(named(_read(log, child)))
    assert said[0].what == "exception" and said[-1] == NamedProcess(None, "h", 7, "file")


def test_where_a_named_process_is():
    """By its rank (every claimant: a stray with a rank's environment too), by host and pid, by a pid alone only
    where nothing else is said (on at most MAX_SAME_PID hosts: pids repeat)."""
    recs = [RankRecord(host=f"h{i}", pid=100, dir="", rank=i) for i in range(12)]
    recs.append(RankRecord(host="h0", pid=555, dir="", rank=3))
    claims = Claims(recs)
    assert claims.processes(NamedProcess(3, None, None, "exception")) == [("h3", 100), ("h0", 555)]
    assert claims.processes(NamedProcess(3, "h3", 100, "exit")) == [("h3", 100), ("h0", 555)]
    assert claims.processes(NamedProcess(99, "h5", 100, "exit")) == [("h5", 100)]  # a rank no process claims: its host
    # no such process: the host still
    assert claims.processes(NamedProcess(None, "h7", 4242, "error")) == [("h7", None)]
    assert claims.processes(NamedProcess(None, None, 100, "error")) == [(f"h{i}", 100) for i in range(MAX_SAME_PID)]
    assert claims.processes(NamedProcess(None, "h1", None, "error")) == []


def test_digest_first_and_the_focus_read_what_a_job_level_launcher_record_names(tmp_path, monkeypatch):
    """A job's launcher record says a rank ended that nothing else makes odd or brings into the focus: digest first
    reads its files raw, the focus reads its host, and both give the full read's verdict."""
    monkeypatch.setattr(digest_focus, "MAX_FOCUS_SHARE", 1.0)  # the focus made over 4 hosts, as at 1,024
    dst = _one_host_per_rank(FIXTURES / "issue26/ahead/bundle.tar.gz", tmp_path / "split")
    man = json.loads((dst / "manifest.json").read_text())
    before = analyze(dst, KB, focus_from=0).verdict.sections["digests"]
    rec = next(r for r in man["ranks"]
               if r["rank"] not in before["raw_ranks"] and r["host"] not in before["focus"]["why"])
    ended = {"rank": rec["rank"], "pid": rec["pid"], "host": rec["host"], "returncode": None, "exited_at": None}
    (dst / "launcher.json").write_text(json.dumps({"ranks": [ended]}))
    man["artifacts"] = [{"kind": "launcher", "path": "launcher.json"}]
    (dst / "manifest.json").write_text(json.dumps(man))
    full = analyze(dst, KB, digests=False).verdict
    first = analyze(dst, KB, focus_from=None).verdict
    assert rec["rank"] in first.sections["digests"]["raw_ranks"]
    focused = analyze(dst, KB, focus_from=0).verdict
    why = focused.sections["digests"]["focus"]["why"]
    assert rec["host"] in why and "launcher.json" in why[rec["host"]]
    assert _verdict_key(first) == _verdict_key(focused) == _verdict_key(full)


def test_a_ranks_exit_flag_follows_its_rank_not_a_pid_another_host_reuses(tmp_path):
    """A launcher record for rank 1 whose pid another host's rank 3 also has (pids repeat from host to host): the
    judges read that exit as rank 1's, and so does the scale path's 'exited' flag (it was rank 3's, by pid alone)."""
    dst = _one_host_per_rank(FIXTURES / "issue26/ahead/bundle.tar.gz", tmp_path / "split")
    man = json.loads((dst / "manifest.json").read_text())
    one, three = (next(r for r in man["ranks"] if r["rank"] == k) for k in (1, 3))
    three["pid"] = one["pid"]  # the same pid on another host
    (dst / "launcher.json").write_text(json.dumps({"ranks": [{"rank": 1, "pid": one["pid"], "host": None,
                                                              "returncode": 1, "exited_at": 5.0}]}))
    man["artifacts"] = [{"kind": "launcher", "path": "launcher.json"}]
    (dst / "manifest.json").write_text(json.dumps(man))
    with open_source(dst) as src:
        ev = load(src, KB.line_filter)
    flagged = {s.rank: s for _, s in summaries_of(ev)}
    assert "exited" in flagged[1].flags and flagged[1].exits == ((1, 5.0),)
    assert "exited" not in flagged[3].flags and not flagged[3].exits


def test_an_exception_names_the_rank_the_exceptions_judge_names(tmp_path):
    """A job's console with a rank's traceback under its `[rank3]:` prefix names rank 3; a file of rank 5's own
    without a prefix names rank 5: the ranks `exception_rank` gives the exceptions judge, whichever file it is."""
    console = tmp_path / "console.log"
    console.write_text("[rank3]: Traceback (most recent call last):\n"
                       "[rank3]:   File \"train.py\", line 9, in <module>\n"
                       "[rank3]:     step()\n[rank3]: RuntimeError: CUDA error: an illegal memory access\n")
    job = _read(console, Hints(from_manifest=True))
    assert [n.rank for n in named(job) if n.what == "exception"] == [3] \
        == [exception_rank(x, job) for x in job.parsed.exceptions]
    own = tmp_path / "stderr.log"
    own.write_text(console.read_text().replace("[rank3]: ", ""))
    art = _read(own, Hints(host="h", pid=7, rank=5, from_manifest=True))
    said = list(named(art))  # the exception, the CUDA error it reports (an error of its own), the file's process
    assert [n.what for n in said] == ["exception", "error", "file"] and {n.rank for n in said} == {5}
    assert [exception_rank(x, art) for x in art.parsed.exceptions] == [5]


def _shared_console(tmp_path: Path) -> Path:
    """gloo14/oom/live (rank 3 raised torch.OutOfMemoryError, its `[rank3]:` traceback in its own stderr) with that
    traceback in rank 0's stderr too, as a stream every worker writes to holds it (a launcher's console, a shared
    pipe): rank 0's file holds another rank's exception."""
    dst = tmp_path / "shared"
    shutil.copytree(FIXTURES / "gloo14/oom/live", dst)
    zero, three = (next(dst.glob(f"hosts/vm/rank{k}-*/stderr.log")) for k in (0, 3))
    zero.write_text(zero.read_text() + three.read_text())
    return dst


def test_a_ranks_exception_in_another_ranks_file_is_its_own_on_both_paths(tmp_path):
    """The plain read files rank 3's traceback in rank 0's stderr under rank 3 (`exceptions_by_rank`); so do the hosts'
    digests of the capture replicated to 64 ranks, merged: rank 3 raised, rank 0 did not (the digest said rank 0 raised
    it, by the file that held it). Both paths name rank 3 raised. Rank 0's 'exception' flag stays: it says where the
    raw file to read is, not whose exception it is."""
    root, own = fleet(_shared_console(tmp_path), tmp_path, 64)
    with open_source(root) as src:
        plain = {rank: f"{x.type}: {x.message}" for rank, (x, _) in last_exceptions(load(src, KB.line_filter)).items()}
    assert list(plain) == [3] and plain[3].startswith("torch.OutOfMemoryError: CUDA out of memory.")
    with open_source(root) as src:
        merged = load_digest_first(src, KB).merged
    assert [(e.rank, e.text) for e in merged.exceptions] == [(3, plain[3])]
    assert [[0, 0], [3, 3]] == merged.flags["exception"]
    assert culprit_key(analyze(root, KB).verdict) == culprit_key(analyze(root, KB, digests=False).verdict) \
        == culprit_key(own) and culprit_key(own)[0][:3] == (3, "vm", "known-error")


def test_a_digests_copy_of_a_file_keeps_each_ranks_last_exception(tmp_path):
    """A console with the tracebacks of twelve ranks (rank 3's real one of gloo14/oom/live, under each rank's prefix):
    the digest's bounded copy of it (`reduce_parsed`, encoded and decoded) gives the exceptions judge every rank's
    exception, as the whole file does (it kept the last 8 of the file: ranks 0-3 were lost), and the earliest."""
    own = next((FIXTURES / "gloo14/oom/live").glob("hosts/vm/rank3-*/stderr.log")).read_text()
    log = tmp_path / "stderr.log"
    log.write_text("".join(own.replace("[rank3]:", f"[rank{k}]:") for k in range(12)))
    whole = _read(log, Hints(host="vm", pid=7, rank=0, from_manifest=True))
    assert len(whole.parsed.exceptions) == 12
    copy = dataclasses.replace(whole, parsed=decode_parsed(encode_parsed(whole.parsed, str(log), "stderr.log"),
                                                           str(log), "stderr.log", "vm"))
    by_rank = {rank: (x.type, x.message, x.line) for rank, (x, _) in exceptions_by_rank([whole]).items()}
    assert list(by_rank) == list(range(12))
    assert {rank: (x.type, x.message, x.line) for rank, (x, _) in exceptions_by_rank([copy]).items()} == by_rank
    assert copy.parsed.exceptions[0].line == whole.parsed.exceptions[0].line

"""Issue 28 on real excerpts: Horovod's stall inspector, MPI and launcher prefixes, newer NCCL shapes,
glued and wrapped records, honest coverage of text, lines every rank prints.

Every input is an excerpt of tests/fixtures/realworld (source URL in its .json), alone in a folder or
one of its lines; the corpus tests check the records and outcomes of all of them, these check the
mechanism each item of the issue is about.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from forensics.report.words import analyze
from parsers.gather.evidence import load as load_evidence
from parsers.judges.logs import horovod as horovod_judge
from parsers.model.events import CommMember, ErrorEvent
from parsers.model.findings import ReasonClass
from parsers.gather.source import open_source
from _load import load
from verdicts import CORPUS, KB
from facts import observed, says


def _lines(stem: str) -> list[str]:
    return (CORPUS / f"{stem}.log").read_text(encoding="utf-8").splitlines()


def _analyze(stem: str, only: list[int] | None = None):
    """The pipeline's verdict on an excerpt (or some of its lines, 1-based) alone in a folder."""
    with tempfile.TemporaryDirectory() as tmp:
        if only is None:
            shutil.copy(CORPUS / f"{stem}.log", tmp)
        else:
            lines = _lines(stem)
            (Path(tmp) / f"{stem}.log").write_text("\n".join(lines[i - 1] for i in only) + "\n", encoding="utf-8")
        return analyze(Path(tmp), KB)


def _events(stem: str, kind: str) -> list[ErrorEvent]:
    return [e for p in load(CORPUS / f"{stem}.log") for e in p.events if getattr(e, "kind", None) == kind]


# ------------------------------------------------------------------------------------------- 1. Horovod


def test_stall_records_of_horovod_0_16_name_the_missing_rank_through_reinserted_mpi_tags():
    """horovod#1012: seven `[missing ranks: 1]` records, two with `[1,0]<stderr>:` re-inserted inside them."""
    stalls = _events("horovod-1012", "horovod-stall")
    assert len(stalls) == 7 and {tuple(e.data.missing) for e in stalls} == {(1,)}
    assert {e.origin.rank for e in stalls} == {0} and all(e.op == "broadcast" for e in stalls)
    v = _analyze("horovod-1012").verdict
    assert v.culprit is not None and v.culprit.rank == 1 and v.culprit.reason_class == ReasonClass.MISSING_LINE
    assert v.culprit.source == "logs" and says([v.culprit.reason], "7 ops")  # every one of the 7 stalled ops


def test_stalled_ops_block_names_the_rank_every_op_misses():
    """horovod#534: `Stalled ops:` then eleven `<tensor> [missing ranks: 0]` lines."""
    v = _analyze("horovod-534").verdict
    assert v.culprit is not None and v.culprit.rank == 0


def test_stalled_ranks_listing_with_tokens_tagged_one_by_one():
    """horovod#1666: `Stalled ranks:` / `2: [...]`, the second report's header tagged before every token."""
    assert len(_events("horovod-1666", "horovod-stall-warning")) == 2  # both headers read, the tagged one too
    listed = _events("horovod-1666", "horovod-stall")
    assert {tuple(e.data.missing) for e in listed} == {(2,)} and {e.origin.rank for e in listed} == {0}
    assert _analyze("horovod-1666").verdict.culprit.rank == 2


def test_horovodrun_label_is_the_printer_and_the_listing_ranks_are_not_line_ranks():
    """horovod#3950: `[0] Missing ranks:` / `[0] 0: [...]` / `[0] 1: [...]` - every line is rank 0's; ranks 0
    and 1 both miss the broadcasts, so no one rank is named."""
    parsed = load(CORPUS / "horovod-3950.log")
    assert parsed[0].facts.get("rank") == 0 and "ranks" not in parsed[0].facts
    assert sorted(e.data.missing[0] for e in _events("horovod-3950", "horovod-stall")) == [0, 1]
    v = _analyze("horovod-3950").verdict
    assert v.culprit is None and says(observed(v, "horovod"), "ranks 0-1", "6 ops")


def test_several_ranks_missing_from_every_op_name_none():
    """horovod#457: the reports miss 0,1,3,4 then 0,1,4: three ranks miss every one."""
    v = _analyze("horovod-457").verdict
    assert v.culprit is None and says(observed(v, "horovod"), "ranks 0-1,4")


def test_ready_lists_name_a_rank_only_against_a_stated_job_size():
    """horovod#530: ready 5,6,3,1,4,0 in the reporter's 7-worker job. The lines do not state the size: rank 2 is
    said, not named; with the size the thread states, the judge's sets name rank 2 alone."""
    v = _analyze("horovod-530").verdict
    assert v.culprit is None and says(observed(v, "horovod"), "rank 2", "ready list")
    with tempfile.TemporaryDirectory() as tmp:
        shutil.copy(CORPUS / "horovod-530.log", tmp)
        with open_source(Path(tmp)) as src:
            ev = load_evidence(src)
    missing, _ = horovod_judge.missing_sets(ev, world=7)
    assert missing and set.intersection(*missing.values()) == {2}
    missing8, _ = horovod_judge.missing_sets(ev, world=8)  # an eighth rank would be missing too: no one rank
    assert set.intersection(*missing8.values()) == {2, 7}


def test_a_ready_list_wrapped_inside_its_rank_list_is_rejoined():
    """horovod PR #334: `[ready ranks: 5, 1, 4` / `, 7, 2, 3]` across the post's line break."""
    ready = [e.data.ready for e in _events("horovod-334", "horovod-stall")]
    assert len(ready) == 16 and [5, 1, 4, 7, 2, 3] in ready


def test_timeline_file_that_is_a_directory_is_said_as_the_setting():
    """horovod#244: HOROVOD_TIMELINE set to a directory."""
    v = _analyze("horovod-244").verdict
    assert v.culprit is None and says(observed(v, "horovod"), "HOROVOD_TIMELINE",
                                      "/home/amalik/horovod/benchmarks/TRACES/")


def test_horovod_debug_log_lines_are_read_as_rank_1s():
    """horovod#3412: `[1,1]<stdout>:[<time>: D .../env_parser.cc:107] Using MPI ...`."""
    logs = _events("horovod-3412", "horovod-log")
    assert len(logs) == 3 and {e.origin.rank for e in logs} == {1} and logs[0].data.level == "D"


def test_stall_reader_stays_linear_on_hostile_lines():
    """A real entry's shape, made hostile: a 200k-character tensor-like run before the bracket, an unclosed rank
    list of 60k ranks, 20k entries on one line. Bounded work, well under the generous limit."""
    import time
    from parsers.model.events import Origin
    from parsers.readers.horovod import StallBlock
    entry = _lines("horovod-534")[2]  # 'HorovodBroadcast_fully_connected_weights_0 [missing ranks: 0]'
    head, bracket = entry.split(" [", 1)
    hostile = [head * 5000 + " [" + bracket, head + " [ready ranks: " + "1, " * 60_000, (entry + " ") * 20_000]
    start = time.monotonic()
    for line in hostile:
        block = StallBlock()
        block.feed(line, Origin())
        block.feed(entry, Origin())
    assert time.monotonic() - start < 10


# ------------------------------------------------------------------------------------------- 2. prefixes


def test_open_mpi_timestamp_output_keeps_the_rank():
    """horovod#530: `Fri Sep 28 11:14:00 2018[1,5]<stderr>:INFO:tensorflow:...`."""
    assert load(CORPUS / "horovod-530.log")[0].facts["ranks"] == [3, 5]


def test_a_platform_replica_prefix_before_mpi_tags():
    """polyaxon#657: `2020-01-15 22:44:33 UTC master.0 -- [1,0]<stderr>:0: [HorovodAllreduce][1,0]<stderr>:`."""
    parsed = load(CORPUS / "polyaxon-657.log")[0]
    assert parsed.unknown_lines == 0 and parsed.facts.get("rank") == 0


def test_pdsh_label_strips_before_nccl_records():
    """NVIDIA/nccl#394: `node01: VM-0-14-centos:106:196 [0] ...` and bare `node01:` lines."""
    parsed = load(CORPUS / "nccl-394.log")[0]
    assert parsed.unknown_lines == 0


def test_ray_worker_prefix_keeps_pid_and_rank():
    """vllm#2682: `(RayWorkerVllm pid=5304) [E ProcessGroupNCCL.cpp:916] [Rank 7] NCCL watchdog thread ...`."""
    [e] = [e for e in _events("vllm-2682", "c10d-error") if "watchdog thread terminated" in e.message]
    assert (e.origin.pid, e.origin.rank) == (5304, 7)


def test_mpirun_banners_name_the_first_process_to_exit_and_the_lost_peer():
    """nccl-tests#322: 'The first process to do so was: / Process name: [[44912,1],251] / Exit code: 3';
    nccl-tests#338: 'An MPI communication peer process has unexpectedly disconnected ... Local host: gpu /
    Local PID: 4870 / Peer host: gpu' (its 74-column rules glued to the banners by the wrap repair)."""
    [first] = [e for e in _events("nccl-tests-322", "launcher-exit") if e.data.launcher == "mpirun"]
    assert (first.origin.rank, first.data.exitcode) == (251, 3)
    [lost] = _events("nccl-tests-338", "connection-closed")
    assert (lost.origin.host, lost.origin.pid, lost.peer_addr) == ("gpu", 4870, "gpu")
    assert load(CORPUS / "nccl-tests-338.log")[0].unknown_lines == 1  # only nccl-tests' '# Using devices'


def test_vllm_rank_statement_gives_the_rank_and_the_job_size():
    """vllm#21661: a flattened paste whose records say `world_size=2 rank=0 ...` and `world_size=2 rank=1 ...`."""
    parsed = load(CORPUS / "vllm-21661.log")[0]
    said = sorted(e.data.rank for e in parsed.events if getattr(e, "kind", "") == "rank-identity")
    assert said == [0, 1] and parsed.facts["world_size"] == 2 and parsed.facts["ranks"] == [0, 1]
    assert "no line from" not in _analyze("vllm-21661").verdict.summary


# ------------------------------------------------------------------------------------------- 3. newer NCCL


def test_nccl_records_with_a_partial_host_pid_tid():
    """nccl#1808 (empty host, behind `<time> worker-9 >> `), #1920 (host, no pid:tid), #2013 (redacted pid)."""
    [w1808] = [e for e in load(CORPUS / "nccl-1808.log")[0].events if getattr(e, "kind", "") == "nccl-warn"]
    assert (w1808.origin.pid, w1808.origin.device, w1808.origin.host) == (166, 0, "worker-9")
    [w1920] = [e for e in load(CORPUS / "nccl-1920.log")[0].events if getattr(e, "kind", "") == "nccl-warn"]
    assert (w1920.origin.host, w1920.origin.device, w1920.origin.pid) == ("gpu-server320", 5, None)
    assert load(CORPUS / "nccl-1920.log")[0].unknown_lines == 0
    [w2013] = [e for p in load(CORPUS / "nccl-2013.log") for e in p.events]
    assert (w2013.origin.host, w2013.origin.device) == ("host-01", 5) and "ibv_modify_qp" in w2013.message


def test_nccl_tests_failure_and_its_trail_are_the_tests_own():
    """nccl-tests#322 and #338: `<host>: Test NCCL/CUDA failure ...` then ` .. <host> pid <p>: Test failure ...`."""
    trail = _events("nccl-tests-322", "test-failure")
    assert ("HCA-14", 1015577) in {(e.origin.host, e.origin.pid) for e in trail}
    [cuda] = _events("nccl-tests-338", "cuda-error")
    # verbatim input: the reader keeps the test's own message
    assert cuda.origin.host == "gpu" and "system not yet initialized" in cuda.message

    assert says(observed(_analyze("nccl-tests-338").verdict, "first-error"), "cuda-error", "gpu")


def test_last_error_socket_detail_is_the_peer_that_reset():
    """nccl#2076: `Last error:` /
    `socketProgressOpt: Call to recv from 172....<33759> failed : Connection reset by peer`."""
    [reset] = _events("nccl-2076", "connection-reset")
    assert reset.peer_addr == "172....<33759>"


# ------------------------------------------------------------------------------------------- 4. glued, wrapped


def test_glued_ray_records_are_split():
    """vllm#2682 line 2: `...might be incorrect.(RayWorkerVllm pid=5304) For debugging consider ...`."""
    parsed = load(CORPUS / "vllm-2682.log")[0]
    assert parsed.facts.get("split_records", 0) >= 1


def test_hand_wrapped_watchdog_records_are_joined():
    """milabench#269: `[Rank 14] Watchdog caught collective operation timeout: ` / `WorkNCCL(SeqNum=2070, ...)`
    and `... Exception (either an error or timeout) detected` / `by watchdog at work: 2070, ...`."""
    parsed = load(CORPUS / "milabench-269-wrapped.log")[0]
    timeouts = {(e.origin.rank, e.op, e.seq) for e in parsed.events if getattr(e, "kind", "") == "watchdog-timeout"}
    assert timeouts == {(r, "reduce", 2070) for r in (11, 12, 14, 15)}
    assert [(e.origin.rank, e.seq) for e in parsed.events if getattr(e, "kind",
                                                                     "") == "failure-detected"] == [(12, 2070)]
    assert parsed.unknown_lines == 0


# ------------------------------------------------------------------------------------------- 5. honest coverage


def test_unread_lines_are_counted_shown_and_never_called_no_error():
    """nccl#1812: nccl-tests' header and a shell prompt no reader knows: the verdict says so, with the first."""
    v = _analyze("nccl-1812").verdict
    # the summary is two sentences at most (issue 27): the count and first lines are a line of their own under it
    assert "no error" not in v.text and says(observed(v, "unread"), "line 1")
    sec = v.sections["unread_lines"]
    assert sec["count"] >= 1 and sec["first"][0]["line"] == 1 and sec["first"][0]["text"].startswith("Singularity>")


def test_no_line_from_rank_is_not_said_of_processes_whose_lines_are_here():
    """DeepSpeed#2931: NCCL init lines of communicator ranks 0, 3 and 6 of 16 and no global rank printed."""
    v = _analyze("deepspeed-2931").verdict
    coverage = observed(v, "coverage")
    assert len(coverage) == 1 and says(coverage, "16-rank", "0,3,6") and not says(coverage, "no line from"), coverage


# ------------------------------------------------------------------------------------------- 6. lines every rank prints


def test_a_heartbeat_watchdog_stuck_line_alone_names_no_rank_and_no_host():
    """DEIM#105 line 3: `[F ProcessGroupNCCL.cpp:1169] [PG 0 Rank 1] ... watchdog got stuck for 600 seconds`,
    the line every rank's heartbeat monitor prints: no culprit, its host not suspect."""
    result = _analyze("deim-105", only=[3])
    assert result.verdict.culprit is None
    assert not [h for h in result.hosts if h.status in ("suspect", "exclude")]


def test_watchdogs_stuck_by_a_code_bug_put_no_host_under_suspicion():
    """NVIDIA/Fuser#3055: stuck watchdogs in three subgroups during a teardown bug: no host is suspect."""
    result = _analyze("fuser-3055")
    assert result.verdict.culprit is None
    assert not [h for h in result.hosts if h.status in ("suspect", "exclude")]


def test_the_stall_inspectors_printer_is_no_lead():
    """horovod#3950: rank 0 prints every stall report; it is not 'the rank that logged the first error'."""
    v = _analyze("horovod-3950").verdict
    assert not [s for s in v.suspects if s.rank == 0 and s.reason_class == ReasonClass.ERROR_FIRST]


def test_nccl_init_members_without_global_ranks_are_kept_as_communicator_ranks():
    """nccl#733: `comm .. rank 3 nranks 8 cudaDev 1 ... Init COMPLETE` behind a k9s border."""
    members = [e for p in load(CORPUS / "nccl-733.log") for e in p.events if type(e) is CommMember]
    assert sorted((m.comm_rank, m.nranks) for m in members) == [(2, 8), (3, 8)]


# ------------------------------------------------------------------------------------------- round 3, second part


def test_nccl_call_trace_gives_the_comm_member_and_each_call():
    """phu0ngng/nccl test/replay/README.md: a real CALL trace (NCCL 2.16.3a0, all_reduce_perf): the CommInitRank
    line is rank 0 of a 16-rank comm on device 0; each ncclAllReduce is an op at its call position on that comm;
    GetUniqueId/GroupStart/GroupEnd are understood, nothing is left unread."""
    from parsers.readers.nccl_log import CALL_COMM
    from parsers.model.events import OpEvent
    parsed = load(CORPUS / "nccl-replay-call.log")
    assert sum(p.unknown_lines for p in parsed) == 0
    events = [e for p in parsed for e in p.events]
    [member] = [e for e in events if type(e) is CommMember]
    assert (member.comm, member.comm_rank, member.nranks, member.origin.device, member.comm_ptr) == \
        ("0x521631e3a56ecc2c", 0, 16, 0, "0x55d8c12613d0")
    calls = [e for e in events if type(e) is OpEvent]
    assert [(c.op, c.seq, c.count, c.dtype, c.seq_kind, c.comm_rank) for c in calls] == \
        [("allreduce", 0, 10485760, "int8", "call", 0), ("allreduce", 1, 10485760, "int8", "call", 0)]
    assert all(c.comm == CALL_COMM + "0x521631e3a56ecc2c" for c in calls)  # never mixed with opCount positions
    assert parsed[0].facts["traced_calls"] == 6 and parsed[0].facts["rank"] == 0
    v = _analyze("nccl-replay-call").verdict
    assert says(observed(v, "coverage"), "15 of 16", "rank 1")  # the ranks with no line: 15 of the comm's 16


def test_nccl_call_trace_behind_a_timestamp_and_an_mpi_tag():
    """The same real trace lines, as NCCL_DEBUG_TIMESTAMP_LEVELS=TRACE puts a stamp first and mpirun
    --tag-output tags them (both documented prefixes): the rank is the tag's, the call still read."""
    from parsers.readers import nccl_log
    lines = _lines("nccl-replay-call")
    stamped = ["[1,3]<stdout>:[2026-01-14 10:00:00] " + lines[3], "[1,3]<stdout>:[2026-01-14 10:00:01] " + lines[5]]
    parsed = nccl_log.parse_lines(stamped)
    assert parsed.unknown_lines == 0
    member, call = parsed.events
    assert (member.comm_rank, member.origin.rank, call.op, call.origin.rank, call.seq) == (0, 3, "allreduce", 3, 0)
    assert call.time_ns is not None


def test_flattened_and_translated_torchelastic_summary_is_read():
    """ByteDance-Seed/Bagel#245: the Failures section flattened and wholly translated (排名：6（本地排名：6）
    退出代码：1（进程 ID：484734）), the Root Cause section flattened with each English field followed by its
    translation: ranks 6 and 7 failed, rank 4 first, all on iZ1pp06g2kc1mopej6fuxhZ. The first observed exit is
    said, never named as a culprit."""
    got = {(e.kind, e.origin.rank, e.data.get("local_rank"), e.origin.host, e.data.get("exitcode"), e.origin.pid)
           for p in load(CORPUS / "bagel-245.log") for e in p.events}
    host = "iZ1pp06g2kc1mopej6fuxhZ"
    assert got == {("child-failure", 6, 6, host, 1, 484734), ("child-failure", 7, 7, host, 1, 484735),
                   ("root-cause", 4, 4, host, 1, 484732)}
    v = _analyze("bagel-245").verdict
    assert v.culprit is None and "ranks 4,6-7" in v.summary


def test_flattened_english_summary_one_line():
    """The Root Cause line of Bagel#245 with its translations cut out (the English torchelastic wrote, as one
    physical line): the same entry; a normal multi-line block is unchanged (llamafactory#7032)."""
    from parsers.readers.launcher import ElasticBlock
    from parsers.model.events import Origin
    import re
    quoted = _lines("bagel-245")[1].replace("进程 ID", "进程ID")  # each translation runs from its first CJK character
    english = re.sub(r" {2,}", " ", re.sub(r"[\u4e00-\u9fff][^ ]*", "", quoted))
    # verbatim input: the test checks its own input (torchelastic's English line, rebuilt), not our output
    assert english.startswith("Root Cause (first observed failure): [0]: time : 2025-08-25_16:48:32 host : iZ1pp")
    # verbatim input: as above, the line torchelastic writes
    assert "：" not in english and "rank : 4 (local_rank: 4) exitcode : 1 (pid: 484732) error_file: <N/A>" in english

    block = ElasticBlock()
    taken, done = block.feed(english, Origin())
    done += block.finish()
    assert taken and [(e.kind, e.origin.rank, e.data.exitcode, e.origin.pid) for e in done] == \
        [("root-cause", 4, 1, 484732)]
    [rc] = _events("llamafactory-7032", "root-cause")
    assert (rc.origin.rank, rc.origin.pid, rc.origin.host) == (0, 14661, "iZl4v544jr5cejwaqci3xvZ")


def test_flattened_summary_reader_stays_linear():
    """A hostile flattened line: 30k field labels on one line, and a 200k-character run of one label."""
    import time
    from parsers.readers.launcher import ElasticBlock
    from parsers.model.events import Origin
    start = time.monotonic()
    for line in ("Failures: " + "[1]: rank : 1 (local_rank: 1) " * 30_000, "Failures: " + "排名：" * 200_000):
        block = ElasticBlock()
        block.feed(line, Origin())
        block.finish()
    assert time.monotonic() - start < 10


def test_nccl_2_29_lines_are_read():
    """pytorch#172398 (NCCL 2.29.2, 2026-01): DistBackendError 'invalid usage' with its version; DeepEP#521: NCCL
    2.29's device-communicator WARN, its prefix cut by the poster."""
    [err] = [e for p in load(CORPUS / "pytorch-172398.log") for e in p.events if e.kind == "nccl-error"]
    assert err.data.get("nccl_version") == "2.29.2"
    [warn] = _events("deepep-521", "nccl-warn")
    assert "NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER" in warn.message


def test_one_chunk_a_line_behind_its_mpi_tag_is_rejoined():
    """No real excerpt with one token a physical line was found (issue 28 item 2); the closest real one is
    horovod#1666 line 4, where the tag is re-inserted before every chunk on one line. Put each tagged chunk on
    its own line (what a platform that ends each chunk with a newline does): the same records are read."""
    import re
    lines = _lines("horovod-1666")
    chunks = [c for c in re.split(r"(?=\[1,0\]<stderr>:)", lines[3]) if c]
    assert len(chunks) == 12 and chunks[1] == "[1,0]<stderr>:2020-01-14 13:49:07"
    split = lines[:3] + chunks + lines[4:]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "horovod-1666-chunked.log"
        path.write_text("\n".join(split) + "\n", encoding="utf-8")
        parsed = load(path)
        rejoined = sum(p.facts.get("rejoined_chunks", 0) for p in parsed)
        kinds = sorted(e.kind for p in parsed for e in p.events if isinstance(e, ErrorEvent))
        unknown = sum(p.unknown_lines for p in parsed)
    original = sorted(e.kind for p in load(CORPUS / "horovod-1666.log") for e in p.events if isinstance(e, ErrorEvent))
    assert rejoined == 11 and kinds == original and unknown == 0
    warnings = [e for p in parsed for e in p.events if getattr(e, "kind", "") == "horovod-stall-warning"]
    assert len(warnings) == 2


def test_short_lines_of_one_tag_are_not_chunks():
    """horovod#1666's own lines (a header, `Stalled ranks:`, a listing) stay apart, as do two short tagged lines
    that hold words (a program's own short lines)."""
    from parsers.readers.rank_log import _Layout
    lines = _lines("horovod-1666")
    layout = _Layout(lines)
    assert layout.chunk(lines[0], lines[0], lines[1], 0) is None  # the header's long text ends its record
    assert layout.chunk(lines[1], lines[1], lines[2], 0) is None  # 'Stalled ranks:' then '2: [...]'
    assert layout.chunk("[1,0]<stdout>:epoch 1", "[1,0]<stdout>:epoch 1", "[1,0]<stdout>:epoch 2", 0) is None
    assert layout.chunk("[1,0]<stderr>:[", "[1,0]<stderr>:[", "[1,1]<stderr>:2020", 0) is None  # another rank's


def test_glog_records_glued_on_one_line_are_split():
    """huggingface/open-r1#152 (2025-02): torchelastic's `W0201 ... api.py:897] Sending process P closing signal
    SIGTERM` records and its `E0201 ... failed (exitcode: 1) local_rank: 1 (pid: 291192)` on one physical line:
    each record read, the failed worker's exit among them."""
    parsed = load(CORPUS / "open-r1-152.log")[0]
    assert parsed.facts.get("split_records", 0) >= 3
    assert sorted(e.origin.pid for e in _events("open-r1-152", "launcher-signal")) == [291191, 291193, 291194]
    [exit_] = _events("open-r1-152", "launcher-exit")
    assert (exit_.data.get("local_rank"), exit_.origin.pid, exit_.data.get("exitcode")) == (1, 291192, 1)
    assert _analyze("open-r1-152").verdict.culprit is None


def test_torchelastic_report_title_and_rules_are_the_reports():
    """vllm-project/speculators#1115 (2026-09): the report's `====` rules and `<script> FAILED` title under the
    ChildFailedError line are read as the report's (none left unread); its entries keep their order of exit:
    ranks 1 and 3 at 13:02:58, rank 0 (SIGKILL) and rank 2 (SIGTERM) 31 s later."""
    parsed = load(CORPUS / "speculators-1115.log")
    assert sum(p.unknown_lines for p in parsed) == 0
    failed = sorted((e.origin.rank, e.data.get("exitcode")) for e in _events("speculators-1115", "child-failure"))
    assert failed == [(0, -9), (2, -15), (3, 1)]
    assert [e.origin.rank for e in _events("speculators-1115", "root-cause")] == [1]
    v = _analyze("speculators-1115").verdict
    assert v.culprit is None and "from ranks 1,3" in v.summary

"""Python faulthandler dumps (parsers.readers.faulthandler), on real output.

The captures are made here: a real Python process with a worker thread, its main thread
stopped in a known function, killed with SIGABRT while PYTHONFAULTHANDLER is on, as the
watchdog's abort kills a rank. The real-world form is sglang-20855 in the corpus.
"""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from forensics.report.words import analyze
from parsers.gather.evidence import load_files
from parsers.readers import faulthandler, rank_log
from facts import says

_CHILD = textwrap.dedent("""
    import sys, threading, time

    def helper_waits(ev):
        ev.wait()

    def stuck_here():
        print("ready", flush=True)
        time.sleep(60)

    ev = threading.Event()
    threading.Thread(target=helper_waits, args=(ev,), name="helper", daemon=True).start()
    stuck_here()
""")


def _no_core() -> None:
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def _aborted_dump(tmp_path: Path, prefix_env: dict | None = None) -> str:
    """stderr of a real process aborted in stuck_here(): the interpreter's own dump."""
    script = tmp_path / "child.py"
    script.write_text(_CHILD)
    env = dict(os.environ, PYTHONFAULTHANDLER="1", **(prefix_env or {}))
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env, preexec_fn=_no_core)
    try:
        assert proc.stdout.readline().strip() == "ready"
        proc.send_signal(signal.SIGABRT)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == -signal.SIGABRT
    return err


def test_a_real_abort_dump_gives_every_thread_and_the_main_one(tmp_path):
    err = _aborted_dump(tmp_path)
    # verbatim input: the real dump this test produced
    assert err.startswith("Fatal Python error: Aborted")
    out = rank_log.parse_lines(err.splitlines(keepends=True), "stderr.log")
    assert [e.kind for e in out.events] == [faulthandler.KIND]
    assert out.events[0].data.error == "Aborted"
    assert len(out.stacks) == 2 and out.unknown_lines == 0
    main = [t for t in out.stacks if t.is_main]
    assert len(main) == 1 and main[0].frames[0].function == "stuck_here"
    assert main[0].frames[-1].function == "<module>" and main[0].frames[0].line is not None
    helper = next(t for t in out.stacks if not t.is_main)
    helper_functions = [f.function for f in helper.frames]
    assert helper_functions[-1] == "_bootstrap" and "helper_waits" in helper_functions
    assert all(t.origin.rank is None for t in out.stacks)  # no line names a rank


def test_a_dump_file_is_one_process_and_its_main_thread_is_judged(tmp_path):
    """A file that is a dump alone (a rank's own faulthandler file) is a stack of a process: with a pid in
    its name it joins that process, and the summary says where its main thread was."""
    err = _aborted_dump(tmp_path)
    folder = tmp_path / "loose"
    folder.mkdir()
    (folder / "faulthandler-rank3-pid4242.txt").write_text(err)
    loaded = load_files([(folder / "faulthandler-rank3-pid4242.txt", {"rank": 3, "pid": 4242})])
    art = loaded.artifacts[0]
    assert art.kind == "faulthandler-text" and art.pid == 4242
    result = analyze(folder)
    rank = next(r for r in result.evidence.ranks if r.record.pid == 4242)
    assert rank.rank == 3 and rank.main_stack is not None and rank.main_stack.frames[0].function == "stuck_here"


def test_prefixed_dump_lines_give_the_rank_and_a_dump_in_a_shared_log_gives_none(tmp_path):
    err = _aborted_dump(tmp_path)
    prefixed = [f"[rank5]:{line}" for line in err.splitlines(keepends=True)]
    out = rank_log.parse_lines(prefixed, "rank5.log")
    assert {t.origin.rank for t in out.stacks} == {5}
    # the same dump after another rank's line: unprefixed, so no rank of its own in the reader
    other = "[rank2]:[E1201 10:00:00.000000000 ProcessGroupNCCL.cpp:632] [Rank 2] something\n"
    mixed = [other] + err.splitlines(keepends=True)
    out = rank_log.parse_lines(mixed, "shared.log")
    assert {t.origin.rank for t in out.stacks} == {None}


def test_summary_names_the_dumps_main_thread_in_a_log(tmp_path):
    err = _aborted_dump(tmp_path)
    folder = tmp_path / "job"
    folder.mkdir()
    lines = ["[rank1]:[E1201 10:00:00.000000000 ProcessGroupNCCL.cpp:632] [Rank 1] Watchdog caught collective operation"
             " timeout: WorkNCCL(SeqNum=7, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600001"
             " milliseconds before timing out.\n"] + err.splitlines(keepends=True)
    (folder / "out.log").write_text("".join(lines))
    summary = analyze(folder).verdict.text
    assert "faulthandler dump (rank 1, out.log:" in summary and "stuck_here" in summary


def test_forensics_arm_header_gives_rank_pid_and_host():
    header = faulthandler.TRIGGER_HEADER.format(kind="stall", rank=7, pid=123, host="node-3",
                                                message="no step for 12 s")
    assert faulthandler.trigger_identity(header) == {"rank": 7, "pid": 123, "host": "node-3", "alarm": "stall"}
    assert faulthandler.trigger_identity("# stall: no step") is None


@pytest.mark.parametrize("line", [
    '  File "/x.py", line 3, in f',  # a traceback's frame, not faulthandler's
    "Thread 1 (active): \"MainThread\"",  # py-spy's header
    "Fatal Python error:",  # nothing after it
])
def test_lines_of_other_formats_open_no_dump(line):
    out = rank_log.parse_lines([line + "\n"], "x.log")
    assert out.stacks == [] and not any(e.kind == faulthandler.KIND for e in out.events)


def test_hostile_dump_is_bounded():
    lines = ["Fatal Python error: Segmentation fault\n", "\n"]
    for t in range(faulthandler.MAX_THREADS + 5):
        lines.append(f"Thread 0x{t:016x} (most recent call first):\n")
    lines += [f'  File "/a.py", line {i} in f\n' for i in range(faulthandler.MAX_FRAMES + 50)]
    out = rank_log.parse_lines(lines, "x.log")
    assert max(len(t.frames) for t in out.stacks) == faulthandler.MAX_FRAMES
    assert len(out.stacks) == faulthandler.MAX_THREADS + 5  # a new dump opens past the cap; no dump holds more
    assert out.problems and "50 frames" in out.problems[0]


def test_frames_kept_from_one_file_are_bounded():
    per = faulthandler.MAX_FRAMES
    dumps = faulthandler.MAX_KEPT_FRAMES // per + 2
    lines = []
    for t in range(dumps):
        lines.append(f"Thread 0x{t:016x} (most recent call first):\n")
        lines += [f'  File "/a.py", line {i} in f\n' for i in range(per)]
    out = rank_log.parse_lines(lines, "x.log")
    assert sum(len(t.frames) for t in out.stacks) == faulthandler.MAX_KEPT_FRAMES
    assert out.unknown_lines == 0 and "frames beyond" in out.problems[0]


def test_a_log_that_holds_a_dump_among_other_lines_stays_a_rank_log(tmp_path):
    """Only a file of nothing but a dump is one process's stacks file; a stderr that goes on after
    the dump keeps every reader of a rank log (its c10d lines, the knowledge base), dump included."""
    err = _aborted_dump(tmp_path)
    path = tmp_path / "stderr.log"
    path.write_text(err + "[rank0]:[E1201 10:00:00.000000000 ProcessGroupNCCL.cpp:632] [Rank 0] Watchdog "
                          "caught collective"
                    " operation timeout: WorkNCCL(SeqNum=3, OpType=BROADCAST, NumelIn=1, NumelOut=1, Timeout(ms)=1000)"
                    " ran for 1001 milliseconds before timing out.\n")
    art = load_files([(path, {})]).artifacts[0]
    assert art.kind == "rank-log"
    assert any(t.is_main for t in art.parsed.stacks) and any(e.kind == "watchdog-timeout" for e in art.parsed.events)
    alone = tmp_path / "dump.txt"
    alone.write_text(err)
    assert load_files([(alone, {})]).artifacts[0].kind == "faulthandler-text"


SGLANG_30453 = Path(__file__).resolve().parents[2] / "fixtures" / "realworld" / "sglang-30453.log"


def test_a_frame_line_that_a_paste_glued_onto_the_next_is_two_frames():
    """sglang #30453 (real): `... line 63 in finalize  File ".../route.py", line 219 in finalize` is one
    physical line holding two frames; reading it as no frame ended the dump and lost the main thread."""
    lines = SGLANG_30453.read_text(encoding="utf-8").splitlines(keepends=True)
    start = next(i for i, ln in enumerate(lines) if ln.startswith("Fatal Python error: Aborted"))
    end = next(i for i, ln in enumerate(lines) if ln.startswith('  File "<string>", line 1 in <module>'))
    out = rank_log.parse_lines(lines[start:end + 1], "sglang-30453.log")
    main = [t for t in out.stacks if t.is_main]
    assert len(out.stacks) == 12 and len(main) == 1
    names = [f.function for f in main[0].frames]
    assert len(names) == 16 and names[6:9] == ["finalize", "finalize", "wrapper"] and names[-1] == "<module>"
    assert main[0].frames[7].file.endswith("repository_manager/route.py") and main[0].frames[7].line == 219
    assert out.unknown_lines == 0


def test_a_line_of_too_many_glued_frames_is_no_frame_line():
    one = 'File "/a.py", line 1 in f'
    assert len(faulthandler.frames_of("  " + "  ".join([one] * 3))) == 3
    assert faulthandler.frames_of("  " + "  ".join([one] * (faulthandler.MAX_GLUED + 1))) == []
    assert faulthandler.frames_of('  File "/a.py", line 1 in f and then some words') == []


#: CPython 3.14's documented output of `python -X faulthandler` and `ctypes.string_at(0)`, as printed in
#: https://docs.python.org/3.14/library/faulthandler.html (the C stack section is new in 3.14)
_PY314 = """Fatal Python error: Segmentation fault

Current thread 0x00007fb899f39700 (most recent call first):
  File "/opt/python/Lib/ctypes/__init__.py", line 486 in string_at
  File "<stdin>", line 1 in <module>

Current thread's C stack trace (most recent call first):
  Binary file "/opt/python/python", at _Py_DumpStack+0x42 [0x5b27f7d7147e]
  Binary file "/opt/python/python", at +0x32dcbd [0x5b27f7d85cbd]
  Binary file "/opt/python/python", at +0x32df8a [0x5b27f7d85f8a]
  Binary file "/usr/lib/libc.so.6", at +0x3def0 [0x77b73226bef0]
"""


def test_python_314_c_stack_section_is_part_of_the_dump(tmp_path):
    out = rank_log.parse_lines(_PY314.splitlines(keepends=True) + ["[rank3]: after the dump\n"], "x.log")
    assert out.unknown_lines == 1  # only the line after the dump
    assert [(t.is_main, [f.function for f in t.frames]) for t in out.stacks] == [(True, ["string_at", "<module>"])]
    assert out.events[0].data.error == "Segmentation fault"
    path = tmp_path / "dump.txt"
    path.write_text(_PY314)
    assert load_files([(path, {})]).artifacts[0].kind == "faulthandler-text"


_SEGV_IN_A_THREAD = textwrap.dedent("""
    import ctypes, threading, time

    def crashes_here():
        time.sleep(0.2)
        ctypes.string_at(0)  # a read of address 0: SIGSEGV in this thread

    def main_waits():
        threading.Thread(target=crashes_here, name="loader").start()
        time.sleep(60)

    main_waits()
""")


def test_the_thread_a_segfault_hit_is_marked_and_said(tmp_path):
    """faulthandler writes 'Current thread' for the thread the signal landed in: for a segfault, where it
    happened. A real process whose helper thread reads address 0; the corpus form is sglang-2803."""
    script = tmp_path / "segv.py"
    script.write_text(_SEGV_IN_A_THREAD)
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60,
                          env=dict(os.environ, PYTHONFAULTHANDLER="1"), preexec_fn=_no_core)
    assert proc.returncode == -signal.SIGSEGV, proc.stderr
    out = rank_log.parse_lines(proc.stderr.splitlines(keepends=True), "stderr.log")
    hit = [t for t in out.stacks if t.signalled]
    assert len(hit) == 1 and [f.function for f in hit[0].frames][:2] == ["string_at", "crashes_here"]
    assert not hit[0].is_main
    assert [t.frames[0].function for t in out.stacks if t.is_main] == ["main_waits"]
    folder = tmp_path / "job"
    folder.mkdir()
    (folder / "stderr.log").write_text(proc.stderr)
    summary = analyze(folder).verdict.text
    lines = summary.splitlines()
    assert says(lines, "'Current thread'", "outside any collective", "crashes_here"), summary
    assert says(lines, "main thread", "outside any collective", "main_waits"), summary


def test_the_signalled_thread_of_a_real_world_segfault_is_in_the_summary(tmp_path):
    """sglang-2803 (tests/fixtures/realworld): the dump is cut above the main thread; its 'Current thread'
    was in all_reduce."""
    src = Path(__file__).resolve().parents[2] / "fixtures" / "realworld" / "sglang-2803.log"
    (tmp_path / "sglang-2803.log").write_bytes(src.read_bytes())
    summary = analyze(tmp_path).verdict.text
    assert says(summary.splitlines(), "'Current thread'", "all_reduce"), summary

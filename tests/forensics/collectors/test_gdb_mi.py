"""gdb's MI output read as it comes, each line within a cap (issue 40 item 6): `-thread-info` was read whole.

Input: gdb 13.1's real stdout for a 41-thread Python target (tests/fixtures/stacks/gdb_mi_40_threads.txt), and
lines built here from its own thread records (100,000 threads, a thread-info line of 48 MB)."""

from __future__ import annotations

import os
import threading

from pygdbmi.gdbmiparser import parse_response

from hf_testpaths import FIXTURES
from forensics.collectors.gdb_mi import FRAME_ITEM, TAIL_LINES, THREAD_ITEM, Cap, CappedLine, MiReader

TRANSCRIPT = (FIXTURES / "stacks/gdb_mi_40_threads.txt").read_bytes()
LINES = TRANSCRIPT.split(b"\n")
THREAD_INFO = next(line for line in LINES if line.startswith(b"102^done,threads=["))
STACK = next(line for line in LINES if line.startswith(b"103^done,stack=["))
WHOLE = parse_response(THREAD_INFO.decode())["payload"]["threads"]


def _fed(line: bytes, cap: Cap, chunk: int) -> CappedLine:
    capped = CappedLine(cap)
    for at in range(0, len(line), chunk):
        capped.feed(line[at:at + chunk])
    return capped


def _threads(capped: CappedLine) -> list:
    return parse_response(capped.text())["payload"]["threads"]


def test_a_line_within_its_cap_is_kept_whole():
    capped = _fed(THREAD_INFO, Cap(THREAD_ITEM, 256, 1 << 20), 4096)
    assert capped.cut_at is None and capped.items == len(WHOLE) == 41 and _threads(capped) == WHOLE


def test_the_thread_cap_keeps_the_leading_threads_and_counts_the_rest_whatever_the_reads():
    """A marker split between two reads is counted once: reads of 1 to 4096 bytes give the same answer."""
    for chunk in (1, 2, 3, 4, 5, 7, 64, 4096, len(THREAD_INFO)):
        capped = _fed(THREAD_INFO, Cap(THREAD_ITEM, 10, 1 << 20), chunk)
        assert capped.cut_at is not None and capped.items == 41, chunk
        assert _threads(capped) == WHOLE[:10], chunk


def test_the_byte_cap_keeps_the_whole_threads_that_fit():
    for size in (0, 30, 600, 5000, 12345):
        capped = _fed(THREAD_INFO, Cap(THREAD_ITEM, 256, size), 333)
        kept = _threads(capped)
        assert len(capped.text()) <= max(size, THREAD_INFO.index(THREAD_ITEM)) + 1, size
        assert kept == WHOLE[:len(kept)] and capped.items == 41, size
        assert 0 < len(kept) < 41 or (size < 600 and not kept), (size, len(kept))


def test_a_stack_answer_past_its_bytes_keeps_its_leading_frames():
    whole = parse_response(STACK.decode())["payload"]["stack"]
    capped = _fed(STACK, Cap(FRAME_ITEM, 200, 4000), 1000)
    kept = parse_response(capped.text())["payload"]["stack"]
    assert 0 < len(kept) < len(whole) and kept == whole[:len(kept)] and capped.items == len(whole)


def _huge_thread_info(threads: int) -> bytes:
    """A -thread-info line of `threads` threads, each the fixture's second thread record renumbered."""
    record = THREAD_INFO[THREAD_INFO.index(b',{id="2"') + 1:THREAD_INFO.index(b',{id="3"')]
    body = b",".join(record.replace(b'{id="2"', b'{id="%d"' % n, 1) for n in range(1, threads + 1))
    return b"102^done,threads=[" + body + b'],current-thread-id="1"'


def test_a_thread_info_of_100000_threads_is_kept_to_its_cap_and_counted():
    """The 48 MB answer a target of 100,000 threads makes: at most the cap is ever held (pygdbmi's reader held
    it all, joined again for each read), every thread is counted."""
    line = _huge_thread_info(100_000)
    assert len(line) > 40 << 20
    capped = CappedLine(Cap(THREAD_ITEM, 256, 1 << 20))
    biggest = 0
    for at in range(0, len(line), 1 << 16):
        capped.feed(line[at:at + (1 << 16)])
        biggest = max(biggest, len(capped.kept))
    assert biggest <= (1 << 20) + (1 << 16) and capped.items == 100_000
    kept = _threads(capped)
    assert len(kept) == 256 and [t["id"] for t in kept] == [str(n) for n in range(1, 257)]


def _read_all(data: bytes, cap: Cap) -> tuple[list, MiReader]:
    """Every record MiReader makes of `data` written into a real pipe in reads of odd sizes, and the reader."""
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()

    def write() -> None:
        for at in range(0, len(data), 7777):
            os.write(out_w, data[at:at + 7777])
        os.write(err_w, b"".join(b"warning: line %d of gdb's stderr\n" % n for n in range(500)))
        os.close(out_w)
        os.close(err_w)

    writer = threading.Thread(target=write)
    writer.start()
    with open(out_r, "rb", buffering=0) as out, open(err_r, "rb", buffering=0) as err:
        reader = MiReader(out, err, cap)
        records = []
        for _ in range(10_000):
            got = reader.read(0.2)
            records += got
            if not got and not reader._sel.get_map():
                break
        reader.close()
    writer.join()
    return records, reader


def test_the_reader_gives_each_answer_by_its_token_with_the_cap_it_was_read_under():
    records, reader = _read_all(TRANSCRIPT, Cap(THREAD_ITEM, 5, 1 << 20))
    results = {r.record["token"]: r for r in records if r.record.get("type") == "result"}
    assert sorted(results) == [101, 102, 103, 104, 105]
    assert results[102].cut and results[102].items == 41 and len(results[102].record["payload"]["threads"]) == 5
    assert not results[101].cut and results[101].record["message"] == "done"
    # verbatim input: the last of gdb's stderr lines, kept as written
    assert len(reader.tail) == TAIL_LINES and reader.tail[-1] == "warning: line 499 of gdb's stderr"


def test_an_answer_cut_where_no_item_began_still_answers_its_token():
    """An ^error line of 2 MB (a message gdb quotes from the target's symbols) under a 64 KiB cap: the command
    is answered (not waited on until its time runs out), with what could be kept."""
    line = b'107^error,msg="' + b"x" * (2 << 20) + b'"\n'
    records, _ = _read_all(line, Cap(THREAD_ITEM, 256, 64 << 10))
    assert [(r.record["token"], r.record["message"], r.cut) for r in records] == [(107, "error", True)]

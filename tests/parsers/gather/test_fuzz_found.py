"""What benchmarks/fuzz_structured.py found on the device machine's 16 cores (seed 2, 22,643 inputs), each
as a test that failed before its fix."""

import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from forensics.report.output import json_text
from parsers.readers.pyspy import MAX_JSON_BYTES, PySpyFormatError, read_pyspy_json
from parsers.model.findings import ReasonClass
from parsers.steps.series import SeriesError, parse_series

REPO = Path(__file__).resolve().parents[3]


def test_a_carriage_return_inside_a_csv_field_is_the_files_fault():
    """Input 6706 (and 13 more): a step-series CSV with a stray CR in a field raised csv.Error, a reader bug."""
    text = "step,seconds\n1,0.35\n2,0.3\r5\n3,0.36\n"
    with pytest.raises(SeriesError, match="not a readable CSV"):
        parse_series(text, "steps-rank0.csv")


def test_a_lone_surrogate_from_data_still_makes_utf8_json():
    """Input 87676: a proc.json string read with surrogateescape reached --json, which could not be written."""
    text = json_text("analyze", {"wchan": "futex\udcff_wait"}, pretty=True)
    text.encode("utf-8")
    assert json.loads(text)["wchan"] == "futex\udcff_wait"


def test_a_py_spy_json_past_its_cap_is_refused_before_it_is_decoded(tmp_path):
    """Input 56687: 255 MB of py-spy JSON took 5 s and most of a GiB to decode."""
    big = tmp_path / "pyspy.json"
    with open(big, "wb") as fh:
        fh.truncate(MAX_JSON_BYTES + 1)  # sparse: its size is all that is looked at
    t = time.perf_counter()
    with pytest.raises(PySpyFormatError, match="more than a py-spy dump holds"):
        read_pyspy_json(big)
    assert time.perf_counter() - t < 1


def test_a_manifest_too_big_for_memory_is_a_clear_error(tmp_path):
    """Input 12719: a mutated manifest of many tiny repeated objects was a MemoryError under 1 GiB."""
    bundle = tmp_path / "b"
    bundle.mkdir()
    (bundle / "manifest.json").write_text("[" + "{}," * 12_000_000 + "{}]")
    child = textwrap.dedent(f"""
        import resource, sys
        from parsers.input.errors import InputError
        from parsers.gather.source import read_manifest
        resource.setrlimit(resource.RLIMIT_AS, (600 << 20, 600 << 20))
        try:
            read_manifest(__import__('pathlib').Path({str(bundle)!r}))
        except InputError as err:
            print("InputError:", err)
    """)
    done = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, timeout=120)
    # wording is the behaviour: the InputError's message
    assert "InputError:" in done.stdout and "too large to read" in done.stdout, done.stdout + done.stderr[-2000:]


def test_the_fuzzers_own_json_generator_stays_under_its_input_cap(tmp_path):
    """Seed 3, input 183 (found on the 2-core VM by helper h31): a py-spy JSON whose list got one frame object
    repeated 300,000 times was written out in full each time by json.dumps: the fuzzer's parent grew past 7 GB
    (16 workers would exhaust the device machine). Now the text is encoded piece by piece and given up past
    MAX_INPUT_BYTES (the input is then a text mutation)."""
    child = textwrap.dedent(f"""
        import resource
        from pathlib import Path
        from benchmarks import fuzz_structured as f
        resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))
        folder = Path({str(tmp_path / "in")!r})
        print(f.make_input(f.seed_files(), 3, 183, folder))
        print(max(p.stat().st_size for p in folder.iterdir()) <= f.MAX_INPUT_BYTES)
        print(f._bounded_dumps([{{"frame": "x" * 1000}}] * 300_000) is None)
    """)
    done = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split("\n")[1:3] == ["True", "True"], done.stdout


# --- the device run of seed 4 (111,603 inputs on 16 cores, after this session's merges) -------------------

@pytest.mark.parametrize("ranks", [
    [{"rank": [0], "pid": 1}],            # input 52972: a list for the rank
    [{"rank": 0, "pid": [1]}],            # input 31101: a list for the pid
    ["x"], [1.5], [True], [[0, 1]],       # inputs 58525, 57856, 11009, 18528: entries that are no objects
    [{"pid": 1}], [{"rank": 0}],          # inputs 4854, 23094: a field missing
    [{"rank": 0, "pid": 1, "host": 7}], [{"rank": 0, "pid": 1, "exited_at": "soon"}],
])
def test_a_launcher_record_of_the_wrong_shape_is_the_files_fault(ranks):
    """A launcher.json whose entries are of the wrong type raised TypeError/KeyError inside the reader (a
    reader bug, once issue 29 stopped calling those 'a file problem'); it is now a FileFormatError that
    names the entry."""
    from parsers.input.errors import FileFormatError
    from parsers.readers.launcher import parse_launcher_data

    with pytest.raises(FileFormatError, match=r"launcher record: ranks\[0\]"):
        parse_launcher_data({"ranks": ranks})
    assert parse_launcher_data({"ranks": [{"rank": 3, "pid": 9, "host": "n1", "returncode": -9,
                                           "exited_at": 1.5}]})[0].rank == 3


def test_a_torchelastic_entry_with_a_rank_but_no_local_rank_is_said():
    """Inputs 4304 and 31 more: a failure entry whose `rank :` line lost its '(local_rank: N)' raised KeyError."""
    from parsers.readers.launcher import _entry_said

    # wording is the behaviour: _entry_said's job is the sentence
    assert _entry_said({"rank": 4, "exitcode": 1}) == "rank 4 exited with exitcode 1"


def test_a_lone_surrogate_from_data_is_escaped_in_text_and_html(tmp_path):
    """Inputs 93985, 8910 and 8 more: a proc.json string with '\\udcff' reached the text verdict and the HTML
    report, neither of which could then be written as UTF-8."""
    from forensics.report.html import build_report
    from forensics.report.text import escape
    from parsers.model import Suspect
    from parsers.model.findings import Verdict

    assert escape("futex\udcff_wait") == "futex\\udcff_wait"
    verdict = Verdict(suspects=[Suspect(rank=1, host="h\udcff", pid=2, reason_class=ReasonClass.STOPPED,
                                        reason="rank 1 is stopped in futex\udcff_wait", confidence=0.9)])
    verdict.summary = "rank 1 is stopped in futex\udcff_wait"
    build_report(verdict).encode("utf-8")


# --- the device run of seed 5 (100,000 inputs after the fixes above: 2 failures) ----------------------------

def test_a_wait_cycle_that_is_no_single_loop_still_makes_a_deadlock_verdict():
    """Input 20992 (a mutated excerpt): ranks 0 and 1 and 0 and 2 wait on each other, one strongly connected
    component that no walk through every member closes; naming the cycle raised StopIteration. The verdict
    names one cycle of it."""
    import networkx as nx

    from parsers.pipeline.merge import find_deadlock
    from parsers.model.findings import Verdict, WaitEdge

    g = nx.DiGraph()
    for a, b in ((0, 1), (1, 0), (0, 2), (2, 0)):
        g.add_edge(a, b, edge=WaitEdge("pg:0", a, b, "c10d", scope="group", global_ranks=True))
    verdict = Verdict()
    find_deadlock(verdict, g)
    assert verdict.deadlock is not None and verdict.deadlock.members[0] == 0 and len(verdict.deadlock.members) == 2
    assert all(g.has_edge(a, b) for a, b, _ in verdict.deadlock.hops)


@pytest.mark.parametrize("data", [
    {"threads": [["1"]]},                                     # input 68735: a thread that is a list
    {"threads": [{"id": [1]}]},                               # an id of another type
    {"threads": [{"id": 1}], "stacks": []},                   # stacks not an object
])
def test_a_gdb_file_of_the_wrong_shape_is_the_files_fault(data):
    from parsers.input.errors import FileFormatError
    from parsers.readers.gdb import parse_gdb_data

    with pytest.raises(FileFormatError, match="gdb collector file"):
        parse_gdb_data(data)


def test_gdb_frames_with_fields_of_another_type_stay_as_unknown_frames():
    from parsers.readers.gdb import parse_gdb_data

    threads = parse_gdb_data({"pid": 7, "threads": [{"id": "1", "target-id": "LWP 7", "name": 5}],
                              "stacks": {"1": [{"frame": [1]},
                                               {"frame": {"func": ["x"], "line": "12", "file": "a.c"}}]}})
    assert threads[0].is_main and threads[0].name is None
    assert [(f.function, f.line, f.file) for f in threads[0].frames] == [("??", None, None), ("??", 12, "a.c")]


# --- the device run of seed 6 (100,000 inputs after the fixes above: 2 failures) ----------------------------

@pytest.mark.parametrize("t", [10 ** 400, 1e300, float("nan"), -5, 10 ** 12])
def test_a_second_look_at_a_time_no_date_can_hold_is_dropped(t):
    """Input 85479: a second-look.json whose look time was 1e300-ish reached the judge's date formatting
    (OverflowError: timestamp out of range). A look must have a time that is a date (1970-2286)."""
    from parsers.input.errors import FileFormatError
    from parsers.readers.second_look import FORMAT, VERSION, parse_second_look_data

    good, bad = {"t": 1_800_000_000, "proc": {"state": "S"}}, {"t": t, "proc": {"state": "S"}}
    with pytest.raises(FileFormatError, match="without a readable look"):
        parse_second_look_data({"format": FORMAT, "version": VERSION, "looks": [bad, dict(bad)], "pid": 5}, 5)
    got = parse_second_look_data({"format": FORMAT, "version": VERSION, "looks": [good, bad], "pid": 5}, 5)
    assert got.first.t == 1_800_000_000 and got.second is None and "dropped" in " ".join(got.problems)


def test_a_long_run_of_host_characters_is_no_quadratic_search_for_an_nccl_record():
    """Input 28104: a 10 MB ras_verbose.txt whose mutated lines held 2,000-character runs of '-' took 34 s
    here: the NCCL record pattern tried every position of the run, each backtracking 253 characters."""
    from parsers.readers.nccl_log import _RECORD

    line = "NCCL version 2.28.9 compile" + "-" * 100_000 + " host1:12:12 [0] NCCL INFO x"
    t = time.perf_counter()
    m = _RECORD.search(line)
    assert m is not None and m.group("host") == "host1"
    assert time.perf_counter() - t < 0.5


def test_a_kernel_line_of_repeated_xid_starts_is_no_quadratic_search(tmp_path):
    """Seed 7, input 67396: a 10 MB kernel log one of whose lines held 'NVRM: Xid (PCI:...): 145, ...' 13,000
    times over 1.28 MB ran past 5 s (over 200 s here): the knowledge base's `\\([^)]*\\)` and `.*\\bFatal\\b`
    scanned to the end of the line from every copy. Bounded now; the line's Xid is still recognised."""
    from parsers import knowledge

    kb = knowledge.load(use_env=False)
    line = "NVRM: Xid (PCI:0018:01:00): 145, RLW_RXPIPE Nonfatal XC0 i0 Link" * 20_000
    t = time.perf_counter()
    ids = {entry.id for entry, _m in kb.match_line(line, "kernel")}
    assert time.perf_counter() - t < 2.0
    assert "xid-nvlink-blackwell" not in ids  # 'Nonfatal' is not 'Fatal'
    fatal = "NVRM: Xid (PCI:0018:01:00): 145, RLW_RXPIPE Fatal XC0 i0 Link 13"
    assert "xid-nvlink-blackwell" in {entry.id for entry, _m in kb.match_line(fatal, "kernel")}


def test_a_json_dump_of_nested_arrays_is_refused_before_it_is_decoded(tmp_path):
    """Seed 8, input 2178: a 31 MB Flight Recorder JSON dump whose 'version' held 300,000 lists nested
    50 deep grew to 1.4 GB in json.loads (995 MiB under the fuzzer's 1 GiB cap). Every reader's JSON now
    goes through parsers.input.bounded_json, which counts the opening brackets first; the analysis goes on."""
    from parsers.input import bounded_json
    from forensics.report.words import analyze

    nested = "[" * 50 + '"2.10"' + "]" * 50
    doc = '{"entries": [], "pg_status": {}, "version": [' + ", ".join([nested] * 60_000) + ']}'
    assert doc.count("[") > bounded_json.MAX_CONTAINERS
    with pytest.raises(ValueError, match="arrays and objects"):
        bounded_json.loads(doc)
    (tmp_path / "fr_error_rank_0.json").write_text(doc)
    (tmp_path / "rank1.log").write_text("[rank1]:[E1202 07:00:00.000000000 ProcessGroupNCCL.cpp:632] [Rank 1] Watchdog "
                                        "caught collective operation timeout: WorkNCCL(SeqNum=9, OpType=ALLREDUCE, "
                                        "NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600001 milliseconds before "
                                        "timing out.\n")
    result = analyze(tmp_path)
    refused = {a.cite: a.error for a in result.evidence.artifacts if a.error}
    assert "arrays and objects" in refused["fr_error_rank_0.json"]  # recorded as the file's problem
    assert result.verdict is not None and any(a.kind == "rank-log" for a in result.evidence.artifacts)
    assert bounded_json.loads('{"a": [[1], {"b": []}]}') == {"a": [[1], {"b": []}]}


def test_an_nvidia_smi_section_name_of_280_kb_is_cut_not_lowered_every_line():
    """Seed 9, input 21488: a 2.6 MB `nvidia-smi -q` whose 'ECC Errors' section name was repeated to 280 KB,
    followed by 50,000 fields under it: each field lowered the whole name again (3.7 s, past 5 s on the
    device). Names are cut at MAX_KEY_CHARS; the fields under the section are still read."""
    from parsers.readers.host_nvsmi import MAX_KEY_CHARS, parse_text

    text = ("==============NVSMI LOG==============\nGPU 00000000:10:1C.0\n    Product Name : NVIDIA A100\n"
            "    " + "ECC Errors    " * 20_000 + "\n        Volatile\n"
            + "            DRAM Correctable : 177\n" * 50_000)
    t = time.perf_counter()
    gpus = parse_text(text)
    assert time.perf_counter() - t < 2.0 and MAX_KEY_CHARS < 1000
    assert gpus["00000000:10:1C.0"]["name"] == "NVIDIA A100"


def test_a_proxy_dump_line_of_unclosed_op_starts_is_no_quadratic_search():
    """Seed 9, input 70086: a 1.3 MB line of 20,000 '[0-1|20| Coll' starts with no ']' scanned to its end
    from each (3.8 s); an op's sub list is bounded now, and a real op line still reads."""
    from parsers.readers.proxy_dump import parse_block

    t = time.perf_counter()
    ops, unknown = parse_block(["[0-1|20| Coll 1 " + "[0-1|20| Coll 1 " * 20_000])
    assert time.perf_counter() - t < 1.0 and ops == [] and unknown == 1
    ops, _ = parse_block(["[0-1|20| Coll 3R/0 5S/1]"])
    assert [(o.op_count, o.kind, o.waits_on()) for o in ops] == [(20, "Coll", [3, 5])]


def test_an_unmatched_line_of_70_kb_is_judged_known_by_its_head():
    """Seed 9, input 10744: a 33 MB ras_verbose.txt of 450 lines of ~74 KB: `looks_known` searched each
    whole line with three alternations (5.1 s here). It reads a line's first KNOWN_HEAD_CHARS."""
    from parsers.readers.textline import KNOWN_HEAD_CHARS, looks_known

    assert looks_known("x" * 10 + " NCCL WARN something " + "y" * 70_000)
    assert not looks_known("y" * (KNOWN_HEAD_CHARS + 10) + " NCCL WARN something")


WATCHDOG = ("[default1]:[rank1]:[E1201 17:08:35.884120296 ProcessGroupNCCL.cpp:689] [Rank 1] Watchdog "
            "caught collective "
            "operation timeout: WorkNCCL(SeqNum=4, OpType=ALLREDUCE, NumelIn=1024, NumelOut=1024, "
            "Timeout(ms)=20000) ran "
            "for 20049 milliseconds before timing out.")  # a real line of tests/fixtures (gloo14 torchrun capture)


def test_a_ras_text_far_larger_than_any_real_one_is_read_in_its_first_part(tmp_path):
    """Seed 10's tail, found locally (`fuzz_structured --keep-slow-s`): a 32 MB ras_status.txt of 80 KB lines took
    over 5 s through the RAS and rank-log readers. A snapshot kind reads its first SNAPSHOT_BYTES to a line end,
    and the evidence says which file was read in part and how much of it."""
    from parsers.gather import registry
    from parsers.pipeline.analyze import analyze

    real = (REPO / "tests/fixtures/nccl/chain/ras_status.txt").read_bytes()
    line = b"  " + b"a" * 80_000 + b"\n"
    (tmp_path / "ras_status.txt").write_bytes(real + line * ((32 << 20) // len(line)))
    result = analyze(tmp_path)
    art = next(a for a in result.evidence.artifacts if a.kind == "ras-text")
    assert art.parsed.facts["cut"] == {"read_bytes": registry.SNAPSHOT_BYTES,
                                       "size": (tmp_path / "ras_status.txt").stat().st_size}
    assert any("first part only" in p and "ras_status.txt" in p for p in result.evidence.problems)
    whole = analyze_one(real, tmp_path / "whole", "ras_status.txt")
    assert "cut" not in whole.facts and whole.kind == "ras-text"  # a real one is read whole, as before


def analyze_one(data: bytes, folder, name: str):
    """The Parsed of one file read through the pipeline's read_file."""
    from parsers.pipeline.analyze import analyze

    folder.mkdir()
    (folder / name).write_bytes(data)
    return next(a for a in analyze(folder).evidence.artifacts
                if a.rel.endswith(name) or str(a.path).endswith(name)).parsed


def test_a_line_of_thousands_of_glued_nccl_headers_is_at_most_max_pieces_records():
    """Seed 10's tail: a 1.28 MB line of one NCCL record repeated (the fuzzer's 'very long line') became 20,000
    records, and 25 such lines 660,000 (16 s). One physical line gives at most MAX_PIECES records; two glued
    records (what interleaved writes make) still give two."""
    from parsers.readers.nccl_log import MAX_PIECES, parse_lines

    record = "vm:495:495 [0] NCCL INFO Ring 00 : 1 -> 2 -> 3"  # a real line of tests/fixtures/nccl/field-notes
    many = parse_lines([record * 20_000 + "\n"])
    rings = [e for e in many.events if type(e).__name__ == "TopoEdge"]
    assert 0 < len(rings) <= 2 * MAX_PIECES and MAX_PIECES <= 64
    two = parse_lines([record + record.replace("Ring 00", "Ring 01") + "\n"])
    assert sorted({e.channel for e in two.events if type(e).__name__ == "TopoEdge"}) == [0, 1]


def test_a_rank_log_record_is_matched_on_its_first_part_only():
    """Seed 10's tail: 80 KB lines handed to a dozen readers' patterns in turn took seconds for a 32 MB log.
    A record is matched on its first MATCH_CHARS: a watchdog line followed by 100 KB is still read, one whose
    marker sits past the cut is not (no real line reaches 4 KB)."""
    from parsers.readers.rank_log import parse_lines
    from parsers.readers.textline import MATCH_CHARS

    def timeouts(text: str) -> list:
        return [e for e in parse_lines([text + "\n"]).events if getattr(e, "kind", "") == "watchdog-timeout"]

    assert timeouts(WATCHDOG)
    assert timeouts(WATCHDOG + " " + "x" * 100_000)
    assert not timeouts("y" * (MATCH_CHARS + 10) + " " + WATCHDOG)

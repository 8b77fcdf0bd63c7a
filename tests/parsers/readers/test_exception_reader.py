"""parsers.readers.exception on real output: gloo scenario runs and real torchrun failures.

Sources: tests/fixtures/gloo14/ (captured on this machine, see tests/fixtures/README.md);
the `[rank7]: torch.OutOfMemoryError` line form is the one the field notes saw on the H200.
"""

import json

from hf_testpaths import FIXTURES
from parsers.readers.exception import read_error_file, read_lines

G14 = FIXTURES / "gloo14"
TR = G14 / "torchrun"


def _read(path):
    return read_lines(path.read_text(errors="replace").splitlines(), str(path))


def test_oom_culprit_traceback_with_rank_prefix():
    truth = json.loads((G14 / "oom" / "truth.json").read_text())
    culprit = truth["culprit_rank"]
    out = _read(G14 / "oom" / "postmortem" / f"node{culprit:02d}" / f"rank{culprit}.stderr")
    exc = out.last()
    assert exc.type == "torch.OutOfMemoryError" and exc.category == "oom"
    # verbatim input: the exception's own message
    assert exc.message.startswith("CUDA out of memory. Tried to allocate 4096.00 GiB")
    assert exc.details["tried_to_allocate"] == "4096.00 GiB"
    assert exc.rank == culprit and exc.form == "traceback"
    assert exc.frame.function == "load_giant_batch" and exc.frame.file.endswith("nccl_scenarios.py")
    assert out.last_per_rank().keys() == {culprit}


def test_peers_of_the_oom_rank_end_in_a_gloo_error():
    truth = json.loads((G14 / "oom" / "truth.json").read_text())
    peer = next(r for r in range(truth["world_size"]) if r != truth["culprit_rank"])
    exc = _read(G14 / "oom" / "postmortem" / f"node{peer:02d}" / f"rank{peer}.stderr").last()
    assert exc is not None and exc.rank == peer and exc.type == "RuntimeError"
    assert exc.category == "gloo" and exc.frame.function == "all_reduce"


def test_store_timeout_of_the_late_init_job():
    truth = json.loads((G14 / "lateinit" / "truth.json").read_text())
    exc = _read(G14 / "lateinit" / "postmortem" / "node00" / "rank0.stderr").last()
    assert exc.type == "torch.distributed.DistStoreError" and exc.category == "store-timeout"
    assert exc.details["clients_joined"] == truth["world_size"] - 1
    assert exc.details["clients_expected"] == truth["world_size"]
    assert exc.frame.function == "_create_c10d_store"


def test_chained_exception_from_torchrun_tee_prefix():
    out = _read(TR / "torchrun_record.stderr")
    first = out.exceptions[0]
    assert (first.type, first.local_rank, first.rank) == ("RuntimeError", 1, None)
    # verbatim input: the exception's own message
    assert first.message == "shard index could not be parsed"
    assert first.chain_kind == "cause" and [c.type for c in first.chain] == ["ValueError"]
    assert str(first.frame) == "step (/tmp/tr14/fail.py:13)"
    assert out.last().short_type == "ChildFailedError" and out.last().category == "child-failed"


def test_child_failed_root_cause_block():
    out = _read(TR / "torchrun_record.stderr")
    root = out.root_cause
    assert (root.rank, root.local_rank, root.exitcode, root.pid, root.host) == (1, 1, 1, 10294, "localhost")
    assert root.error_file.endswith("attempt_0/1/error.json")
    assert root.exception.type == "RuntimeError" and root.exception.chain[0].type == "ValueError"
    victim = next(f for f in out.failures if not f.root_cause)
    assert (victim.rank, victim.exitcode, victim.signal) == (0, -15, "SIGTERM")
    assert victim.traceback_note.startswith("Signal 15 (SIGTERM)")


def test_root_cause_without_record_has_no_traceback_and_context_chain():
    out = _read(TR / "torchrun_norecord.stderr")
    oom = out.exceptions[0]
    assert oom.type == "torch.OutOfMemoryError" and oom.chain_kind == "context"
    assert [c.type for c in oom.chain] == ["KeyError"] and oom.message.endswith("20.00 MiB.")
    assert out.root_cause.exception is None and "To enable traceback" in out.root_cause.traceback_note


def test_torchelastic_error_file():
    exc = read_error_file((TR / "logdir" / "attempt_0" / "1" / "error.json").read_text(), "error.json")
    assert exc.form == "error-file" and exc.type == "RuntimeError" and exc.chain[0].type == "ValueError"
    assert exc.frame.function == "step" and exc.details["timestamp"].isdigit()


def test_field_notes_rank7_form():
    line = ("[rank7]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 4096.00 GiB. GPU 0 has a "
            "total capacity of 139.81 GiB of which 138.92 GiB is free.")
    exc = read_lines([line]).last()
    assert (exc.rank, exc.form, exc.category, exc.details["tried_to_allocate"]) == (7, "bare", "oom", "4096.00 GiB")


def test_hostile_input_never_raises():
    junk = ["Traceback (most recent call last):", '  File "' + "x" * 10000, "\x00\xff", "A" * 200000,
            "Traceback (most recent call last):",
            "The above exception was the direct cause of the following exception:",
            "[rank99999999999]: Traceback (most recent call last):", "RuntimeError" + ":" * 5000, b"bytes line"]
    out = read_lines(junk * 200)
    assert out.lines == len(junk) * 200
    assert read_error_file("{") is None and read_error_file("[1,2]") is None
    assert read_error_file(json.dumps({"message": {"message": 5}})) is None
    assert read_error_file(json.dumps({"message": "RuntimeError: x"})).type == "RuntimeError"

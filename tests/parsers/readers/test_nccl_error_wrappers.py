"""'NCCL error: <what>' without PyTorch's 'in: file:line' part: the form of vLLM's and SGLang's pynccl
wrappers, read as an NCCL error, not as prose.

Real lines: vLLM #6732 (the worker's 'Exception in worker VllmWorkerProcess while processing method
init_device: NCCL error: ...' in the corpus excerpt, and the '[rank0]: RuntimeError: NCCL error: ...' of
its title), SGLang #4289's title ('RuntimeError: NCCL error: unhandled system error').
"""

from __future__ import annotations

from hf_testpaths import FIXTURES
from parsers.model.events import ErrorEvent, Origin
from parsers.readers import c10d
from parsers.readers.rank_log import parse_lines


def _kinds(text: str) -> list[tuple[str, str]]:
    return [(e.kind, e.message) for e in c10d.match_line(text, Origin()) if isinstance(e, ErrorEvent)]


def test_exception_message_form_is_an_nccl_error():
    for line in ("RuntimeError: NCCL error: unhandled system error",
                 "[rank0]: RuntimeError: NCCL error: unhandled cuda error (run with NCCL_DEBUG=INFO for details)"):
        parsed = parse_lines([line + "\n"], "x")
        errs = [e for e in parsed.events if isinstance(e, ErrorEvent)]
        assert [e.kind for e in errs] == ["nccl-error"], line
        assert not parsed.unread


def test_vllm_worker_report_is_an_nccl_error_of_its_pid():
    with open(FIXTURES / "realworld" / "vllm-6732.log", encoding="utf-8") as fh:
        parsed = parse_lines(fh, "vllm-6732")
    errs = [e for e in parsed.events if isinstance(e, ErrorEvent)]
    assert [(e.kind, e.origin.pid) for e in errs] == [("nccl-error", 761)]
    assert "unhandled cuda error" in errs[0].message
    assert not parsed.unread


def test_prose_mentioning_an_nccl_error_is_not_one():
    assert _kinds("I also get an NCCL error: unhandled cuda error when I run it") == []


def _data(text: str) -> list[dict]:
    return [dict(e.data if isinstance(e.data, dict) else e.data.to_dict(), kind=e.kind)
            for e in c10d.match_line(text, Origin()) if isinstance(e, ErrorEvent)]


def test_old_torch_misdecoded_nccl_version_is_read_back():
    """NVIDIA/nccl#520: NCCL 2.9.9's code 20909 printed as '20.9.9' by the PyTorch of the time; 2.10.3 as '21.0.3'."""
    got = _data("RuntimeError: NCCL error in: ../torch/lib/c10d/ProcessGroupNCCL.cpp:825, internal error, "
                "NCCL version 20.9.9")
    assert [d["nccl_version"] for d in got if d["kind"] == "nccl-error"] == ["2.9.9"]
    assert c10d.nccl_version("21.0.3") == "2.10.3"
    assert c10d.nccl_version("2.17.1") == "2.17.1" and c10d.nccl_version("2.18.5+cuda11.8") == "2.18.5+cuda11.8"


def test_invalid_usage_code_and_interleaved_exception_type():
    """NVIDIA/nccl#1241: two ranks' tracebacks interleaved; ncclInvalidUsage is a result code without 'Error'."""
    assert _data("ncclInvalidUsage: This usually reflects invalid usage of NCCL library.") == [
        {"code": "ncclInvalidUsage", "kind": "nccl-error"}]
    got = _data("torch.distributedtorch.distributed.DistBackendError.: DistBackendErrorNCCL error in: "
                "/opt/pytorch/pytorch/torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1287, invalid usage, "
                "NCCL version 2.17.1")
    assert {"kind": "python-exception", "type": "torch.distributed.DistBackendError"} in got
    assert c10d.unglue("torch.distributed.DistBackendError") == "torch.distributed.DistBackendError"
    assert c10d.unglue("c10::DistBackendError") == "c10::DistBackendError"
    assert c10d.unglue("aa.DistError") == "aa.DistError"  # a repeated letter is no torn module path

"""Which point-to-point call a main thread is in: one answer for py-spy's stack, gdb's and the merged one
(py-spy --native) of the same process (issue 43 item 2; issue 39 item 1).

The captures are real: tests/fixtures/pyspy/nccl_send_connecting_native.json is `py-spy dump --json --native` of
rank 0 of issue 39's send/send pair (NCCL 2.28.9, torch 2.11, H100; its main thread in `dist.send(dst=3)` under
NCCL's connection set-up to that new peer); the bundle of the same run (tests/fixtures/i39/sendsend-seed42) holds
rank 4, in `all_reduce` under the same set-up frames. Py-spy's stack without --native is the merged stack's Python
frames; gdb's is its native frames (gdb shows no Python frame). gloo_recv_locals.json is a gloo rank in
`dist.recv(src=1)` (py-spy --locals, no native frames).
"""

from __future__ import annotations

import json
import tarfile

import pytest

from hf_testpaths import FIXTURES
from parsers.model import Frame, ThreadStack
from parsers.model.stacks import bare_name, native_p2p_call, p2p_side
from parsers.readers.gdb import read_gdb_json
from parsers.readers.pyspy import parse_pyspy_data, read_pyspy_json
from parsers.stacks.classify import classify, p2p_call

NATIVE_SEND = FIXTURES / "pyspy" / "nccl_send_connecting_native.json"
GLOO_RECV = FIXTURES / "pyspy" / "gloo_recv_locals.json"
SENDSEND = FIXTURES / "i39" / "sendsend-seed42" / "bundle.tar.gz"


def _views(merged: ThreadStack) -> dict[str, ThreadStack]:
    """The merged stack, py-spy's (its Python frames) and gdb's (its native frames) of one capture."""
    def only(native: bool, source: str) -> ThreadStack:
        return ThreadStack(merged.thread_id, merged.name, [f for f in merged.frames if f.native is native],
                           is_main=True, source=source)
    return {"merged": merged, "py-spy": only(False, "py-spy"), "gdb": only(True, "gdb")}


def _answers(stack: ThreadStack) -> tuple[str | None, str | None, str | None]:
    act = classify(stack)
    return p2p_call(stack, act), p2p_call(stack, act, "send"), p2p_call(stack, act, "recv")


def _rank_of_bundle(rank: int) -> ThreadStack:
    with tarfile.open(SENDSEND) as tar:
        member = next(m for m in tar.getmembers() if f"/rank{rank}-pid" in m.name and m.name.endswith("pyspy.json"))
        data = json.loads(tar.extractfile(member).read())  # type: ignore[union-attr]
    (main,) = [t for t in parse_pyspy_data(data) if t.is_main] or parse_pyspy_data(data)[:1]
    return main


def test_a_send_connecting_to_its_peer_is_a_send_in_every_view():
    """The send's Python call is `isend` (under `send`), 25 native frames below NCCL's top; gdb sees only
    c10d::ProcessGroupNCCL::send. Every view says a send, none a receive; the Python views name the same call."""
    (merged,) = read_pyspy_json(NATIVE_SEND)
    views = _views(merged)
    got = {name: _answers(stack) for name, stack in views.items()}
    assert got["merged"] == got["py-spy"] == ("isend", "isend", None), got
    assert got["gdb"] == ("c10d::ProcessGroupNCCL::send", "c10d::ProcessGroupNCCL::send", None), got
    assert {p2p_side(call) for call, _, _ in got.values()} == {"send"}
    # the stack's activity says the same call, so its stack class and the unanswered-send rule's rows do too
    assert {name: classify(s).op for name, s in views.items()} == {
        "merged": "isend", "py-spy": "isend", "gdb": "c10d::ProcessGroupNCCL::send"}


def test_an_all_reduce_connecting_its_ring_is_no_point_to_point_call_in_any_view():
    """Rank 4 of the same run waits in ncclTransportP2pSetup too, under ncclAllReduce: no view calls it a send or
    a receive (NCCL's connection set-up is no point-to-point call of the job's)."""
    merged = _rank_of_bundle(4)
    assert any(f.function == "ncclTransportP2pSetup" for f in merged.frames)
    for name, stack in _views(merged).items():
        assert _answers(stack) == (None, None, None), name
    assert classify(merged).op == "all_reduce"


def test_the_other_sender_of_the_pair_is_a_send_in_every_view():
    merged = _rank_of_bundle(3)
    sides = {name: p2p_side(_answers(stack)[0]) for name, stack in _views(merged).items()}
    assert sides == {"merged": "send", "py-spy": "send", "gdb": "send"}


def test_a_gloo_receive_is_a_receive():
    (main,) = read_pyspy_json(GLOO_RECV)
    assert _answers(main) == ("recv", None, "recv")


def test_python_frames_decide_where_there_are_any():
    """A stack with a Python frame is read by its activity only: a user's function named `send`, or libc's send()
    under it, is no call of torch.distributed's; c10d's C++ names are read only where no Python frame is."""
    user = ThreadStack(1, frames=[Frame("send", native=True, library="libc.so.6"), Frame("send", "train.py", 10)],
                       is_main=True)
    assert _answers(user) == (None, None, None)
    libc = ThreadStack(1, frames=[Frame("send", native=True, library="libc.so.6")], is_main=True)
    assert _answers(libc) == (None, None, None) and native_p2p_call(libc) is None


@pytest.mark.parametrize("name, bare", [
    # as gdb's JSON writes c10d's names (tests/fixtures/stacks/gdb_new_group_rank0.json)
    ("c10d::TCPStore::wait(std::vector<std::__cxx11::basic_string<char, std::char_traits<char>, "
     "std::allocator<char> >, std::allocator<std::__cxx11::basic_string<char, std::char_traits<char>, "
     "std::allocator<char> > > > const&, std::chrono::duration<long, std::ratio<1l, 1000l> > const&)",
     "c10d::TCPStore::wait"),
    ("c10d::ops::(anonymous namespace)::sendCUDA", "c10d::ops::(anonymous namespace)::sendCUDA"),
    ("c10d::ProcessGroupNCCL::send", "c10d::ProcessGroupNCCL::send"),
    ("f(int) const", "f"),
    ("unbalanced)", "unbalanced)"),  # no "(" to close: kept whole
])
def test_a_cpp_name_is_read_without_its_parameters(name, bare):
    assert bare_name(name) == bare


def test_gdbs_c10d_names_with_parameters_say_the_side():
    """gdb's JSON keeps a C++ function's parameters (the fixture's c10d frames do); c10d's send read so is still a
    send, its receive from any source a receive, and the fixture's TCPStore wait no call at all."""
    main = next(t for t in read_gdb_json(FIXTURES / "stacks" / "gdb_new_group_rank0.json") if t.is_main)
    assert any("(" in f.function and "c10d::" in f.function for f in main.frames)
    assert _answers(main) == (None, None, None)
    assert p2p_side("c10d::ProcessGroupNCCL::send(std::vector<at::Tensor, std::allocator<at::Tensor> >&, int, int)") \
        == "send"
    assert p2p_side("c10d::ProcessGroupGloo::recvAnysource(std::vector<at::Tensor, std::allocator<at::Tensor> >&, "
                    "int)") == "recv"
    # gloo's own transport carries every collective's bytes: its Pair::send is no point-to-point call of the job's
    assert p2p_side("gloo::transport::tcp::Pair::send") is None
    assert p2p_side("c10d::ops::(anonymous namespace)::sendCUDA") is None

"""The peer of a point-to-point wait from py-spy --locals (issue 39 item 1), kept and nothing else.

tests/fixtures/pyspy/gloo_recv_locals.json is real `py-spy dump --json --locals` output (py-spy 0.4.3, torch 2.13
CPU, 2026-12-07) of a gloo rank blocked in `dist.recv(buf, src=1)` called from a function whose argument `token`
holds a decoy secret ("hunter2-SECRET"); the logger's wrapper holds kwargs {"src": 1}, the recv frame a tensor's
repr, `group=None`, `work`.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from parsers.readers.pyspy import (MAX_ARG, P2P_ALL_FRAMES, P2P_PY_FRAMES, is_native_frame, is_p2p_frame, p2p_args,
                                   p2p_call_frames, parse_pyspy_data)

CAPTURE = Path(__file__).resolve().parents[2] / "fixtures" / "pyspy" / "gloo_recv_locals.json"


def raw() -> list:
    return json.loads(CAPTURE.read_text())


def test_the_recv_frame_keeps_its_integer_arguments_and_names_its_peer():
    (main,) = parse_pyspy_data(raw())
    recv = main.frames[0]
    assert recv.function == "recv" and dict(recv.args) == {"src": 1, "tag": 0}  # group=None, group_src=None dropped
    assert recv.p2p == ("recv", 1)
    assert all(f.args == () and f.p2p is None for f in main.frames[1:])  # the wrapper's kwargs, the user's frame


def test_no_other_local_survives_the_reader():
    (main,) = parse_pyspy_data(raw())
    kept = repr(main)
    assert "hunter2" not in kept and "Tensor" not in kept and "kwargs" not in kept
    assert raw()[0]["frames"][2]["locals"][1]["repr"] == '"hunter2-SECRET"'  # the capture does hold it


@pytest.mark.parametrize("value", ["-1", "None", "3.0", "1e3", "True", '"2"', "٣", "", "12345678", str(MAX_ARG), 7,
                                   [1]])
def test_only_small_decimal_integers_are_kept(value):
    doc = raw()
    doc[0]["frames"][0]["locals"][1]["repr"] = value  # src
    assert "src" not in dict(parse_pyspy_data(doc)[0].frames[0].args)


def test_a_bound_from_the_world_size_drops_a_rank_past_it():
    frame = raw()[0]["frames"][0]
    assert dict(p2p_args(frame, limit=2)) == {"src": 1, "tag": 0}
    assert dict(p2p_args(frame, limit=1)) == {"tag": 0}


@pytest.mark.parametrize("change", ["name", "filename", "list-name"])
def test_locals_of_any_other_frame_are_never_read(change):
    doc = raw()
    frame = doc[0]["frames"][0]
    if change == "name":
        frame["name"] = "my_recv"
    elif change == "filename":
        frame["filename"] = "/home/u/train/distributed_c10d.py"
    else:
        frame["name"] = ["recv"]
    assert parse_pyspy_data(doc)[0].frames[0].args == ()


def test_a_hostile_locals_list_is_bounded_and_typed():
    doc = raw()
    frame = doc[0]["frames"][0]
    frame["locals"] = ["x", None, {"name": ["src"], "repr": "1"}] + [{"name": "tag", "repr": "9"}] * 10_000
    assert dict(parse_pyspy_data(copy.deepcopy(doc))[0].frames[0].args) == {"tag": 9}
    frame["locals"] = {"src": "1"}
    assert parse_pyspy_data(doc)[0].frames[0].args == ()


#: real `py-spy dump --json --native` of rank 0 of issue 39's send/send pair on the device (seed 42, NCCL 2.28.9,
#: torch 2.11, H100, 2026-12-07; tests/fixtures/i39/sendsend-seed42): its main thread in `dist.send(dst=3)`, NCCL
#: still connecting to that new peer (ncclP2PPreconnectFunc, ncclTransportP2pSetup, bootstrapRecv, accept)
NATIVE_SEND = CAPTURE.parent / "nccl_send_connecting_native.json"


def test_the_call_is_found_under_nccls_native_frames():
    """The Python send sits under 25 native frames: a window of the innermost 16 frames of any kind missed it, and
    the collector never ran py-spy --locals for the pair (the seed-42 capture has no peer)."""
    (thread,) = json.loads(NATIVE_SEND.read_text())
    frames = thread["frames"]
    first_python = next(i for i, f in enumerate(frames) if not is_native_frame(f))
    assert first_python > 16 and all(is_native_frame(f) for f in frames[:first_python])
    assert [f["name"] for f in p2p_call_frames(frames)] == ["isend", "send"]
    assert p2p_call_frames(frames[:first_python]) == []  # NCCL's own frames are never a call


def test_the_window_counts_python_frames_and_stays_bounded():
    (thread,) = json.loads(NATIVE_SEND.read_text())
    natives = [f for f in thread["frames"] if is_native_frame(f)]
    calls = [f for f in thread["frames"] if is_p2p_frame(f)]
    deep = natives * 40 + calls  # the call past P2P_ALL_FRAMES frames: not looked for
    assert len(deep) > P2P_ALL_FRAMES and p2p_call_frames(deep) == []
    python_first = [{"name": "f", "filename": "/x/train.py"}] * P2P_PY_FRAMES + calls  # 16 Python frames inside it
    assert p2p_call_frames(python_first) == []

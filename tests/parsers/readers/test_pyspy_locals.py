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

from parsers.readers.pyspy import MAX_ARG, p2p_args, parse_pyspy_data

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

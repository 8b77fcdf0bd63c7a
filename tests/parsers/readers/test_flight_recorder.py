"""Flight Recorder dumps: real pickle and JSON from gloo jobs; hostile pickles refused."""

import os
import pickle
import tarfile
from pathlib import Path

import pytest

from parsers.model.events import OpEvent, Origin, Progress
from parsers.readers import flight_recorder as fr

GLOO = Path(__file__).resolve().parents[2] / "fixtures" / "gloo"


@pytest.mark.parametrize("name", ["fr_live_rank_0", "fr_live_rank_0.json"])
def test_real_dump_pickle_and_json(name):
    data = fr.load_bytes((GLOO / "sleep" / "node00" / name).read_bytes())
    out = fr.parse(data, Origin(rank=0))
    prog = [e for e in out.events if isinstance(e, Progress)]
    assert [(p.comm, p.last_enqueued, p.last_completed) for p in prog] == [("pg:0", 11, 10)]
    ops = [e for e in out.events if isinstance(e, OpEvent)]
    assert ops[-1].op == "allreduce" and ops[-1].seq == 11 and ops[-1].count == 1048576


def test_pickle_and_json_agree_for_every_fixture():
    pickles = sorted(GLOO.glob("*/*/fr_*_rank_?"))
    assert len(pickles) >= 8, pickles  # a moved or renamed fixture folder must not pass as "all agree"
    for pkl in pickles:
        a = fr.parse(fr.load_bytes(pkl.read_bytes()), Origin(rank=0))
        b = fr.parse(fr.load_bytes(pkl.with_name(pkl.name + ".json").read_bytes()), Origin(rank=0))
        key = lambda o: [(e.comm, e.seq, e.op) for e in o.events if isinstance(e, OpEvent)]  # noqa: E731
        assert key(a) == key(b), pkl


def test_subgroup_status_keys_mapped_to_group_names():
    """pg_status keys are per-process counters; entries carry global names (seen, torch 2.13)."""
    data = fr.load_bytes((GLOO / "chain" / "node02" / "fr_live_rank_2").read_bytes())
    prog = {e.comm: (e.last_enqueued, e.last_completed) for e in fr.parse(data, Origin(rank=2)).events
            if isinstance(e, Progress)}
    assert prog == {"pg:0": (10, 10), "pg:pg_B": (1, 1), "pg:pg_C": (2, 1)}


class _Boom:
    def __reduce__(self):
        return (os.system, ("touch /tmp/fr-pwned-test",))


def test_hostile_pickle_is_refused_without_running_code(tmp_path):
    payload = pickle.dumps({"version": "2.10", "entries": [_Boom()], "pg_status": {}})
    if os.path.exists("/tmp/fr-pwned-test"):
        os.unlink("/tmp/fr-pwned-test")
    with pytest.raises(fr.UnsafePickle):
        fr.load_bytes(payload)
    assert not os.path.exists("/tmp/fr-pwned-test")


def test_truncated_or_foreign_data_is_a_clear_error():
    real = (GLOO / "sleep" / "node00" / "fr_live_rank_0").read_bytes()
    with pytest.raises(ValueError, match="pickle"):
        fr.load_bytes(real[: len(real) // 2])
    with pytest.raises(ValueError, match="Flight Recorder"):
        fr.load_bytes(pickle.dumps({"hello": 1}))
    with pytest.raises(ValueError, match="JSON"):
        fr.load_bytes(b'{"entries": [')


def test_timing_is_told_from_the_entries(tmp_path):
    """NCCL 2.28.9 dumps (tests/fixtures/issue39/env/gpusleep-s39, TORCH_NCCL_ENABLE_TIMING=1): 'on';
    issue 26's pipeline dumps (no timing, every completed op with start time 0): 'off'; gloo: no NCCL entry."""
    fixtures = GLOO.parent
    with tarfile.open(fixtures / "issue39" / "env" / "gpusleep-s39-logs.tar.gz") as tar:
        tar.extractall(tmp_path / "on", filter="data")
    with tarfile.open(fixtures / "issue26" / "pipeline" / "logs.tar.gz") as tar:
        tar.extractall(tmp_path / "off", filter="data")
    timed = [fr.parse(fr.load_bytes(p.read_bytes()), Origin(rank=0)).facts["fr_timing"]
             for p in sorted((tmp_path / "on").rglob("fr_trace_rank_*"))]
    untimed = [fr.parse(fr.load_bytes(p.read_bytes()), Origin(rank=0)).facts["fr_timing"]
               for p in sorted((tmp_path / "off").rglob("fr_trace_rank_?"))]
    assert len(timed) == 8 and set(timed) == {"on"}
    assert len(untimed) == 8 and set(untimed) == {"off"}
    gloo = fr.parse(fr.load_bytes((GLOO / "sleep" / "node00" / "fr_live_rank_0").read_bytes()), Origin(rank=0))
    assert gloo.facts["fr_timing"] is None

"""Reader and table fixes found on the real NCCL 2.28.9 / torch 2.11 scenario captures.

Every input here is a file (or a line of one) the H200 run wrote: see
tests/fixtures/nccl/<scenario>/truth.json for what each scenario broke.
"""

import json
import shutil
import subprocess
import sys
from pathlib import Path

from parsers.gather.evidence import load_directory
from parsers.judges.logs import identity, tables
from parsers.model.events import CommMember, Progress
from parsers.model.events import Origin
from parsers.readers import flight_recorder as fr
from parsers.readers import ras

NCCL = Path(__file__).resolve().parents[2] / "fixtures" / "nccl"
ROOT = Path(__file__).resolve().parents[3]


def _fr(path: Path, rank: int):
    return fr.parse(fr.load_bytes(path.read_bytes()), Origin(rank=rank))


def test_nccl_dump_status_keys_pair_with_pg_config_names():
    """pg_status is keyed '0','1','2' on rank 2; pg_config names its groups '0','2','3' (pg_B, pg_C)."""
    for name in ("fr_trace_rank_2", "fr_live_rank_2.json"):
        out = _fr(NCCL / "chain" / "node02" / name, 2)
        prog = {e.comm: (e.last_enqueued, e.last_completed) for e in out.events if isinstance(e, Progress)}
        assert prog == {"pg:0": (10, 10), "pg:ranks=1,2": (1, 1), "pg:ranks=2,3": (2, 1)}, name


def test_groups_carry_the_names_c10d_lines_use():
    """`[PG ID 2 PG GUID 3(pg_C) Rank 0]` in rank 2's stderr must meet its dump's 'pg:ranks=2,3'."""
    out = _fr(NCCL / "chain" / "node02" / "fr_trace_rank_2", 2)
    members = {e.comm: e.aliases for e in out.events if isinstance(e, CommMember)}
    assert members["pg:ranks=2,3"] == ["pg:pg_C", "pg:3"]
    stderr = (NCCL / "chain" / "node02" / "rank2.stderr").read_text()
    assert "[PG ID 2 PG GUID 3(pg_C) Rank 0]  failure detected" in stderr
    arts = load_directory(NCCL / "chain" / "node02")
    t = tables.build(arts, identity.build(arts))
    assert "pg:pg_C" not in t.progress and t.progress["pg:ranks=2,3"][2].sources >= {"c10d", "fr"}


def test_completion_counter_beats_entry_states():
    """Killed peer: rank 0's dump holds entry 1035 'completed' after 1033-1034 'scheduled', pg_status 12."""
    data = fr.load_bytes((NCCL / "kill" / "node00" / "fr_trace_rank_0").read_bytes())
    assert [e["state"] for e in data["entries"][-3:]] == ["scheduled", "scheduled", "completed"]
    assert data["pg_status"]["0"]["last_completed_collective"] == 12
    arts = load_directory(NCCL / "kill" / "node00")
    t = tables.build(arts, identity.build(arts))
    assert t.progress["pg:0"][0].completed == 12


def test_a_bundle_inside_a_scenario_directory_is_skipped_not_doubled():
    arts = load_directory(NCCL / "sleep")
    assert not [a for a in arts.artifacts if "bundle" in a.path.parts]
    assert any(p.endswith("/bundle") and "forensics bundle" in why for p, why in arts.skipped)
    hosts = {a.host for a in arts.artifacts if a.kind == "nccl-log"}
    assert hosts == {f"node{r:02d}" for r in range(8)}


def test_ras_text_two_rank_blocks_name_the_lagging_rank():
    """Small comms list each rank: 'Rank 0 ... operation 2' leads, 'Rank 1 ... operation 1' lags."""
    out = ras.parse_text((NCCL / "chain" / "ras_status.txt").read_text().splitlines(True))
    behind = sorted(f.pid for f in out.events if f.kind == "behind")
    ahead = sorted(f.pid for f in out.events if f.kind == "ahead")
    assert behind == [1222, 1223, 1224] and ahead == [1221, 1222, 1223]


def test_ras_json_behind_is_below_the_top_count():
    """4 ranks at 11 against 4 at 10 in the world comm, and 2-rank comms at 2 against 1: no tie is guessed."""
    out = ras.parse_json_text((NCCL / "chain" / "ras_status.json").read_text())
    behind = sorted(f.pid for f in out.events if f.kind == "behind")
    assert behind == [1221, 1222, 1222, 1223, 1223, 1224, 1224]  # world: ranks 0-3; then the lagging member of A, B, C


def test_ras_error_block_ranks_are_victims_not_members():
    out = ras.parse_text((NCCL / "kill" / "ras_status.txt").read_text().splitlines(True))
    kinds = {(f.kind, f.pid) for f in out.events}
    assert ("missing", 870) in kinds and ("error", 863) in kinds and ("error", 869) in kinds
    assert not any(f.kind == "behind" for f in out.events)


def test_trimming_keeps_the_op_lines_of_the_cut_middle(tmp_path):
    """A rank's warm-up ops in the world comm fell into the cut once, and it looked behind there."""
    src = tmp_path / "src" / "chain"
    (src / "node01").mkdir(parents=True)
    shutil.copy(NCCL / "chain" / "node01" / "nccl.node01.1222.log", src / "node01")
    (src / "truth.json").write_text('{"scenario": "chain"}')
    subprocess.run([sys.executable, str(ROOT / "scripts/device/trim_fixtures.py"), str(tmp_path / "src"),
                    str(tmp_path / "dst"), "--head", "50", "--tail", "50"], check=True, capture_output=True)
    before = (src / "node01" / "nccl.node01.1222.log").read_text().splitlines()
    after = (tmp_path / "dst" / "chain" / "node01" / "nccl.node01.1222.log").read_text().splitlines()
    assert len(after) < len(before) / 5
    assert [ln for ln in before if " opCount " in ln] == [ln for ln in after if " opCount " in ln]


def test_trimming_copies_documents_whole(tmp_path):
    """A bundle's manifest.json (and any JSON, XML or binary state) is a document: cutting its middle as if it
    were a log left it unreadable. Only the line log beside it is trimmed."""
    src = tmp_path / "src" / "case"
    (src / "bundle").mkdir(parents=True)
    manifest = {"ranks": [{"rank": r, "pid": 1000 + r, "host": f"node{r:02d}"} for r in range(600)]}
    (src / "bundle" / "manifest.json").write_text(json.dumps(manifest, indent=1))
    shutil.copy(NCCL / "chain" / "node01" / "nccl.node01.1222.log", src / "bundle")
    (src / "truth.json").write_text('{"scenario": "case"}')
    subprocess.run([sys.executable, str(ROOT / "scripts/device/trim_fixtures.py"), str(tmp_path / "src"),
                    str(tmp_path / "dst"), "--head", "50", "--tail", "50"], check=True, capture_output=True)
    out = tmp_path / "dst" / "case" / "bundle"
    assert json.loads((out / "manifest.json").read_text()) == manifest
    assert len((out / "nccl.node01.1222.log").read_text().splitlines()) < 300


def test_ras_json_missing_comma_of_nccl_2_28_9_is_repaired():
    """NCCL 2.28.9 prints `"nvml_dev": 0` then `"status": {` with no comma in missing_ranks entries."""
    text = (NCCL / "sigstop" / "ras_status.json").read_text()
    assert '"nvml_dev": 0\n          "status": {' in text
    out = ras.parse_json_text(text)
    assert not out.problems and out.facts.get("repaired")
    assert [(f.kind, f.comm_rank, f.pid) for f in out.events if f.kind != "count"] == [("missing", 3, 686)]
    valid = (NCCL / "chain" / "ras_status.json").read_text()
    body = valid[valid.find("{"):]
    assert ras.repair_json(body) == body and "repaired" not in ras.parse_json_text(valid).facts

"""Sizes from data set a range, never a loop per declared rank (issue 40 item 4)."""

from __future__ import annotations

import json
import time

from benchmarks.bundle_scale import write_bundle
from parsers import knowledge
from parsers.model.ranges import fold_missing, listable, missing
from forensics.report.words import analyze

KB = knowledge.load(use_env=False)


def test_missing_is_counted_before_it_is_listed():
    assert missing(8, [0, 1, 2, 4, 5, 6, 7], 1) == [3]
    assert missing(1 << 20, range(4), 16) is None
    assert missing(6, [0, 1, 2, 3, 4, 5, 99, -1], 1) == []


def test_listable_follows_the_evidence():
    assert list(listable(8, 2)) == list(range(8))
    assert list(listable(1 << 20, 4)) == [] and list(listable(None, 4)) == [] and list(listable(0, 0)) == []


def test_missing_ranks_fold_from_the_present_ones():
    assert fold_missing(1 << 20, [0, 1, 2, 3]) == "4-1048575"
    assert fold_missing(10, [0, 2, 3, 9]) == "1,4-8"
    assert fold_missing(4, range(4)) == "" and fold_missing(3, []) == "0-2"


def _declare(root, world: int) -> None:
    """One rank's WORLD_SIZE and one NCCL init line of another rank declare `world`."""
    man = json.loads((root / "manifest.json").read_text())
    env = root / man["ranks"][0]["dir"] / "environ.json"
    doc = json.loads(env.read_text())
    doc["WORLD_SIZE"] = str(world)
    env.write_text(json.dumps(doc))
    log = next((root / man["ranks"][2]["dir"] / "nccl").iterdir())
    lines = log.read_text().splitlines(True)
    lines.insert(3, lines[2].split("NCCL INFO")[0] + f"NCCL INFO comm 0xdeadbeef rank 2 nranks {world} cudaDev 2 "
                 "nvmlDev 2 busId 1000 commId 0x1234 - Init COMPLETE\n")
    log.write_text("".join(lines))


def test_a_declared_million_ranks_costs_what_four_cost(tmp_path):
    """Was 41 s and gigabytes (a set, a suspect and a line per declared rank); the ratio has generous slack."""
    seconds, sections = {}, {}
    for world in (4, 1 << 20):
        root = tmp_path / str(world)
        root.mkdir()
        write_bundle(root, 4, 4, 1)
        _declare(root, world)
        t = time.perf_counter()
        v = analyze(root, KB).verdict
        seconds[world] = time.perf_counter() - t
        sections[world] = v
    big = sections[1 << 20]
    assert len(big.suspects) <= len(sections[4].suspects) + 4
    assert len(json.dumps(big.sections, default=str)) < 4 * len(json.dumps(sections[4].sections, default=str)) + 20000
    assert seconds[1 << 20] < 10 * seconds[4] + 2.0, seconds

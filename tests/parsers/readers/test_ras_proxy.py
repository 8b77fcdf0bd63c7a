"""RAS reports and proxy dumps. Lines come from field notes (seen on the device, NCCL 2.28.9);
the block layout follows NCCL's RAS client source. Real captures come from the device run."""

import json

from parsers.readers import proxy_dump, ras

RAS_TEXT = """SERVER PROTOCOL 2
Errors
======

#0-0 (8b1f26a0c3e2d411) INCOMPLETE
  Missing communicator data from 1 rank
  Rank 3 -- GPU 0 managed by process 1301 on node 127.0.0.1

Warnings
========

#0-0 (8b1f26a0c3e2d411) MISMATCH
  Communicator ranks have different AllReduce operation counts
  7 ranks have launched up to operation 11
  Rank 5 has launched up to operation 10 -- GPU 0 managed by process 436 on node 127.0.0.1
"""


def test_ras_text_findings():
    out = ras.parse_text(RAS_TEXT.splitlines(True))
    found = {(f.kind, f.comm_rank, f.pid, f.op_count) for f in out.events}
    assert ("missing", 3, 1301, None) in found
    assert ("behind", 5, 436, 10) in found
    assert all(f.comm == "ras:0x8b1f26a0c3e2d411" and f.host == "127.0.0.1" for f in out.events)
    assert out.facts["protocol"] == "2"


def test_ras_json_findings():
    doc = {"nccl_version": "2.28.9", "communicators": [{
        "hash": "0x8b1f", "size": 3, "ranks_count": 2, "missing_ranks_count": 1,
        "ranks": [{"rank": r, "host": "127.0.0.1", "pid": 100 + r, "collective_counts": {"AllReduce": n}}
                  for r, n in ((0, 11), (1, 11), (2, 10))],
        "missing_ranks": [{"rank": 3, "host": "127.0.0.1", "pid": 103,
                           "status": {"unresponsive": True, "considered_dead": False}}]}]}
    out = ras.parse_json_text("SERVER PROTOCOL 2\nOK\n" + json.dumps(doc, indent=2))
    found = {(f.kind, f.comm_rank, f.pid, f.op_count) for f in out.events}
    counts = {("count", r, 100 + r, n) for r, n in ((0, 11), (1, 11), (2, 10))}  # every rank's total
    assert found == {("behind", 2, 102, 10), ("missing", 3, 103, None)} | counts


def test_ras_bad_json_is_a_problem_not_a_crash():
    out = ras.parse_json_text('{"communicators": [')
    assert out.problems and not out.events


def test_proxy_dump_block():
    block = ["ACTIVE OPS", "[0-37|20| Coll 3 /0]", "| `-> [0-38|20| Coll 1R/1 2S/1]", "v", "[X]"]
    ops, unknown = proxy_dump.parse_block(block)
    assert unknown == 0 and [o.op_count for o in ops] == [20, 20]
    assert ops[0].waits_on() == [] and ops[1].waits_on() == [1, 2]

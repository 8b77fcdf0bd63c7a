"""pdsh lines behind an IP address that carry a rich traceback's box (issue 42 item 3): the box rows share one
width, yet each is its own record behind its launcher label, never one wrapped line glued across the file.

Real lines: huggingface/accelerate#1317 (a DeepSpeed multi-node run through pdsh, '104.171.201.171: │ ... │').
"""

from __future__ import annotations

from parsers.readers import rank_log

BOX = """\
104.171.201.171: │   1750 │   def init_trackers(self, project_name: str, config: Optional[dict] │
104.171.201.171: │                                                                              │
104.171.201.171: │ /home/setup/.local/lib/python3.8/site-packages/accelerate/utils/other.py:81  │
104.171.201.171: │ in wait_for_everyone                                                         │
104.171.201.171: │                                                                              │
104.171.201.171: │    78 │   │   or AcceleratorState().distributed_type == DistributedType.DEEP │
104.171.201.171: │    79 │   │   or AcceleratorState().distributed_type == DistributedType.FSDP │
104.171.201.171: │    80 │   ):                                                                 │
104.171.201.171: │ ❱  81 │   │   torch.distributed.barrier()                                    │
104.171.201.171: │    82 │   elif AcceleratorState().distributed_type == DistributedType.TPU:   │
104.171.201.171: │    83 │   │   xm.rendezvous("accelerate.utils.wait_for_everyone")            │
104.171.201.171: │    84                                                                        │
104.171.201.171: │                                                                              │
"""


def test_box_rows_stay_rows_of_their_host():
    parsed = rank_log.parse_lines(BOX.splitlines(), "accelerate-1317.log")
    assert parsed.facts.get("rejoined_lines", 0) == 0
    assert parsed.facts.get("host") == "104.171.201.171"
    # gutters and empty rows are understood; the frame's path and function rows are the only ones left
    assert parsed.unknown_lines == 3

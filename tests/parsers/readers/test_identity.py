"""Identity comes from what each real line carries (issue 13, point 5), checked on corpus excerpts."""

from __future__ import annotations

from pathlib import Path

from parsers.model.events import ErrorEvent, OpEvent, group_rank
from parsers.readers.rank_log import parse_lines
from _load import load

CORPUS = Path(__file__).resolve().parents[2] / "fixtures" / "realworld"


def _events(stem: str) -> list:
    return [ev for parsed in load(CORPUS / f"{stem}.log") for ev in parsed.events]


def test_log_viewer_line_numbers_are_not_ranks():
    ranks = {ev.origin.rank for ev in _events("llamafactory-7396")}
    assert ranks == {0, 3, 4}  # '[80746] [rank0]:...': the [N] counts lines


def test_launcher_labels_are_ranks_when_they_do_not_count_lines():
    edges = [ev for ev in _events("nccl-1232") if ev.origin.pid == 13572]
    assert edges and {ev.origin.rank for ev in edges} == {2}  # '[2] node0:13572:13572 [1] ...'
    assert {ev.origin.device for ev in edges} == {1}


def test_nccl_bracket_is_a_device_not_a_rank():
    ops = [ev for ev in _events("rccl-429") if isinstance(ev, OpEvent)]
    assert {(ev.origin.pid, ev.origin.device, ev.origin.rank) for ev in ops} == {(45006, 0, None), (45012, 2, None)}


def test_hard_wrap_at_a_fixed_width_is_rejoined():
    """VLM-R1 #257: every line cut at 116 columns, tokens split ('ProcessGroupNCCL'' / 's watchdog')."""
    parsed = load(CORPUS / "vlm-r1-257.log")[0]
    kinds = [(ev.kind, ev.origin.rank) for ev in parsed.events if isinstance(ev, ErrorEvent)]
    assert kinds == [("heartbeat", 6), ("dump-signal", 6), ("terminate", 6)]
    # verbatim input: the record rejoined from its wrapped lines
    assert "ProcessGroupNCCL's watchdog got stuck for 480 seconds" in parsed.events[0].message
    assert parsed.unknown_lines == 0


def test_plain_rank_tag_is_the_global_rank_without_a_prefix():
    ranks = sorted(ev.origin.rank for ev in _events("ofa-271") if getattr(ev, "kind", "") == "watchdog-timeout")
    assert ranks == [1, 2, 3, 6, 7]


def test_group_rank_of_a_subgroup_is_not_taken_for_the_global_rank():
    """Fuser #3055: `[PG ID 6 PG GUID  Rank 0]` with no [rankN] prefix names a rank in group 6 only."""
    evs = [ev for ev in _events("fuser-3055") if getattr(ev, "kind", "") in ("heartbeat", "terminate")]
    assert [(ev.origin.rank, group_rank(ev), ev.comm) for ev in evs] == [
        (None, 2, "pg:4"), (None, 0, "pg:6"), (None, 1, "pg:3")]


def test_ray_prefix_gives_pid_and_host_and_torch_prefix_the_rank():
    ev = next(ev for ev in _events("openrlhf-624") if getattr(ev, "kind", "") == "watchdog-timeout")
    assert (ev.origin.rank, ev.origin.pid, ev.origin.host) == (0, 5823, "10.164.227.153")


def test_shell_prompt_names_the_host_of_the_output_below_it():
    """returnn #1486: `zeyer@cn-234 ~ % nvidia-smi`, then nvidia-smi's and dmesg's lines: all of cn-234."""
    evs = _events("returnn-1486")
    assert evs and {ev.origin.host for ev in evs} == {"cn-234"}
    assert [ev.kind for ev in evs][:2] == ["gpu-lost", "pcie-error"]


def test_work_rank_beside_a_subgroup_tag_is_the_group_rank():
    """cache-dit #761: `what():  [PG ID 2 PG GUID 5(mesh_ulysses) Rank 0] ... [Rank 0] Watchdog caught ...`
    (torch 2.2+): WorkNCCL's own `[Rank 0]` is the rank inside mesh_ulysses, as the PG tag says, not the global rank."""
    evs = [ev for ev in _events("cache-dit-761-what") if getattr(ev, "kind", "") == "watchdog-timeout"]
    assert [(ev.origin.rank, group_rank(ev), ev.comm, ev.seq) for ev in evs] == [
        (None, 0, "pg:mesh_ulysses", 472025)]
    # beside the default group's tag the same `[Rank N]` is the global rank (verl #5750)
    evs = [ev for ev in _events("verl-5750") if getattr(ev, "kind", "") == "watchdog-timeout"]
    assert [(ev.origin.rank, ev.comm) for ev in evs] == [(0, "pg:0")]


def test_agent_line_does_not_take_the_files_one_rank():
    """ms-swift #6301: every rank line is rank 11's, but `Sending process 2521733 closing signal SIGTERM` is the
    torchelastic agent speaking of another child; the pid is the child's and its rank is not known."""
    evs = _events("ms-swift-6301")
    sig = [ev for ev in evs if ev.kind == "launcher-signal"]
    assert [(ev.origin.pid, ev.origin.rank) for ev in sig] == [(2521733, None)]
    oom = [ev for ev in evs if ev.kind == "cuda-error"]
    assert [(ev.origin.rank, ev.data.what) for ev in oom] == [(11, "out of memory")]


def test_a_label_the_file_calls_a_pid_is_not_a_rank():
    """sglang #30453: torch_npu labels its lines '[163686] [2026-07-07 ...] torch.distributed: [ERROR]', and other
    lines say '(PID:163686, Device:1, RankID:-1)': the label is that process's pid, and the file's one rank is 1."""
    parsed = load(CORPUS / "sglang-30453.log")
    assert all(p.facts.get("rank") == 1 and "ranks" not in p.facts for p in parsed if p.kind == "rank-log")
    assert 163686 not in {ev.origin.rank for ev in _events("sglang-30453")}



def test_only_the_word_pid_names_a_pid():
    """`rapid=7` names no process (the head is searched in one piece, the word boundary before `pid` tested by
    hand): the `[7] ` label stays the rank; `pid=7` and `PID: 7` make it that process's pid."""
    lines = ["[7] step 1 rapid=7\n", "[7] step 2\n", "[7] step 3\n"]
    assert parse_lines(lines).facts.get("rank") == 7
    for named in ("pid=7", "PID: 7"):
        assert parse_lines([ln.replace("rapid=7", named) for ln in lines]).facts.get("rank") is None

def test_a_pdsh_label_that_is_an_ip_address_names_the_host():
    """DeepSpeed #6705: '202.197.0.170: [rank1]:[E1101 ...': the hostfile listed addresses, so pdsh labels with one."""
    by_line = {ev.origin.line: (ev.origin.host, ev.origin.rank) for ev in _events("deepspeed-6705")
               if isinstance(ev, ErrorEvent)}
    assert sorted(by_line) == [1, 2, 3, 4, 5]
    assert set(by_line.values()) == {("202.197.0.170", 1)}  # line 1 (label eaten by the tqdm bar): the file's one host


def test_shell_prompt_above_a_pasted_dmesg_names_the_kernel_logs_host():
    """akash-network/support#209: `(venv) root@node1:~/kubespray# nvidia-smi`, then `root@node1:~# dmesg -T | grep
    NVRM` and its Xid 79: the file is read as a kernel log, and its prompts say the lines are node1's."""
    events = _events("akash-209")
    assert {(ev.kind, ev.origin.host) for ev in events if ev.kind in ("xid", "gpu-lost")} == {
        ("gpu-lost", "node1"), ("xid", "node1")}
    assert load(CORPUS / "akash-209.log")[0].facts["host"] == "node1"


def test_old_ring_connection_lines_under_open_mpi_labels_give_edges_and_ranks():
    """NVIDIA/nccl#224 (Horovod under mpirun --tag-output): NCCL 2.3-era `Ring 00 : 3[3] -> 1[1] via P2P/IPC` and
    `Ring 00 : 1 -> 4 [receive] via NET/IB/1/GDRDMA` are one channel's connections; `[1,N]<stdout>:` is the rank,
    also on rank 0's only line, an error trail (`init.cu:915 -> 2`)."""
    from parsers.model.events import TopoEdge
    edges = [ev for ev in _events("nccl-224") if isinstance(ev, TopoEdge)]
    assert {(ev.origin.rank, ev.origin.host, ev.src, ev.dst) for ev in edges} >= {
        (3, "gpu6", 3, 1), (4, "gpu7", 1, 4), (5, "gpu7", 5, 0)}
    assert load(CORPUS / "nccl-224.log")[0].facts["ranks"] == list(range(8))

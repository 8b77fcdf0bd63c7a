"""Launcher/log-shipper wrappers are stripped and what they say is kept (formats from field notes)."""

from parsers.readers.prefix import strip_prefix

NCCL = "vm:495:495 [0] NCCL INFO Ring 00 : 1 -> 2 -> 3"


def test_open_mpi_prefix_gives_rank():
    text, info = strip_prefix(f"Fri Aug 11 12:31:45 2023[1,5]<stdout>:{NCCL}")
    assert text == NCCL and info.rank == 5


def test_slurm_label_gives_rank():
    text, info = strip_prefix(f"11: {NCCL}")
    assert text == NCCL and info.rank == 11


def test_ray_prefix_with_ansi_gives_pid_and_ip():
    text, info = strip_prefix(f"\x1b[36m(RayTrainWorker pid=4242, ip=10.0.0.5)\x1b[0m {NCCL}")
    assert text == NCCL and info.pid == 4242 and info.host == "10.0.0.5"


def test_ray_prefix_whose_ip_is_a_host_name_after_a_wall_clock_stamp():
    """verl-project/verl#1309: a Kubernetes Ray node is named, not numbered; the stamp comes first."""
    line = ("[2025-05-10 00:18:21] (WorkerDict pid=1230, ip=train-1316148307689748608-9zzm714v3bpc-worker-0) "
            "[rank15]:[E510 00:18:19.328053719 ProcessGroupNCCL.cpp:629] [Rank 1] Watchdog caught collective "
            "operation timeout: WorkNCCL(SeqNum=3, OpType=BROADCAST, NumelIn=1, NumelOut=1, Timeout(ms)=1800000) "
            "ran for 1800041 milliseconds before timing out.")
    text, info = strip_prefix(line)
    assert text.startswith("[E510 00:18:19.328053719 ProcessGroupNCCL.cpp:629] [Rank 1] Watchdog")
    assert (info.pid, info.host, info.rank) == (1230, "train-1316148307689748608-9zzm714v3bpc-worker-0", 15)


def test_shipper_host_prefix():
    text, info = strip_prefix(f"gpu-node-17.cluster [stderr] {NCCL}")
    assert text == NCCL and info.host == "gpu-node-17"


def test_torch_rank_prefix_is_global_rank():
    line = "[rank3]:[E1129 07:18:19.556497288 ProcessGroupNCCL.cpp:689] [Rank 1] Watchdog caught"
    text, info = strip_prefix(line)
    assert info.rank == 3 and text.startswith("[E1129")


def test_nested_wrappers_and_nccl_timestamp_kept():
    warn = "[2026-11-29 07:25:41] vm:981:1178 [0] misc/socket.cc:72 NCCL WARN socketProgress: x"
    text, info = strip_prefix(f"7: {warn}")
    assert text == warn and info.rank == 7


def test_python_logging_timestamp_stripped():
    text, info = strip_prefix(f"2024-05-02 10:11:12,345 - {NCCL}")
    assert text == NCCL and info.timestamp.startswith("2024-05-02")


def test_plain_line_untouched():
    assert strip_prefix(NCCL)[0] == NCCL


def test_torchrun_tee_label_is_a_local_rank_not_a_global_one():
    """torchrun --tee labels each worker's line `[<role><local rank>]:` (captured here: `[default1]:ready 1 13648`);
    with PyTorch's own `[rankN]:` behind it (NeMo's consoles: `[default0]:[rank0]: Traceback ...`) the global
    rank is PyTorch's, and `[rank3]:` alone is never read as a role label."""
    text, pre = strip_prefix("[default1]:ready 1 13648")
    assert (text, pre.local_rank, pre.rank) == ("ready 1 13648", 1, None)
    text, pre = strip_prefix("[default0]:[rank8]: Traceback (most recent call last):")
    # verbatim input: the line behind the prefix, unchanged
    assert (text, pre.local_rank, pre.rank) == ("Traceback (most recent call last):", 0, 8)
    text, pre = strip_prefix("[rank3]:[E1201 10:00:00.000000000 ProcessGroupNCCL.cpp:632] [Rank 3] x")
    assert (pre.rank, pre.local_rank) == (3, None)


def test_determined_trial_prefix_names_the_rank():
    """determined-ai/determined#8915 as posted: '[<ISO time>] fa88a9df [rank=2] || ' before each line of a trial;
    the rank is the line's (before: rank 2's traceback lines were unknown and unowned)."""
    from pathlib import Path

    corpus = Path(__file__).resolve().parents[2] / "fixtures" / "realworld"
    lines = (corpus / "determined-8915.log").read_text().splitlines()
    text, info = strip_prefix(lines[2])
    # verbatim input: the posted lines, less their prefix
    assert (text, info.rank) == ("Traceback (most recent call last):", 2)
    text, info = strip_prefix(lines[0])
    assert info.rank == 1 and text.startswith("[E ProcessGroupNCCL.cpp:828] [Rank 1] Watchdog caught")

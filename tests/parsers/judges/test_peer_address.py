"""Messages that name a peer by address, read for whom they name (issue 39 item 2): gloo's 'Connection closed by
peer [addr]:port' and 'Read error [addr]:port: Connection reset by peer', NCCL's 'Connection closed by remote peer
host<port>' and its size mismatches ('peer addr<port> message truncated', NET/IB's 'collective mismatch error').
The address is mapped to a rank or host only as far as the files pair them, and the reporter is never the one
named. On real output: public excerpts with their URLs (tests/fixtures/realworld/), the device's order-mismatch
logs (tests/fixtures/issue39/device/), our gloo kill captures, and live gloo jobs whose ranks bind their own
addresses (tests/support/peer_job.py)."""

from __future__ import annotations

import re
import shutil
import tarfile
from pathlib import Path

import pytest

from forensics.report.words import analyze
from parsers import knowledge
from parsers.judges import peer_address
from parsers.model.findings import CULPRIT_MIN_CONFIDENCE, ObservationKind, ReasonClass
from peer_job import run_kill

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
KB = knowledge.load(use_env=False)


def peers(v) -> list:
    return [o.facts for o in v.observations if o.kind is ObservationKind.PEER]


def excerpt(tmp_path: Path, stem: str):
    shutil.copy(FIXTURES / "realworld" / f"{stem}.log", tmp_path)
    return analyze(tmp_path, KB).verdict


@pytest.mark.parametrize("raw,addr", [("10.1.2.3:6541", "10.1.2.3"), ("10.10.23.6<58683>", "10.10.23.6"),
                                      ("gpu004.ds-a4-r02.abc.com<55693>", "gpu004.ds-a4-r02.abc.com"),
                                      ("fe80::1:6541", "fe80::1"), ("localhost<33187>", "localhost"), (None, None)])
def test_the_address_part_of_a_peer(raw, addr):
    assert peer_address.address_of(raw) == addr


@pytest.mark.parametrize("stem,addr", [("pytorch-78514", "18.25.6.30"), ("pid-diffusion-2", "10.0.1.17")])
def test_a_gloo_peer_no_file_maps_is_said_with_its_address(tmp_path, stem, addr):
    """pytorch#78514, pid_diffusion#2: one process's traceback ends in gloo's closed connection; nothing pairs the
    address with a process: the address is said, and that it was not mapped; no one is named."""
    v = excerpt(tmp_path, stem)
    (f,) = peers(v)
    assert (f.what, f.addr, f.ranks, f.mapped) == ("closed", addr, (), None)
    assert not [s for s in v.suspects if s.confidence >= CULPRIT_MIN_CONFIDENCE]
    # wording is the behaviour: the unmapped peer said
    assert addr in v.summary and "no file maps that address" in v.summary


def test_nccl_ib_size_mismatch_names_both_sides_sizes(tmp_path):
    """NVIDIA/nccl#969 (2.14.3): 'NET/IB : req 0/1 tag 0 peer 10.10.23.6<58683> collective mismatch error, local size
    496640 remote size 65536': the printing process sent 496640 bytes, its peer at 10.10.23.6 posted 65536."""
    v = excerpt(tmp_path, "nccl-969")
    (f,) = peers(v)
    assert (f.what, f.side, f.sent, f.posted, f.addr) == ("size", "sender", 496640, 65536, "10.10.23.6")
    assert f.processes == (("so-ucloud-10-10-23-10", 1307367),)
    assert v.culprit is None


def test_a_peer_named_by_host_name_is_that_host(tmp_path):
    """nccl-tests#166 (its description): NCCL names the peer by its full host name; the files show host gpu004
    (NCCL's prefix cuts its own at the first dot): the peer is a process on gpu004; no line says which rank."""
    v = excerpt(tmp_path, "nccl-tests-166-desc")
    (f,) = peers(v)
    assert (f.host, f.ranks, f.how) == ("gpu004", (), "host")
    assert v.culprit is None


@pytest.mark.integration  # 8-rank logs archives, analysed whole
@pytest.mark.parametrize("seed,sender,receiver", [("seed39", 5, 6), ("seed40", 4, 5)])
def test_a_truncated_message_names_its_sender_through_the_receivers_connections(seed, sender, receiver):
    """The device's order mismatch (NCCL 2.28.9, 8 ranks on one machine: every rank states 'NET/Socket : Using
    [0]lo:127.0.0.1'): the receiver's 'peer 127.0.0.1<port> message truncated' is any rank by address; its own
    connections ('Channel 00/0 : 5[0] -> 6[0] [receive] via NET/Socket/0') leave the one that sends to it."""
    v = analyze(FIXTURES / "issue39" / "device" / f"{seed}-ordermismatch" / "logs.tar.gz", KB).verdict
    sizes = [f for f in peers(v) if f.what == "size"]
    assert sizes and all(f.mapped == sender and f.reporters == (receiver,) and f.how == "address+links" for f in sizes)
    assert sizes[0].sent > sizes[0].posted  # a truncation: more arrived than the receiver posted
    assert v.culprit.rank == sender and v.culprit.reason_class == ReasonClass.MISMATCH  # the Flight Recorder agrees
    # wording is the behaviour: the pair and both sizes said under the culprit
    assert any(f"received {sizes[0].sent} bytes from rank {sender}" in line for line in v.shows), v.shows


@pytest.mark.integration  # an 8-rank logs archive, analysed whole
def test_a_truncated_message_without_its_peer_names_the_one_sender_it_is_connected_to(tmp_path):
    """Edit of the seed39 capture (made from it: no capture of NCCL before 2.12 here): rank 6's WARN lines lose
    'peer 127.0.0.1<port> ', as NCCL 2.11 and older print them; its connections still leave rank 5 alone."""
    with tarfile.open(FIXTURES / "issue39" / "device" / "seed39-ordermismatch" / "logs.tar.gz") as tar:
        tar.extractall(tmp_path, filter="data")
    (log,) = tmp_path.rglob("nccl.node06.*.log")
    text = log.read_text()
    assert text.count("NET/Socket : peer 127.0.0.1<") == 2
    log.write_text(re.sub(r"NET/Socket : peer 127\.0\.0\.1<\d+> ", "NET/Socket : ", text))
    v = analyze(tmp_path, KB).verdict
    (f,) = [f for f in peers(v) if f.what == "size"]
    assert (f.addr, f.mapped, f.how, f.reporters) == ("", 5, "links", (6,))


@pytest.mark.parametrize("case,killed", [("kill", 3), ("kill-uneven", 2)])
def test_loopback_peers_are_not_mapped_and_the_reporters_are_not_named(case, killed):
    """Our gloo kill captures: every rank on one machine, every peer 127.0.0.1: the losses are said, unmapped; the
    killed rank stays the culprit from its missing dump, and no reporter is a named-peer suspect."""
    v = analyze(FIXTURES / "gloo" / case, KB).verdict
    assert peers(v) and all(f.addr == "127.0.0.1" and f.mapped is None for f in peers(v))
    assert v.culprit.rank == killed
    assert not [s for s in v.suspects if s.reason_class == ReasonClass.NAMED_PEER]


def test_a_kept_gloo_capture_with_own_addresses_names_the_killed_rank():
    """A real gloo run (tests/support/peer_job.py, 4 ranks at 127.0.0.2-5, rank 2 SIGKILLed, torch 2.13): rank 3
    reads 'Read error [127.0.0.4]:port: Connection reset by peer', the address of the folder rank 2's output is in;
    ranks 0-1 name 127.0.0.1 (the source address of a connection rank 2 opened), which maps to no one."""
    v = analyze(FIXTURES / "issue39" / "gloo-peer-kill2", KB).verdict
    assert v.culprit.rank == 2 and v.culprit.reason_class == ReasonClass.NAMED_PEER, v.text
    assert {s.rank for s in v.suspects if s.confidence >= CULPRIT_MIN_CONFIDENCE} == {2}
    mapped = [f for f in peers(v) if f.mapped is not None]
    assert [(f.mapped, f.reporters, f.how) for f in mapped] == [(2, (3,), "host")]


@pytest.mark.integration
@pytest.mark.parametrize("world,victim", [(3, 1), (4, 0), (5, 3)])
def test_live_gloo_kill_names_the_killed_rank_or_no_one(tmp_path, world, victim):
    """Live: whichever connections gloo reports, a rank named is the killed one, and never a reporter."""
    codes = run_kill(tmp_path, world, victim)
    assert codes[victim] == -9, codes
    v = analyze(tmp_path, KB).verdict
    named = {s.rank for s in v.suspects if s.reason_class == ReasonClass.NAMED_PEER}
    assert named <= {victim}, v.text
    reporters = {r for f in peers(v) for r in f.reporters}
    assert victim not in reporters and not named & reporters

"""NCCL's lines that name an address (parsers/readers/nccl_net.py), read through the NCCL log reader on real lines:
the addresses a process says it uses, and the size mismatches that name a peer. Each line is quoted from its source:
https://github.com/NVIDIA/nccl/issues/1232, https://github.com/NVIDIA/nccl-tests/issues/185,
https://github.com/NVIDIA/nccl/issues/224 (NCCL 2.4, with its empty '; OOB :'), https://github.com/NVIDIA/nccl/issues/529,
the device's NCCL 2.28.9 capture (tests/fixtures/issue39/device), https://github.com/NVIDIA/nccl/issues/268,
https://github.com/NVIDIA/nccl/issues/969 and https://github.com/NVIDIA/nccl/issues/615 (NCCL 2.9.6)."""

from __future__ import annotations

import pytest

from parsers.model.events import ErrorEvent
from parsers.readers import nccl_log


def events(line: str, kind: str) -> list[ErrorEvent]:
    return [e for e in nccl_log.parse_lines([line], "x.log").events if type(e) is ErrorEvent and e.kind == kind]


@pytest.mark.parametrize("line,addresses", [
    ("[0] node0:13571:13571 [0] NCCL INFO Bootstrap : Using enp10s0:10.10.7.107<0>", ["10.10.7.107"]),  # nccl#1232
    ("dgxh100-4:460770:460842 [0] NCCL INFO NET/IB : Using [0]mlx5_10:1/RoCE [1]mlx5_11:1/RoCE [RO]; OOB "
     "enp220s0np0:11.1.128.136<0>", ["11.1.128.136"]),  # nccl-tests#185
    ("[1,3]<stdout>:gpu6:1410:1605 [3] NCCL INFO NET/Socket : Using [0]enp1s0f0:172.16.0.166<0> "
     "[1]enp96s0f0:10.0.26.164<0> "
     "[2]flannel.1:10.244.3.0<0>", ["172.16.0.166", "10.0.26.164", "10.244.3.0"]),  # nccl#224
    ("NvYt-dcf441d17e21-1bdf2bc9-79ce82ee-3fe03e8-c2959af0:97:221 [0] NCCL INFO NET/Socket : Using "
     "[0]ip6tnl0:fe80::e866:19ff:fe1e:a688%ip6tnl0<0> [1]veth0:2a02:6b8:fc1d:3606:0:4457:edef:600a<0>",
     ["fe80::e866:19ff:fe1e:a688%ip6tnl0", "2a02:6b8:fc1d:3606:0:4457:edef:600a"]),  # nccl#529
    ("node00:1753:1753 [0] NCCL INFO NET/Socket : Using [0]lo:127.0.0.1<0>", ["127.0.0.1"]),  # the device capture
])
def test_the_addresses_a_process_uses(line, addresses):
    (e,) = events(line, "net-address")
    assert e.data.addresses == addresses


def test_an_oob_with_no_address_states_none():
    """NCCL 2.4 (nccl#224): 'NET/IB : Using [0]mlx5_18:1/RoCE ... ; OOB :' names no address."""
    line = "[1,0]<stdout>:gpu6:1407:1595 [0] NCCL INFO NET/IB : Using [0]mlx5_18:1/RoCE [1]mlx5_6:1/RoCE ; OOB :"
    assert events(line, "net-address") == []


@pytest.mark.parametrize("line,peer,side,sent,posted", [
    ("[2026-12-06 21:39:50] node06:1759:1836 [0] transport/net_socket.cc:567 NCCL WARN NET/Socket : peer "
     "127.0.0.1<33658> message truncated : receiving 131072 bytes instead of 65536. If you believe your socket network "
     "is in a healthy state, there may be a mismatch in collective sizes or environment settings (e.g. NCCL_PROTO, "
     "NCCL_ALGO) between ranks", "127.0.0.1<33658>", "receiver", 131072, 65536),  # the device capture, NCCL 2.28.9
    ("hvd1:2918:3333 [0] external/nccl_archive/src/transport/net_socket.cc:200 NCCL WARN NET/Socket : message "
     "truncated : receiving 696320 bytes instead of 32768", None, "receiver", 696320, 32768),  # nccl#268, no peer
    ("10.10.23.10: so-ucloud-10-10-23-10:1307367:1307586 [0] transport/net_ib.cc:1038 NCCL WARN NET/IB : req 0/1 tag 0 "
     "peer 10.10.23.6<58683> collective mismatch error, local size 496640 remote size 65536", "10.10.23.6<58683>",
     "sender", 496640, 65536),  # nccl#969, NCCL 2.14.3
    ("train-run-env3-list2-parallel-0:15483:15645 [0] transport/net_ib.cc:665 NCCL WARN NET/IB : collective mismatch "
     # nccl#615
     "error local size 546816 remote 524288 addr 7ff7d1530000 rkey 2553d seq 14/1c", None, "sender", 546816, 524288),
])
def test_a_size_mismatch_keeps_both_sizes_and_its_peer(line, peer, side, sent, posted):
    (e,) = events(line, "size-mismatch")
    assert (e.peer_addr, e.data.side, e.data.sent, e.data.posted) == (peer, side, sent, posted)
    assert events(line, "nccl-warn") == []  # one event: the typed one

"""A recorder state file the job wrote, with its bytes changed (issue 40 item 3: 8 header bytes changed made
`analyze` and `recorder read` exit 1, a KeyError in analyse_comm). Every header byte, and every run of 8 bytes of
the header and of one op and one proxy record, of a real state file (tests/fixtures/nccl_x2/mixed/sigstop: 4
ranks of one communicator, rank 2 stopped), is changed; each changed file either is refused with a
RecorderFormatError that names it, or is read (with a note where its header contradicts it) and judged, alone and with the 3 other ranks' files: never another
exception (the judge without its guard for ranks past a changed header: KeyError at bytes 72-79 here).
The CLI's exit codes on the changes that reach the judge: 0 or 2 for `recorder read`, never 1 for `analyze`."""

from __future__ import annotations

import json
import shutil
import struct
import subprocess
import sys

import pytest

from hf_testpaths import FIXTURES
from parsers.judges.recorder import analyse, comm_rank_table, recorder_hosts, wait_edges
from parsers.readers.recorder import COLL_SIZE, HEADER_SIZE, PROXY_SIZE, RecorderFormatError, decode_recorder

BUNDLE = FIXTURES / "nccl_x2/mixed/sigstop/bundle"
FILES = sorted(BUNDLE.glob("hosts/*/rank*/nccl_recorder/*.bin"))
RUNS = (b"\xff" * 8, b"\0" * 8, b"\xff\xff\xff\x7f" * 2, b"\x00\x00\x00\x80" * 2)


def _judged(data: bytes, others: list) -> str:
    """'refused', 'read' or 'read with a note': the changed file through the reader and the judge, alone and with the other ranks'."""
    try:
        state = decode_recorder(data, "changed.bin")
    except RecorderFormatError as err:
        assert "changed.bin" in str(err)
        return "refused"
    for states in ([state], [state, *others]):  # alone, as `recorder read FILE` reads it, and with its communicator
        for stall in analyse(states):
            for suspect in stall.suspects:
                suspect.to_dict()
        wait_edges(states)
        comm_rank_table(states)
        recorder_hosts(states)
    return "read with a note" if state.notes else "read"


def _changes(base: bytes):
    """(what, changed bytes): each header byte set to 0, 0xff and with its low bit flipped; each 8-byte run (at
    every 4th offset) of the header, of the first op record and of the first proxy record set to 4 patterns."""
    ring, proxy = struct.unpack_from("<II", base, 40)  # coll_ring_offset, proxy_offset (recorder_format.h)
    for i in range(HEADER_SIZE):
        for value in (0, 0xFF, base[i] ^ 1):
            if value != base[i]:
                yield f"byte {i} = {value:#x}", base[:i] + bytes([value]) + base[i + 1:]
    for lo, hi in ((0, HEADER_SIZE), (ring, ring + COLL_SIZE), (proxy, proxy + PROXY_SIZE)):
        for i in range(lo, hi - 7, 4):
            for run in RUNS:
                yield f"bytes {i}-{i + 7} = {run.hex()}", base[:i] + run + base[i + 8:]


def test_every_changed_header_byte_and_run_is_refused_or_read():
    base = FILES[2].read_bytes()  # the stopped rank's
    others = [decode_recorder(f.read_bytes(), str(f)) for i, f in enumerate(FILES) if i != 2]
    outcomes: dict[str, int] = {}
    for what, data in _changes(base):
        try:
            outcome = _judged(data, others)
        except Exception as err:  # noqa: BLE001 - the point: name the change that escaped
            raise AssertionError(f"{what}: {type(err).__name__}: {err}") from err
        outcomes[outcome] = outcomes.get(outcome, 0) + 1
    assert min(outcomes.get(k, 0) for k in ("refused", "read", "read with a note")) > 20, outcomes  # every path ran


#: 8 header bytes a job's file may carry changed: rank and nranks (72-79) as -1 and -1, as 0 and 0 (a second rank 0),
#: env_rank and the start time's low half (84-91)
CLI_CHANGES = ((72, b"\xff" * 8), (72, b"\0" * 8), (84, b"\xff" * 8))


@pytest.mark.parametrize("offset, run", CLI_CHANGES)
def test_the_commands_end_with_their_own_codes_on_a_changed_header(tmp_path, offset, run, forensics_cli, cli_env):
    bundle = tmp_path / "bundle"
    shutil.copytree(BUNDLE, bundle)
    changed = bundle / FILES[2].relative_to(BUNDLE)
    data = changed.read_bytes()
    changed.write_bytes(data[:offset] + run + data[offset + 8:])
    for extra in ([], ["--json"]):
        read = subprocess.run([*forensics_cli, "recorder", "read", str(changed.parent), *extra], env=cli_env,
                              capture_output=True, text=True, timeout=120)
        assert read.returncode in (0, 2) and "Traceback" not in read.stderr, read.stderr
        if run == b"\0" * 8 and offset == 72:  # rank 0 of 0 ranks: read, and the contradiction said
            assert read.returncode == 0 and "note: " in read.stderr and "0 ranks" in read.stderr, read.stderr
    whole = subprocess.run([*forensics_cli, "analyze", str(bundle), "--json"], env=cli_env, capture_output=True,
                           text=True, timeout=300)
    assert whole.returncode in (0, 3, 4) and "Traceback" not in whole.stderr, whole.stderr
    json.loads(whole.stdout)

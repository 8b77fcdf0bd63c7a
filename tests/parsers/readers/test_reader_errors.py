"""Bad input gets a clear RecorderFormatError, never a crash or a wrong decode."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from nccl_patches.harness import run_harness
from parsers.readers.recorder import RecorderFormatError, decode_recorder, read_recorder_file


@pytest.fixture
def good(plugin, harness, state_dir) -> bytes:
    env = {"FORENSICS_RECORDER_DIR": str(state_dir), "HARNESS_NO_FINALIZE": "1"}
    assert run_harness(harness, plugin, 5, ["run", "1", "5", "1", "2"], env).returncode == 0
    (path,) = state_dir.glob("*.bin")
    return path.read_bytes()


def _write(tmp_path: Path, data: bytes) -> Path:
    p = tmp_path / "nccl-recorder.h.1.0.bin"
    p.write_bytes(data)
    return p


def test_good_copy_decodes(good, tmp_path):
    st = read_recorder_file(_write(tmp_path, good))
    assert st.coll_next == 5 and len(st.colls) == 5


@pytest.mark.parametrize("cut", [0, 100, 511])
def test_truncated_header(good, tmp_path, cut):
    with pytest.raises(RecorderFormatError, match="truncated recorder file"):
        read_recorder_file(_write(tmp_path, good[:cut]))


def test_truncated_records(good, tmp_path):
    with pytest.raises(RecorderFormatError, match=r"truncated recorder file \(4096 of \d+ bytes\)"):
        read_recorder_file(_write(tmp_path, good[:4096]))


def test_foreign_file(tmp_path):
    with pytest.raises(RecorderFormatError, match="not a hang-forensics NCCL recorder file"):
        read_recorder_file(_write(tmp_path, b"\x7fELF" + b"\0" * 2000))


def test_header_not_written_yet(good, tmp_path):
    with pytest.raises(RecorderFormatError, match="not written yet"):
        read_recorder_file(_write(tmp_path, b"\0" * 8 + good[8:]))


def test_newer_version_is_refused(good):
    data = bytearray(good)
    struct.pack_into("<I", data, 8, 2)
    with pytest.raises(RecorderFormatError, match="version 2 is newer than this reader"):
        decode_recorder(bytes(data))


def test_corrupt_sizes(good):
    data = bytearray(good)
    struct.pack_into("<I", data, 24, 999)
    with pytest.raises(RecorderFormatError, match="coll_rec_size is 999"):
        decode_recorder(bytes(data))


def test_missing_file(tmp_path):
    with pytest.raises(RecorderFormatError, match="cannot read recorder file"):
        read_recorder_file(tmp_path / "absent.bin")


def test_odd_generation_in_a_copy_is_flagged(good):
    data = bytearray(good)
    struct.pack_into("<I", data, 512, 7)  # first ring slot, mid-write
    st = decode_recorder(bytes(data))
    assert st.colls[0].consistent is False and all(c.consistent for c in st.colls[1:])

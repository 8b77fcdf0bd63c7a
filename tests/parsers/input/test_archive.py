"""Item 5 of issue 16: archives are extracted under caps, without links or special bits,
and the temporary folder always goes away. Every archive here is a real tar file
written by tarfile or by hand (the bomb), then opened by parsers.input.archive."""

from __future__ import annotations

import gzip
import io
import json
import os
import stat
import tarfile
import time
from pathlib import Path

import pytest

from parsers.input.archive import ArchiveRefused, Limits, extracted


def _add(tar: tarfile.TarFile, name: str, data: bytes = b"x", **attrs) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    for key, value in attrs.items():
        setattr(info, key, value)
    tar.addfile(info, io.BytesIO(data) if info.isfile() else None)


def _archive(path: Path, build) -> Path:
    with tarfile.open(path, "w:gz") as tar:
        _add(tar, "b/manifest.json", json.dumps({"format": "hang-forensics-bundle", "version": 1}).encode())
        build(tar)
    return path


def _bomb(path: Path, gib: int = 2) -> Path:
    """A ~2 MB .tar.gz whose one member is 2 GiB of zeros (concatenated gzip members)."""
    info = tarfile.TarInfo("b/hosts/h/rank0-pid1/stdout.log")
    info.size = gib << 30
    block = gzip.compress(bytes(1 << 20), 9)
    with open(path, "wb") as out:
        out.write(gzip.compress(info.tobuf(format=tarfile.GNU_FORMAT)))
        for _ in range(gib << 10):
            out.write(block)
        out.write(gzip.compress(bytes(1024)))
    return path


def test_good_bundle_opens_and_temp_folder_is_removed(tmp_path):
    arc = _archive(tmp_path / "ok.tar.gz", lambda t: _add(t, "b/hosts/h/rank0-pid1/stdout.log", b"hello"))
    with extracted(arc, tmp_parent=tmp_path) as root:
        assert (root / "manifest.json").is_file()
        assert (root / "hosts/h/rank0-pid1/stdout.log").read_bytes() == b"hello"
        temp = root.parent
    assert not temp.exists()
    assert [p.name for p in tmp_path.iterdir()] == ["ok.tar.gz"]


def test_two_gib_bomb_is_refused_quickly_and_cleaned(tmp_path):
    arc = _bomb(tmp_path / "bomb.tar.gz")
    assert arc.stat().st_size < 3 << 20
    for limits in (Limits(), Limits(max_member_bytes=4 << 30)):  # member cap, then ratio cap
        start = time.monotonic()
        with pytest.raises(ArchiveRefused, match="bytes|times its size"):
            with extracted(arc, limits, tmp_parent=tmp_path):
                pass
        assert time.monotonic() - start < 2.0
    assert [p.name for p in tmp_path.iterdir()] == ["bomb.tar.gz"]


@pytest.mark.parametrize("kind", ["symlink", "hardlink", "chardev", "fifo", "dotdot", "absolute", "deep"])
def test_hostile_members_refused(tmp_path, kind):
    def build(tar):
        if kind == "symlink":
            _add(tar, "b/hosts/h/rank0-pid1/stdout.log", b"", type=tarfile.SYMTYPE, linkname="/etc/shadow")
        elif kind == "hardlink":
            _add(tar, "b/x", b"", type=tarfile.LNKTYPE, linkname="etc/shadow")
        elif kind == "chardev":
            _add(tar, "b/zero", b"", type=tarfile.CHRTYPE, devmajor=1, devminor=5)
        elif kind == "fifo":
            _add(tar, "b/rank0.log", b"", type=tarfile.FIFOTYPE)
        elif kind == "dotdot":
            _add(tar, "b/../../evil", b"owned")
        elif kind == "absolute":
            _add(tar, "/tmp/evil", b"owned")
        else:
            _add(tar, "b/" + "d/" * 40 + "f", b"x")
    arc = _archive(tmp_path / f"{kind}.tar.gz", build)
    with pytest.raises(ArchiveRefused):
        with extracted(arc, tmp_parent=tmp_path):
            pass
    assert [p.name for p in tmp_path.iterdir()] == [f"{kind}.tar.gz"]
    assert not Path("/tmp/evil").exists()


def test_setuid_and_wide_modes_are_dropped(tmp_path):
    arc = _archive(tmp_path / "suid.tar.gz", lambda t: _add(t, "b/tool", b"#!/bin/sh\n", mode=0o6777))
    with extracted(arc, tmp_parent=tmp_path) as root:
        mode = stat.S_IMODE((root / "tool").stat().st_mode)
        assert mode & (stat.S_ISUID | stat.S_ISGID | 0o077) == 0


def test_member_count_and_total_caps(tmp_path):
    arc = _archive(tmp_path / "many.tar.gz", lambda t: [_add(t, f"b/f{i}", b"y" * 100) for i in range(50)])
    with pytest.raises(ArchiveRefused, match="more than 20 members"):
        with extracted(arc, Limits(max_members=20), tmp_parent=tmp_path):
            pass
    with pytest.raises(ArchiveRefused, match="more than 1000 bytes"):
        with extracted(arc, Limits(max_total_bytes=1000), tmp_parent=tmp_path):
            pass
    with extracted(arc, tmp_parent=tmp_path) as root:
        assert len(list(root.iterdir())) == 51


def test_not_an_archive_and_truncated(tmp_path):
    junk = tmp_path / "junk.tar.gz"
    junk.write_bytes(os.urandom(4096))
    with pytest.raises(ArchiveRefused, match="not a readable tar"):
        with extracted(junk, tmp_parent=tmp_path):
            pass
    good = _archive(tmp_path / "cut.tar.gz", lambda t: _add(t, "b/big", os.urandom(200_000)))
    good.write_bytes(good.read_bytes()[:50_000])
    with pytest.raises(ArchiveRefused):
        with extracted(good, tmp_parent=tmp_path):
            pass
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cut.tar.gz", "junk.tar.gz"]


def test_temp_folder_removed_when_the_caller_raises(tmp_path):
    arc = _archive(tmp_path / "ok.tar.gz", lambda t: None)
    with pytest.raises(RuntimeError):
        with extracted(arc, tmp_parent=tmp_path):
            raise RuntimeError("reader failed")
    assert [p.name for p in tmp_path.iterdir()] == ["ok.tar.gz"]


def test_a_name_twice_is_refused_and_cleaned(tmp_path):
    """The second member of one name would overwrite the first (tar's rule): refused, nothing left."""
    arc = _archive(tmp_path / "twice.tar.gz", lambda t: (_add(t, "b/x.log", b"first"), _add(t, "b/x.log", b"second")))
    with pytest.raises(ArchiveRefused, match="the name twice"):
        with extracted(arc, tmp_parent=tmp_path):
            pass
    assert not [p for p in tmp_path.iterdir() if p.name.startswith("forensics-bundle-")]


def test_a_link_planted_in_the_destination_is_never_followed(tmp_path):
    """extract_into a folder where something already put a link named like a member's folder: refused."""
    from parsers.input.archive import extract_into

    outside = tmp_path / "outside"
    outside.mkdir()
    dest = tmp_path / "dest"
    dest.mkdir()
    (dest / "b").symlink_to(outside)
    arc = _archive(tmp_path / "plain.tar.gz", lambda t: _add(t, "b/x.log", b"data"))
    with pytest.raises(ArchiveRefused, match="not a folder made by this extraction"):
        extract_into(arc, dest)
    assert list(outside.iterdir()) == []

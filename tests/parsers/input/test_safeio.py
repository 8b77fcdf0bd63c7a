"""Item 4 of issue 16: parsers.input.safeio never blocks on FIFOs, never streams devices,
refuses links when asked and foreign owners, reads bounded, and confines paths."""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path

import pytest

from parsers.input import safeio
from parsers.input.safeio import UnsafeFile


def test_fifo_does_not_block(tmp_path):
    fifo = tmp_path / "rank0.log"
    os.mkfifo(fifo)
    start = time.monotonic()
    with pytest.raises(UnsafeFile, match="FIFO"):
        safeio.open_regular(fifo)
    assert time.monotonic() - start < 0.5


def test_device_and_link_to_device_refused():
    with pytest.raises(UnsafeFile, match="character device"):
        safeio.read_path_bytes("/dev/zero", 10)


def test_symlink_refused_when_not_following(tmp_path):
    real = tmp_path / "real.log"
    real.write_text("hello\n")
    link = tmp_path / "link.log"
    link.symlink_to(real)
    with pytest.raises(UnsafeFile, match="symbolic link"):
        safeio.open_regular(link, follow=False)
    assert safeio.read_text(link)[0] == "hello\n"  # following is the caller's choice
    (tmp_path / "zero").symlink_to("/dev/zero")
    with pytest.raises(UnsafeFile, match="character device"):
        safeio.read_path_bytes(tmp_path / "zero", 10)


def test_owner_check(tmp_path):
    own = tmp_path / "f"
    own.write_text("x")
    assert safeio.read_path_bytes(own, 10, owners={os.getuid()}) == (b"x", False)
    with pytest.raises(UnsafeFile, match="owned by another user"):
        safeio.read_path_bytes(own, 10, owners={os.getuid() + 12345})


def test_bounded_head_tail_lines(tmp_path):
    path = tmp_path / "log"
    path.write_text("".join(f"line {i}\n" for i in range(1000)))
    data, cut = safeio.read_path_bytes(path, 20)
    assert data == b"line 0\nline 1\nline 2" and cut
    text, cut = safeio.read_text(path, 20, tail=True)
    assert text == "line 998\nline 999\n" and cut  # the partial first line is dropped
    lines, cut = safeio.read_lines(path, max_lines=3, tail=True)
    assert lines == ["line 997", "line 998", "line 999"] and cut
    lines, cut = safeio.read_lines(path, max_lines=2)
    assert lines == ["line 0", "line 1"] and cut
    long = tmp_path / "long"
    long.write_text("a" * 100_000)
    lines, cut = safeio.read_lines(long, max_line_chars=10)
    assert lines == ["a" * 10] and cut


def test_sparse_file_copy_is_capped(tmp_path):
    sparse = tmp_path / "dump"
    with open(sparse, "wb") as fh:
        fh.truncate(2 << 30)
    dest = tmp_path / "out" / "dump"
    with safeio.open_regular(sparse, follow=False) as fh:
        written, cut = safeio.copy_bounded(fh, dest, 1 << 20)
    assert written == 1 << 20 and cut and dest.stat().st_size == 1 << 20
    assert stat.S_IMODE(dest.stat().st_mode) == 0o600


def test_copy_never_writes_through_a_planted_link(tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("keep")
    dest = tmp_path / "bundle-file"
    dest.symlink_to(victim)
    src = tmp_path / "src"
    src.write_text("new")
    with safeio.open_regular(src) as fh:
        safeio.copy_bounded(fh, dest, 100)
    assert victim.read_text() == "keep" and not dest.is_symlink() and dest.read_text() == "new"


@pytest.mark.parametrize("rel", ["/etc/shadow", "../x", "a/../../x", "a/..", "", "a\0b", "\\\\server\\x", "C:\\x"])
def test_confine_refuses(tmp_path, rel):
    with pytest.raises(UnsafeFile):
        safeio.confine(tmp_path, rel)


def test_confine_follows_links_only_inside(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "f").write_text("x")
    assert safeio.confine(tmp_path, "a/f") == (tmp_path / "a" / "f").resolve()
    (tmp_path / "out").symlink_to("/etc")
    with pytest.raises(UnsafeFile, match="leaves the bundle"):
        safeio.confine(tmp_path, "out/shadow")
    with pytest.raises(UnsafeFile):
        safeio.confine(tmp_path, 42)


def test_walk_files_bounded_no_links(tmp_path):
    deep = tmp_path
    for i in range(50):
        deep = deep / f"d{i}"
    deep.mkdir(parents=True)
    (deep / "f").write_text("x")
    (tmp_path / "top").write_text("x")
    (tmp_path / "link").symlink_to("/etc/shadow")
    os.mkfifo(tmp_path / "fifo")
    assert [p.name for p in safeio.walk_files(tmp_path, max_depth=10)] == ["top"]
    assert len(list(safeio.walk_files(tmp_path, max_depth=100))) == 2


def test_safeio_imports_nothing_from_forensics():
    import ast
    tree = ast.parse(Path(safeio.__file__).read_text())
    names = [n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
    names += [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
    assert not any(n.startswith("forensics") for n in names)

"""Issue 31, item 5: extended tar headers bounded before they are read; temp folders gone on SIGTERM/SIGHUP.

The archives are built here byte by byte (a ustar header of type 'L' or 'x' whose size field says
1 GiB, then the deflated body): tarfile itself refuses to write such names.
"""

from __future__ import annotations

import gzip
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import time
import zlib
from pathlib import Path

import pytest

from hf_testpaths import FIXTURES, REPO
from parsers.input.archive import extract_into, looks_like_tar

GIB = 1 << 30


def _header(name: bytes, size: int, kind: bytes) -> bytes:
    info = tarfile.TarInfo(name.decode())
    info.size, info.type = size, kind
    return info.tobuf(format=tarfile.GNU_FORMAT)


def _bomb(path: Path, kind: bytes, body: bytes, size: int = GIB) -> Path:
    """A .tar.gz whose first header is an extended header of `size` bytes, the body `body` repeated:
    about 1 MB on disk. Written in chunks (never 1 GiB in memory)."""
    name = b"././@LongLink" if kind == tarfile.GNUTYPE_LONGNAME else b"./PaxHeaders/x"
    comp = zlib.compressobj(9, zlib.DEFLATED, 31)  # gzip container
    chunk = body * ((1 << 20) // len(body))
    with path.open("wb") as out:
        out.write(comp.compress(_header(name, size, kind)))
        left = size
        while left > 0:
            part = chunk[:min(len(chunk), left)]
            out.write(comp.compress(part))
            left -= len(part)
        out.write(comp.compress(b"\0" * (-size % 512) + _header(b"a", 0, tarfile.REGTYPE) + b"\0" * 1024))
        out.write(comp.flush())
    return path


@pytest.fixture(scope="module")
def longname_bomb(tmp_path_factory) -> Path:
    return _bomb(tmp_path_factory.mktemp("bomb") / "longname.tar.gz", tarfile.GNUTYPE_LONGNAME, b"a")


@pytest.fixture(scope="module")
def pax_bomb(tmp_path_factory) -> Path:
    record = b"%d comment=" % GIB
    return _bomb(tmp_path_factory.mktemp("bomb") / "pax.tar.gz", tarfile.XHDTYPE, record + b"c" * 64)


def _extract_in_child(archive: Path, dest: Path) -> tuple[str, float, int]:
    """Extract in a fresh interpreter: (outcome, seconds, peak RSS in KiB of that child: VmHWM, its own
    address space's; ru_maxrss would carry the forking test process's peak across exec)."""
    code = ("import resource, sys, time; from pathlib import Path\n"
            "from parsers.input.archive import extract_into, ArchiveRefused\n"
            "t = time.perf_counter()\n"
            "try:\n    extract_into(Path(sys.argv[1]), Path(sys.argv[2])); out = 'extracted'\n"
            "except ArchiveRefused as err:\n    out = 'refused: ' + str(err)\n"
            "hwm = [l for l in open('/proc/self/status') if l.startswith('VmHWM:')][0].split()[1]\n"
            "print(out); print(time.perf_counter() - t); print(hwm)\n")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-c", code, str(archive), str(dest)], env=env, capture_output=True,
                          text=True, timeout=300)
    outcome, took, rss = done.stdout.strip().splitlines()[-3:]
    return outcome, float(took), int(rss)


def test_one_gib_gnu_long_name_is_refused_before_it_is_read(longname_bomb, tmp_path):
    """A 1 MB archive naming its first member with 1 GiB: 2.2 GB RSS before; now refused at the header."""
    assert longname_bomb.stat().st_size < 4 << 20
    outcome, took, rss_kib = _extract_in_child(longname_bomb, tmp_path)
    assert outcome.startswith("refused:") and "GNU long name" in outcome and "1073741824" in outcome, outcome
    assert took < 2 and rss_kib < 200 * 1024


def test_one_gib_pax_comment_is_refused_before_it_is_read(pax_bomb, tmp_path):
    """A PAX record set of 1 GiB (`comment=`): 34 s, 2.2 GB and accepted before; now refused at the header."""
    outcome, took, rss_kib = _extract_in_child(pax_bomb, tmp_path)
    assert outcome.startswith("refused:") and "PAX header" in outcome and "1073741824" in outcome, outcome

    assert took < 2 and rss_kib < 200 * 1024


def test_real_long_names_and_pax_headers_still_extract(tmp_path):
    """The bounds refuse sizes, not the formats: GNU and PAX archives of a real bundle's long paths open."""
    src = FIXTURES / "nccl/sigstop/bundle"
    for fmt in (tarfile.GNU_FORMAT, tarfile.PAX_FORMAT):
        archive = tmp_path / f"b{fmt}.tar.gz"
        with tarfile.open(archive, "w:gz", format=fmt) as tar:
            tar.add(src, arcname="x" * 150 + "/bundle")  # past ustar's 100-byte name field
            if fmt == tarfile.PAX_FORMAT:
                info = tarfile.TarInfo("note.txt")
                info.pax_headers = {"comment": "c" * 4000}
                tar.addfile(info)
        dest = tmp_path / f"out{fmt}"
        dest.mkdir()
        assert extract_into(archive, dest) > 10
        assert (dest / ("x" * 150) / "bundle" / "manifest.json").is_file()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT])
def test_temp_folder_is_removed_when_analyze_is_ended(tmp_path, sig, forensics_cli, cli_env):
    """A real `python -m forensics analyze ARCHIVE`, ended by a signal while it reads: its unpacked temp
    folder is gone afterwards (SIGTERM and SIGHUP left it behind before; SIGINT already unwound)."""
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    log = (FIXTURES / "nccl/sleep/node05/nccl.node05.483.log").read_bytes()
    for i in range(400):  # enough reading to be ended in the middle of it
        (bundle / f"nccl.node{i:04d}.{1000 + i}.log").write_bytes(log.replace(b"node05", b"n%04d" % i))
    archive = tmp_path / "logs.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(bundle, arcname="logs")
    shutil.rmtree(bundle)
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    env = {**cli_env, "TMPDIR": str(tmpdir)}
    proc = subprocess.Popen(forensics_cli + ["analyze", str(archive)], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not any(tmpdir.glob("**/forensics-src-*/logs/*.log")):
            time.sleep(0.05)
        assert any(tmpdir.glob("**/forensics-src-*")), "the archive was never unpacked"
        time.sleep(0.5)
        assert proc.poll() is None, "analyze ended before the signal: make the archive bigger"
        proc.send_signal(sig)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode != 0
    assert list(tmpdir.iterdir()) == [], [p.name for p in tmpdir.iterdir()]


def _global_then_long_name(path: Path, size: int) -> Path:
    """A .tar.gz whose first header is a PAX global header ('g') of `size` bytes of records, then a GNU long
    name ('L') of `size` bytes, then a member: tarfile.is_tarfile() reads both bodies whole to open it."""
    comp = zlib.compressobj(1, zlib.DEFLATED, 31)
    record = b"%d comment=" % size
    with path.open("wb") as out:
        for kind, body in ((tarfile.XGLTYPE, record + b"c" * 64), (tarfile.GNUTYPE_LONGNAME, b"a")):
            name = b"././@LongLink" if kind == tarfile.GNUTYPE_LONGNAME else b"g"
            out.write(comp.compress(_header(name, size, kind)))
            chunk, left = body * ((1 << 20) // len(body)), size
            while left > 0:
                out.write(comp.compress(chunk[:min(len(chunk), left)]))
                left -= min(len(chunk), left)
            out.write(comp.compress(b"\0" * (-size % 512)))
        out.write(comp.compress(_header(b"a", 0, tarfile.REGTYPE) + b"\0" * 1024) + comp.flush())
    return path


def _in_child(code: str, path: Path) -> tuple[str, int]:
    """Run `code` (it prints one line) on `path` in a fresh interpreter: (that line, its peak RSS in KiB)."""
    code += "\nprint([l for l in open('/proc/self/status') if l.startswith('VmHWM:')][0].split()[1])\n"
    done = subprocess.run([sys.executable, "-c", code, str(path)], env={**os.environ, "PYTHONPATH": str(REPO)},
                          capture_output=True, text=True, timeout=300)
    answer, rss = done.stdout.strip().splitlines()[-2:]
    return answer, int(rss)


def test_a_pax_global_header_and_a_long_name_are_recognised_from_the_first_block_only(tmp_path):
    """Issue 40 item 5: an archive is recognised from its first header block. tarfile.is_tarfile() on a PAX
    global header of 128 MiB followed by a GNU long name of 128 MiB reads both whole (measured here: over 128 MiB
    resident); looks_like_tar answers from the first 512 bytes: the same answer with every byte after them gone,
    the opposite answer with one byte of the first block changed."""
    size = 128 << 20
    archive = _global_then_long_name(tmp_path / "g.tar.gz", size)
    assert archive.stat().st_size < 8 << 20
    ours, ours_kib = _in_child("import sys; from pathlib import Path; from parsers.gather.source import is_archive\n"
                               "from parsers.input.archive import looks_like_tar\n"
                               "p = Path(sys.argv[1]); print(looks_like_tar(p) and is_archive(p))", archive)
    theirs, theirs_kib = _in_child("import sys, tarfile; print(tarfile.is_tarfile(sys.argv[1]))", archive)
    assert ours == "True" and ours_kib < 120 * 1024, (ours, ours_kib)
    assert theirs_kib > (size >> 10), theirs_kib  # the hazard is real: tarfile's own check holds the body
    with gzip.open(archive, "rb") as fh:
        first = fh.read(512)
    assert first[156:157] == tarfile.XGLTYPE
    (tmp_path / "first.tar.gz").write_bytes(gzip.compress(first))  # nothing after the first block
    (tmp_path / "first.tar").write_bytes(first)
    assert looks_like_tar(tmp_path / "first.tar.gz") and looks_like_tar(tmp_path / "first.tar")
    damaged = bytearray(first)
    damaged[0] ^= 1  # the name's first byte: the checksum no longer matches
    (tmp_path / "damaged.tar").write_bytes(bytes(damaged) + _header(b"a", 0, tarfile.REGTYPE) + b"\0" * 1024)
    assert not looks_like_tar(tmp_path / "damaged.tar")

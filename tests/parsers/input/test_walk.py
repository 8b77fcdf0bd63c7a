"""No recursion on data depth (issue 40 item 5): folders, stack trees, manifest paths and archive headers walked
iteratively or from a bounded prefix, each input built here."""

from __future__ import annotations

import gzip
import json
import os
import tarfile
import time
from pathlib import Path

import pytest

from forensics.cli.main import main
from parsers.input.archive import looks_like_tar
from parsers.model import Frame, ThreadStack
from parsers.gather.source import Source, is_archive
from parsers.stacks.tree import MAX_TREE_DEPTH, build_tree
from parsers.input.walk import has_files, walk_files


def _deep(root: Path, depth: int) -> Path:
    """A folder nested `depth` deep (made with relative mkdirs: the path itself passes PATH_MAX)."""
    cwd = os.getcwd()
    os.chdir(root)
    try:
        for _ in range(depth):
            os.mkdir("d")
            os.chdir("d")
        Path("deep.log").write_text("x\n")
    finally:
        os.chdir(cwd)
    return root


def _remove_deep(root: Path) -> None:
    """The chain removed from its bottom up (shutil.rmtree, and so pytest's cleanup, recurse per level)."""
    cwd = os.getcwd()
    os.chdir(root)
    depth = 0
    try:
        while os.path.isdir("d"):
            os.chdir("d")
            depth += 1
        for name in os.listdir("."):
            os.unlink(name)
        for _ in range(depth):
            os.chdir("..")
            os.rmdir("d")
    finally:
        os.chdir(cwd)


@pytest.fixture
def deep(tmp_path):
    _deep(tmp_path, 1000)
    yield tmp_path
    _remove_deep(tmp_path)


def test_a_folder_1000_deep_is_walked_and_the_cut_said(deep):
    tmp_path = deep
    (tmp_path / "top.log").write_text("y\n")
    cut: list[str] = []
    found = list(walk_files(tmp_path, cut=cut))
    assert found == [tmp_path / "top.log"] and len(cut) == 1 and "deeper than 32 folders" in cut[0]
    assert has_files(tmp_path)


def test_analyze_of_a_deep_folder_has_no_recursion_error(deep):
    assert main(["analyze", str(deep)]) in (0, 2, 4)


def test_a_1500_frame_stack_keeps_its_ends_and_says_the_cut():
    frames = [Frame(function=f"f{i}", file="x.py", line=i) for i in range(1500)]
    tree = build_tree({0: ThreadStack(thread_id=1, name="MainThread", frames=frames),
                       1: ThreadStack(thread_id=2, name="m", frames=frames[:3])})
    d = tree.to_dict()
    json.dumps(d)  # the C encoder recurses too: the bound keeps it far from the limit
    depth, node, labels = 0, d, []
    while node["children"]:
        node = node["children"][0]
        labels.append(node["frame"])
        depth += 1
    assert depth == MAX_TREE_DEPTH + 1
    assert any("1244 frames cut" in x for x in labels) and labels[-1].startswith("f0")


def test_a_manifest_path_of_5000_parts_is_confined_without_recursion(tmp_path):
    src = Source(root=tmp_path, given=tmp_path, form="bundle", manifest=None, files=[], skipped=[])
    rel = "/".join(["a"] * 5000) + "/f.log"
    assert str(src.path(rel)).endswith("/a/a/f.log")


def test_an_archive_is_recognised_from_its_first_header_only(tmp_path):
    """A GNU long-name header that says 3 GB: recognised (its checksum) without reading the name."""
    info = tarfile.TarInfo("././@LongLink")
    info.type = tarfile.GNUTYPE_LONGNAME
    info.size = 3 << 30
    block = tarfile.TarInfo._create_header(info.get_info(), tarfile.USTAR_FORMAT, "utf-8", "surrogateescape")
    for name, opener in (("l.tar", open), ("l.tar.gz", None)):
        path = tmp_path / name
        if opener is None:
            with gzip.open(path, "wb") as fh:
                fh.write(block + b"\0" * 4096)
        else:
            path.write_bytes(block + b"\0" * 4096)
        t = time.perf_counter()
        assert looks_like_tar(path) and is_archive(path)
        assert time.perf_counter() - t < 1.0
    (tmp_path / "plain.log").write_text("NCCL INFO hello\n" * 100)
    assert not is_archive(tmp_path / "plain.log")
    (tmp_path / "a.txt").write_text("hello")
    with tarfile.open(tmp_path / "real.tar", mode="w:xz") as tar:
        tar.add(tmp_path / "a.txt", arcname="a.txt")
    assert is_archive(tmp_path / "real.tar")

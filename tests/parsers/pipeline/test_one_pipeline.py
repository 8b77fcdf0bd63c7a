"""Issue 12: one pipeline for bundles, archives and loose folders; honest about what the evidence covers.

All on real fixtures: NCCL 2.28.9 and gloo bundles captured by `forensics collect` on
real hangs, a real kernel line posted publicly, a real watchdog line from a rank's stderr.
"""

from __future__ import annotations

import shutil
import tarfile
import tempfile
from pathlib import Path

import pytest

from forensics.report.words.facts import observed as worded
from parsers import knowledge
from forensics.report.words import analyze

pytestmark = pytest.mark.integration  # it starts real processes (it was under tests/integration)

REPO = Path(__file__).resolve().parents[3]
FIXTURES = REPO / "tests" / "fixtures"
BUNDLES = sorted(p.parent for p in FIXTURES.rglob("manifest.json") if "realworld" not in p.parts)
KB = knowledge.load(use_env=False)


def _flat_copy(bundle: Path, dest: Path) -> Path:
    """Every file of the bundle in one folder, without the manifest, names made unique from the path."""
    dest.mkdir()
    for p in sorted(bundle.rglob("*")):
        if p.is_file() and p.name != "manifest.json":
            shutil.copyfile(p, dest / "__".join(p.relative_to(bundle).parts))
    return dest


def _tar(bundle: Path, dest: Path) -> Path:
    with tarfile.open(dest, "w:gz") as tar:
        tar.add(bundle, arcname="bundle")
    return dest


def _who(result) -> tuple:
    c = result.verdict.culprit
    return (c.rank, str(c.reason_class)) if c else (None, None)


def test_the_bundles_are_there():
    """An empty glob would skip the comparison below, not fail it."""
    assert len(BUNDLES) >= 19, BUNDLES


@pytest.mark.parametrize("bundle", BUNDLES, ids=lambda p: str(p.relative_to(FIXTURES)))
def test_bundle_archive_and_flat_folder_agree(bundle: Path, tmp_path: Path):
    """Item 6: the same culprit rank and reason class from the bundle, its tar archive, and its files
    copied flat into a folder without a manifest (host labels may differ)."""
    on_bundle = analyze(bundle, KB)
    on_archive = analyze(_tar(bundle, tmp_path / "b.tar.gz"), KB)
    on_flat = analyze(_flat_copy(bundle, tmp_path / "flat"), KB)
    assert on_bundle.evidence.form == "bundle" and on_archive.evidence.form == "archive-bundle"
    assert on_flat.evidence.form == "folder" and on_flat.evidence.manifest is None
    assert _who(on_archive) == _who(on_bundle)
    assert _who(on_flat) == _who(on_bundle), (on_bundle.verdict.summary, on_flat.verdict.summary)


def test_archive_temp_folder_is_removed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    # the temp root this test's analysis alone uses: another analysis of an archive running beside the test (a
    # second suite, a user) unpacks under /tmp too, and made the test fail while this one cleaned up
    temp = tmp_path / "temp"
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    bundle = FIXTURES / "nccl" / "sigstop" / "bundle"
    analyze(_tar(bundle, tmp_path / "b.tgz"), KB)
    assert not list(temp.glob("forensics-src-*"))


def test_loose_folder_with_a_real_xid_79_line_gets_a_host_finding(tmp_path: Path):
    """A kernel line posted publicly (leptonai/gpud#46, see public-gpu-faults.log) alone in a folder."""
    line = next(ln for ln in (FIXTURES / "host" / "kernel" / "public-gpu-faults.log").read_text().splitlines()
                if "): 79, " in ln and ln.startswith("["))
    folder = tmp_path / "gpu-node-3"
    folder.mkdir()
    (folder / "dmesg.txt").write_text(line + "\n")
    result = analyze(tmp_path, KB)
    kinds = {a.kind for a in result.evidence.artifacts}
    assert kinds == {"kernel-log"}
    report = next(r for r in result.hosts if r.host == "gpu-node-3")
    assert "xid-79" in {g.entry.id for g in report.groups}
    assert report.status == "exclude"


def test_one_ranks_watchdog_line_names_nobody_by_absence(tmp_path: Path):
    """Item 5: one rank's real watchdog line (NCCL 2.28.9, field notes) alone: no culprit from the
    silence of ranks the excerpt never covered; the summary says what the line shows."""
    line = next(ln for ln in (FIXTURES / "nccl" / "sleep" / "node00" / "rank0.stderr").read_text().splitlines()
                if "Watchdog caught collective operation timeout" in ln)
    (tmp_path / "excerpt.txt").write_text(line + "\n")
    result = analyze(tmp_path, KB)
    assert result.verdict.culprit is None, result.verdict.summary
    summary = result.verdict.text  # the summary and the lines under it
    timeouts = [o for o in result.verdict.observations if o.kind == "timeout"]
    assert any(o.ranks == (0,) and "ALLREDUCE SeqNum" in worded(o) for o in timeouts), summary
    assert [o.kind for o in result.verdict.observations].count("coverage-note") == 1, summary  # coverage said in words
    assert result.verdict.to_dict()["sections"]["coverage"]["complete"] is False


def test_highest_rank_seen_is_not_the_world_size(tmp_path: Path):
    """The 145-rank case of the issue, on real lines: stderr of two ranks of a bigger job (ranks 3 and 6
    of the sleep scenario) must not make ranks 0-2, 4-5 'left no log' suspects."""
    for r in (3, 6):
        src = FIXTURES / "nccl" / "sleep" / f"node0{r}" / f"rank{r}.stderr"
        shutil.copyfile(src, tmp_path / f"rank{r}.stderr")
    result = analyze(tmp_path, KB)
    assert all(s.reason_class not in ("no-dump", "absent", "silent") for s in result.verdict.suspects), \
        [s.to_dict() for s in result.verdict.suspects]

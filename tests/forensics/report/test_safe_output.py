"""-o FILE of analyze, hosts, steps and bisect: a planted link at the name is replaced, never written through."""

from pathlib import Path

from forensics.report.output import emit, to_output


def _plant(tmp_path: Path) -> tuple[Path, Path]:
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    out = tmp_path / "out.txt"
    out.symlink_to(victim)
    return victim, out


def test_emit_replaces_a_planted_link(tmp_path):
    victim, out = _plant(tmp_path)
    emit("VERDICT: x", out)
    assert victim.read_text() == "precious\n"
    assert not out.is_symlink() and out.read_text() == "VERDICT: x\n"


def test_to_output_replaces_a_planted_link_and_its_temp_name(tmp_path):
    victim, out = _plant(tmp_path)
    for name in tmp_path.glob(".out.txt*"):
        name.unlink()
    with to_output(out):
        print("hello")
    assert victim.read_text() == "precious\n"
    assert not out.is_symlink() and out.read_text() == "hello\n"
    assert not list(tmp_path.glob(".out.txt*"))

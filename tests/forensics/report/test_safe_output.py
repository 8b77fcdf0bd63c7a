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


def test_every_text_output_escapes_controls_from_data_and_json_stays_json(tmp_path, capsys):
    """emit is the boundary of every text output (the fleet's and the reduced tree's summaries quoted a
    gateway's stderr, a digest's frame names and host results raw before): a screen-clearing escape from data
    is shown, not obeyed; a JSON document goes out as json wrote it, and stays valid JSON."""
    import json

    from forensics.report.output import emit_document, json_text

    emit("gateway gw01: refused: \x1b[2J\x1b[HVERDICT: node07 is fine\nnext line\ttab")
    shown = capsys.readouterr().out
    assert "\x1b" not in shown and "\\x1b[2J" in shown and "next line\ttab" in shown.splitlines()[1]
    doc = json_text("collect", {"where": "wait\x85ing \x1b[2J"})
    emit_document(doc)
    assert json.loads(capsys.readouterr().out)["where"] == "wait\x85ing \x1b[2J"

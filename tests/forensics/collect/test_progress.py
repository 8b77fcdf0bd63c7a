"""collect's progress lines (stderr) go through the text outputs' one escape (issue 40 item 7).

Today they quote the host's name, the output path and collectors' statuses, none of them a target's data; the
escape is there so that one that does (an error text, a path a target named) reaches no terminal raw. The
end-to-end test (test_progress_escapes.py) checks the summary lines that do quote a target's NCCL_DEBUG_FILE; this
one fails if a progress line is printed without the escape."""

from __future__ import annotations

from forensics.collect.progress import ProgressReporter

HOSTILE = "nccl-\x1b]0;owned\x07-\u009b2J-\u202e.log"  # OSC title, C1 CSI, a bidi override


def test_progress_lines_show_controls_escaped(capsys):
    progress = ProgressReporter(2, "ranks on vm")
    progress.say(f"collecting into {HOSTILE}")
    progress.step(f"rank 0: nccl_log failed: {HOSTILE}")
    err = capsys.readouterr().err
    assert err.count("owned") == 2 and err.count("\\x1b]0;owned\\x07") == 2
    assert not any(raw in err for raw in ("\x1b", "\x07", "\u009b", "\u202e"))


def test_quiet_progress_prints_nothing(capsys):
    progress = ProgressReporter(1, "ranks", quiet=True)
    progress.say(HOSTILE)
    progress.step(HOSTILE)
    assert capsys.readouterr().err == ""

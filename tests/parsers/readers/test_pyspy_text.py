"""py-spy text dumps: real dumps of tests/fixtures/pyspy/target.py."""

from pathlib import Path

from parsers.readers import pyspy_text

FIX = Path(__file__).resolve().parents[2] / "fixtures" / "pyspy"


def test_plain_dump():
    out = pyspy_text.parse_lines((FIX / "dump.txt").read_text().splitlines())
    assert out.unknown_lines == 0
    names = [s.name for s in out.stacks]
    assert names == ["MainThread", "busy-worker", "sleeper"]
    main = out.stacks[0]
    assert main.is_main and main.frames[0].function == "idle" and main.frames[0].line == 6
    busy = out.stacks[1]
    assert busy.active and busy.owns_gil and busy.source == "py-spy"
    assert out.facts["pid"] == main.thread_id


def test_native_and_locals_dumps():
    native = pyspy_text.parse_lines((FIX / "dump_native.txt").read_text().splitlines())
    assert native.unknown_lines == 0
    first = native.stacks[0].frames[0]
    assert first.native and first.function == "clock_nanosleep" and first.library == "libc.so.6"
    assert any(not f.native and f.function == "idle" for f in native.stacks[0].frames)
    loc = pyspy_text.parse_lines((FIX / "dump_locals.txt").read_text().splitlines())
    assert loc.unknown_lines == 0 and [len(s.frames) for s in loc.stacks] == [2, 5, 4]

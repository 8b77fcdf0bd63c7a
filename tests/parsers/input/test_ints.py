"""parsers.input.ints.as_int: the one bounded way to take an integer out of data, and the places that use it."""

from pathlib import Path

import pytest

from forensics.discover.rankenv import is_rank_env, rank_process
from parsers.input.errors import FileFormatError
from parsers.input.ints import MAX_DIGITS, as_int
from parsers.readers import c10d, flight_recorder, gdb, launcher, native_stack, proc, second_look

HUGE_TEXT = "9" * 4300  #: int() of more than 4,300 digits raises; these are counted before int() runs
HUGE_INT = 10 ** 5000  #: a number JSON can hold and str() cannot print


@pytest.mark.parametrize("value, text, expected", [
    (12, False, 12), ("12", True, 12), (" 12 ", True, 12), ("-5", True, -5), ("+5", True, 5),
    ("12", False, None),  # a JSON reader: a number written as a string stays a type error
    (True, True, None), (3.0, True, None), (None, True, None), ([1], True, None),
    ("1_000", True, None), ("²", True, None), ("٣", True, None), ("", True, None), ("-", True, None),
    (HUGE_TEXT, True, None), ("9" * 5000, True, None), (HUGE_INT, True, None), (-HUGE_INT, False, None),
    (1 << 64, False, None), ((1 << 64) - 1, False, (1 << 64) - 1), (-(1 << 63), False, -(1 << 63)),
], ids=lambda v: type(v).__name__ if isinstance(v, int) and abs(v) > 1 << 70 else None)
def test_as_int_takes_bounded_integers_only(value, text, expected):
    assert as_int(value, text=text) == expected


def test_as_int_counts_digits_not_value():
    """The longest text taken is a sign and 20 digits (2**64 has 20); one more character is refused."""
    assert as_int("1" * (MAX_DIGITS - 1), text=True, high=10 ** 30) == int("1" * (MAX_DIGITS - 1))
    assert as_int("1" * (MAX_DIGITS + 1), text=True, high=10 ** 30) is None
    assert as_int(7, low=0, high=7) is None and as_int(6, low=0, high=7) == 6


def test_the_readers_take_their_numbers_through_it(tmp_path: Path):
    """Each reader that had its own int helper: huge or odd numbers are None or the file's fault, never a crash."""
    assert proc.parse_proc_data({"pid": 5, "state": "S", "ppid": HUGE_INT, "threads": []}).ppid is None
    with pytest.raises(FileFormatError):
        proc.parse_proc_data({"pid": HUGE_INT, "state": "S", "threads": []})
    assert proc.identity_from_environ({"RANK": "²", "WORLD_SIZE": HUGE_TEXT}).get("rank") is None
    with pytest.raises(FileFormatError, match="no id"):
        gdb.parse_gdb_data({"threads": [{"id": HUGE_TEXT}]})
    assert [t.thread_id for t in gdb.parse_gdb_data({"threads": [{"id": "7"}]})] == [7]
    with pytest.raises(FileFormatError, match="integer rank"):
        launcher.parse_launcher_data({"ranks": [{"rank": HUGE_INT, "pid": 1}]})
    assert flight_recorder._int(HUGE_TEXT) is None and flight_recorder._int("42") == 42
    assert [t.thread_id for t in native_stack.parse_native({"pid": HUGE_TEXT, "threads": [{"tid": "9"}]})] == [9]
    assert second_look._int(HUGE_INT, -1) == -1 and second_look._int(3) == 3
    assert c10d._int(HUGE_TEXT) is None and c10d._int("17") == 17


def test_a_hostile_environment_number_is_absent():
    """LOCAL_RANK/RANK from a process's environment: a superscript digit or 4,300 digits once raised ValueError."""
    for bad in ("²", HUGE_TEXT, "-1", "+1"):
        env = {"RANK": bad, "WORLD_SIZE": "2", "LOCAL_RANK": bad}
        assert not is_rank_env(env)
        assert rank_process(1, env, "h").local_rank is None
    assert rank_process(1, {"RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": " 1 "}, "h").local_rank == 1

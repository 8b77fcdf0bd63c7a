"""The one way to take an integer out of data: bounded before it is built.

Why one helper: every reader and collector meets numbers it did not write (a dump's counters,
a gdb thread id, an environment's LOCAL_RANK, a regex's digits), and the fuzz runs found the
same two failures in each hand-made copy: `int()` of a string of more than 4,300 digits raises
(Python's int-from-string limit), and a 5,000-digit int read from JSON cannot even be printed
later. So digits are counted before `int()` runs, and the value is checked against a range
before it is returned; anything else is None, never an exception.
"""

from __future__ import annotations

from typing import Any

#: a signed 64-bit integer's lowest value, and one past an unsigned 64-bit one's highest: any counter,
#: id or size a tool of ours reads fits between them
LOW_64 = -(1 << 63)
HIGH_64 = 1 << 64
#: the most characters of a number written as text: 20 digits (2**64 has 20) and a sign
MAX_DIGITS = 21


def as_int(value: Any, *, text: bool = False, low: int = LOW_64, high: int = HIGH_64) -> int | None:
    """`value` as an integer in [low, high), else None.

    An int counts (a bool does not: True is no pid). With `text`, so does a string of ASCII
    decimal digits (an optional sign, surrounding blanks ignored) of at most MAX_DIGITS
    characters; JSON readers leave `text` off, so a number written as a string stays a
    type error there, as it was."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        number = value
    elif text and isinstance(value, str):
        digits = value.strip()
        if not digits or len(digits) > MAX_DIGITS:
            return None
        body = digits[1:] if digits[0] in "+-" else digits
        if not (body.isascii() and body.isdigit()):
            return None
        number = int(digits)
    else:
        return None
    return number if low <= number < high else None

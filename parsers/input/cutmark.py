"""The line a collection writes where a byte cap cut a text file short, and how a reader knows it.

Why: a host's text files (the kernel log, `df`, `nvidia-smi -q`) are cut at a line boundary when the
host's byte cap is reached (forensics.collect.budget.write_within). The cut must not read as evidence: a
`df` line of seven words would be taken for a mount, a kernel line for a message. One marker, written
here and recognised here, says where the cut is and how many bytes were left out.
"""

from __future__ import annotations

#: what a cut line starts with (no tool prints it: the brackets and the project's name)
CUT_MARK = "[hang-forensics cut] "


def cut_line(dropped: int, why: str) -> bytes:
    """The marker line for `dropped` bytes left out, and why (a cap, in words), newline-ended."""
    return f"{CUT_MARK}{int(dropped)} bytes left out here ({why})\n".encode("utf-8", "replace")


def is_cut_line(line: str) -> bool:
    """True for a line a collection wrote where it cut the file (readers skip it; it is no evidence)."""
    return line.startswith(CUT_MARK)


def cut_bytes(lines: list[str]) -> int:
    """Bytes the cut lines among `lines` say were left out (0 for a file written whole)."""
    total = 0
    for line in lines:
        if is_cut_line(line):
            word = line[len(CUT_MARK):].split(" ", 1)[0]
            total += int(word) if word.isdigit() and len(word) < 20 else 0
    return total

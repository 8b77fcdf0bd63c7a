"""Frame labels for grouping: the part of a frame that is the same on every rank that is in the same place.

Two ranks in the same native function print different text for it: an unresolved
frame is its load address (`0x7f4d9662a1ca [libc.so.6]`), which ASLR makes differ in
every process, and a C++ frame spells out template arguments and parameter lists
(`c10d::ProcessGroupNCCL::collective<...{lambda(at::Tensor&, ...)#1}...>`), kilobytes
that say nothing about *where* the rank is. Merging stacks on the raw text gives one
branch per rank; merging on `short_label` folds them, and the short form is also what a
person wants to read.

Python frames (`func (file.py:12)`) are kept as they are: their text is already the place.
"""

from __future__ import annotations

import re

_ADDRESS = re.compile(r"^(?:0x)?[0-9a-fA-F]{6,}(?P<lib>\s+\[[^\]]*\])?$")
#: a frozen module's name is bounded ('importlib._bootstrap_external', 29 characters, the longest): an open `[^>]+`
#: scanned to the label's end from every ' (<frozen ' in it, which is quadratic (issue 31)
_PY_TAIL = re.compile(r" \((?:[^()]*\.pyx?|<frozen [^>]{1,256}>|<string>|<stdin>):\d+\)$")
_LIB_TAIL = re.compile(r"^(?P<head>.*?)(?P<lib> \[[^\[\]]*\]| \([^()<>]+:\d+\)| "
                       r"\([^()<>]+\.(?:c|cc|cpp|cxx|h|hpp|cu)\))$")
_KEEP_PARENS = ("(anonymous namespace)",)
MAX_SCAN = 20_000  #: labels longer than this are cut first: the scan below is linear, but data is hostile


def short_label(label: str) -> str:
    """The grouping key and display form of one frame label.

    '0x7f4d9662a1ca [libc.so.6]' -> '?? [libc.so.6]';
    'ns::f<int, std::vector<X> >(ns::A const&) [libx.so]' -> 'ns::f<…>(…) [libx.so]'.
    """
    label = label[:MAX_SCAN].strip()
    m = _ADDRESS.match(label)
    if m:
        return "??" + (f" [{m['lib'].strip()[1:-1]}]" if m["lib"] else "")
    if _PY_TAIL.search(label):
        return label  # a Python frame: its text is already the place
    lib = ""
    t = _LIB_TAIL.match(label)
    if t:
        label, lib = t["head"], t["lib"]
    return _fold_brackets(label) + lib


def _fold_brackets(name: str) -> str:
    """Template arguments -> '<…>', parameter lists -> '(…)'; operator names and the Python markers kept.

    One pass with a depth counter per bracket kind: linear time on any input, and
    unbalanced brackets (a cut label) simply fold to the end.
    """
    out: list[str] = []
    angle = paren = 0
    i, n = 0, len(name)
    while i < n:
        ch = name[i]
        if angle == 0 and paren == 0:
            kept = _kept_token(name, i)
            if kept:
                out.append(kept)
                i += len(kept)
                continue
        if ch == "<" and paren == 0:
            if angle == 0:
                out.append("<…>")
            angle += 1
        elif ch == ">" and paren == 0 and angle > 0:
            angle -= 1
        elif ch == "(" and angle == 0:
            if paren == 0:
                out.append("(…)")
            paren += 1
        elif ch == ")" and angle == 0 and paren > 0:
            paren -= 1
        elif angle == 0 and paren == 0:
            out.append(ch)
        i += 1
    text = "".join(out)
    return re.sub(r"\s+", " ", text).strip()


def _kept_token(name: str, i: int) -> str | None:
    """Bracketed words that are names, not arguments: '(anonymous namespace)', '<module>', 'operator<<'."""
    for word in _KEEP_PARENS + ("<module>", "<lambda>", "<locals>", "<listcomp>", "<dictcomp>", "<genexpr>"):
        if name.startswith(word, i):
            return word
    if name.startswith("operator", i):
        m = re.match(r"operator\s*(<<=|>>=|<=>|<<|>>|<=|>=|->\*|->|\(\)|\[\]|<|>)", name[i:])
        if m:
            return m.group(0)
    return None

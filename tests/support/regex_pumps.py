"""Adversarial inputs for a compiled regex, derived from its own syntax tree (used by test_regex_linear).

Why from the tree: backtracking blows up where a repeat's body can be matched in more than one
way by what follows it (`\\d*[ \\d:.]*[\\w.]+`, `.*?\\s*$`). For every repeat in the pattern, the
input is a string that matches everything before the repeat, then the repeat's body (and a few
generic characters: space, digit, letter, tab, punctuation) pumped many times, then a byte that
no pattern expects, so the match must fail after trying every split. And for every open repeat,
the text leading to it repeated on its own (`Xid ... 144,` many times for `Xid ... 144,.*Fatal`): a
search starts again at every copy and each attempt scans to the end, which is quadratic.
"""

from __future__ import annotations

import re

try:  # Python 3.11+
    from re import _constants as C, _parser as P
except ImportError:  # pragma: no cover - older Pythons
    import sre_constants as C  # type: ignore[no-redef]
    import sre_parse as P  # type: ignore[no-redef]

GENERIC = [" ", "0", "a", "\t", ":", ".", "-", "/", "=", ",", "[", "0 ", "a "]
_REPEATS = {C.MAX_REPEAT, C.MIN_REPEAT, getattr(C, "POSSESSIVE_REPEAT", C.MAX_REPEAT)}


def _char_in(items) -> str:
    """One character an IN set accepts."""
    negate = any(op is C.NEGATE for op, _ in items)
    probe = "a0 _x.:-/,=Z\t"
    allowed: list[str] = []
    for op, av in items:
        if op is C.LITERAL:
            allowed.append(chr(av))
        elif op is C.RANGE:
            allowed.append(chr(av[0]))
        elif op is C.CATEGORY:
            allowed.append({C.CATEGORY_DIGIT: "0", C.CATEGORY_SPACE: " ", C.CATEGORY_WORD: "a"}.get(av, "!"))
    if not negate:
        return allowed[0] if allowed else "a"
    sub = P.parse("[" + "".join(re.escape(c) for c in probe) + "]")  # noqa: F841 - probe each char below
    for c in probe:
        if not _in_matches(items, c):
            return c
    return "!"


def _in_matches(items, c: str) -> bool:
    negate = any(op is C.NEGATE for op, _ in items)
    hit = False
    for op, av in items:
        if op is C.LITERAL and chr(av) == c:
            hit = True
        elif op is C.RANGE and av[0] <= ord(c) <= av[1]:
            hit = True
        elif op is C.CATEGORY:
            hit |= {C.CATEGORY_DIGIT: c.isdigit(), C.CATEGORY_SPACE: c.isspace(),
                    C.CATEGORY_WORD: c.isalnum() or c == "_", C.CATEGORY_NOT_DIGIT: not c.isdigit(),
                    C.CATEGORY_NOT_SPACE: not c.isspace(),
                    C.CATEGORY_NOT_WORD: not (c.isalnum() or c == "_")}.get(av, False)
    return hit != negate


def example(items) -> str:
    """One string the sequence `items` matches (shortest repeats, first branches, lookarounds skipped)."""
    out = []
    for op, av in items:
        if op is C.LITERAL:
            out.append(chr(av))
        elif op is C.NOT_LITERAL:
            out.append("a" if chr(av) != "a" else "b")
        elif op is C.IN:
            out.append(_char_in(av))
        elif op is C.ANY:
            out.append("a")
        elif op in _REPEATS:
            lo, _hi, body = av
            out.append(example(body) * lo)
        elif op is C.SUBPATTERN:
            out.append(example(av[-1]))
        elif op is C.BRANCH:
            out.append(example(av[1][0]))
        elif op is getattr(C, "ATOMIC_GROUP", None):
            out.append(example(av))
    return "".join(out)


def pumps(pattern: re.Pattern) -> list[tuple[str, str]]:
    """(prefix, pump) pairs: a string that leads the pattern to each repeat, and what to repeat there."""
    src = pattern.pattern if isinstance(pattern.pattern, str) else pattern.pattern.decode("latin-1")
    tree = P.parse(src, pattern.flags & ~re.UNICODE if isinstance(pattern.pattern, bytes) else pattern.flags)
    found: list[tuple[str, str]] = []

    def walk(items, prefix: str) -> None:
        acc = prefix
        for op, av in items:
            if op in _REPEATS:
                _lo, hi, body = av
                if hi is C.MAXREPEAT or hi > 1:
                    for pump in dict.fromkeys([example(body), *GENERIC]):
                        if pump:
                            found.append((acc, pump))
                    if acc and hi is C.MAXREPEAT:  # the text leading to an open repeat, itself repeated: a
                        found.append(("", acc))      # search retries from every copy, each scanning to the end
                walk(body, acc)
            elif op is C.SUBPATTERN:
                walk(av[-1], acc)
            elif op is C.BRANCH:
                for alt in av[1]:
                    walk(alt, acc)
            elif op is getattr(C, "ATOMIC_GROUP", None):
                walk(av, acc)
            acc += example([(op, av)])

    walk(list(tree), "")
    for pump in GENERIC:
        found.append(("", pump))
    return list(dict.fromkeys(found))


def build(pattern: re.Pattern, prefix: str, pump: str, size: int):
    """`prefix` + `pump` repeated to about `size` characters + a character no pattern expects, as the
    pattern's type (str or bytes)."""
    text = prefix + pump * max(1, size // len(pump)) + "\x01"
    return text if isinstance(pattern.pattern, str) else text.encode("latin-1", "replace")

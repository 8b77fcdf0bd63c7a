"""Count the test asserts that pin exact wording: a whole sentence compared with what a program printed.

Why: issue 29 asks that tests assert behaviour (rank, class, host, fields) rather than whole sentences,
except where the sentence is the behaviour (a help text, an error message a script greps, the "not
established" rule). A wording change then breaks only the tests about wording. This script finds
the asserts that still pin a sentence, reading the tests with `ast` (importing nothing), so a change's
note can give the number before and after.

    python scripts/wording_asserts.py [--list] [--all] [ROOT]

A wording assert is an `assert` whose test holds a comparison (==, !=, in, not in) or a call of
startswith/endswith (or of tests/facts.py's `says`) with, as an operand, a string literal (or f-string)
of at least MIN_WORDS prose words.
An assert whose lines, or the line just above it, carry one of WORDING_MARKS in a comment (such as
`# wording is the behaviour: a help text` or `# verbatim input: the reader keeps NCCL's message`) is kept
on purpose and counted apart. --list prints each unmarked
one; --all also prints the kept ones.
"""

from __future__ import annotations

import ast
import re
import sys
from dataclasses import dataclass
from pathlib import Path

#: a literal of this many prose words or more reads as a sentence, not a token, a path or a field value
MIN_WORDS = 4
#: the comments that keep a sentence assert on purpose: the wording itself is what is tested (a help
#: text, an error message a script greps, a rule's words), or the sentence is the input's own, kept as read
WORDING_MARKS = ("wording is the behaviour", "verbatim input")
#: a prose word: letters (a capital first at most), once the punctuation around it is stripped
_WORD = re.compile(r"[A-Za-z][a-z]+(?:['-][a-z]+)*")


@dataclass(frozen=True)
class Hit:
    """One assert that compares output with a sentence."""

    path: Path
    line: int
    literal: str
    kept: bool


def _literal_text(node: ast.AST) -> str | None:
    """The text of a string literal or an f-string (its constant parts), else None."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(v.value for v in node.values if isinstance(v, ast.Constant) and isinstance(v.value, str))
    return None


def _is_sentence(text: str) -> bool:
    """True for prose: MIN_WORDS or more space-separated words (paths, ids, hex and code names are not)."""
    words = [t.strip("()[]{},.:;!?'\"`") for t in text.split()]
    return sum(1 for w in words if _WORD.fullmatch(w)) >= MIN_WORDS


def _sentence_operands(test: ast.AST) -> list[str]:
    """Sentence literals that the assert's test compares with something."""
    found = []
    for node in ast.walk(test):
        operands: list[ast.AST] = []
        if isinstance(node, ast.Compare) and any(isinstance(op, (ast.Eq, ast.NotEq, ast.In,
                                                                 ast.NotIn)) for op in node.ops):
            operands = [node.left, *node.comparators]
        elif isinstance(node, ast.Call) and isinstance(node.func,
                                                       ast.Attribute) and node.func.attr in ("startswith", "endswith"):
            operands = list(node.args)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "says":
            operands = list(node.args[1:])  # tests/facts.py: its facts must stay short too
        for operand in operands:
            # a tuple or list of sentences on one side: `x in ("...", "...")` or `all(s in out for s in [...])`
            parts = operand.elts if isinstance(operand, (ast.Tuple, ast.List, ast.Set)) else [operand]
            for part in parts:
                text = _literal_text(part)
                if text is not None and _is_sentence(text):
                    found.append(text)
    return found


def scan_file(path: Path) -> list[Hit]:
    """The wording asserts of one test file."""
    source = path.read_text(encoding="utf-8")
    lines = source.splitlines()
    try:
        tree = ast.parse(source, filename=str(path))
    except SyntaxError:
        return []
    hits = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Assert):
            continue
        sentences = _sentence_operands(node.test)
        if not sentences:
            continue
        near = lines[max(node.lineno - 2, 0): (node.end_lineno or node.lineno)]
        kept = any(mark in line for line in near for mark in WORDING_MARKS)
        hits.append(Hit(path, node.lineno, sentences[0], kept))
    return sorted(hits, key=lambda h: h.line)


def scan(root: Path) -> list[Hit]:
    """Every wording assert under root/tests (fixtures excluded: they are data, not tests)."""
    tests = root / "tests"
    hits = []
    for path in sorted(tests.rglob("*.py")):
        if "fixtures" in path.relative_to(tests).parts:
            continue
        hits.extend(scan_file(path))
    return hits


def main(argv: list[str]) -> int:
    show = "--list" in argv or "--all" in argv
    show_kept = "--all" in argv
    rest = [a for a in argv if not a.startswith("--")]
    root = Path(rest[0]) if rest else Path(__file__).resolve().parent.parent
    hits = scan(root)
    for hit in hits:
        if show and (not hit.kept or show_kept):
            tag = "kept " if hit.kept else ""
            print(f"{hit.path.relative_to(root)}:{hit.line}: {tag}{hit.literal[:90]!r}")
    pinned = sum(1 for h in hits if not h.kept)
    print(f"wording asserts: {pinned} pinned, {len(hits) - pinned} kept on purpose (marked "
          f"{' or '.join(map(repr, WORDING_MARKS))}), {len(hits)} in all")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

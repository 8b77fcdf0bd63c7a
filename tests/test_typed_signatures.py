"""No parameter named `ev` is typed `Any` in forensics/ or parsers/ (issue 43, item 3).

Why: `ev` is the evidence a judge, the arbiter or the digest reads (parsers.gather.evidence.Evidence). Typed `Any`, a
type checker accepts any attribute read on it, so a renamed field of the model breaks at run time only. The
first test checks that the scan finds each way of writing it on a source built here (so the last can fail).
"""

from __future__ import annotations

import ast

from hf_testpaths import REPO


def _any_in(annotation: ast.expr | None) -> bool:
    """Whether an annotation is or holds `Any` (`Any`, `Any | None`, `typing.Any`, `Optional[Any]`)."""
    if annotation is None:
        return False
    for node in ast.walk(annotation):
        if isinstance(node, ast.Name) and node.id == "Any":
            return True
        if isinstance(node, ast.Attribute) and node.attr == "Any":
            return True
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and _any_in(_parsed(node.value)):
            return True
    return False


def _parsed(text: str) -> ast.expr | None:
    try:
        return ast.parse(text, mode="eval").body
    except SyntaxError:
        return None


def ev_typed_any(source: str, where: str) -> list[str]:
    """'where:line name' of every function whose parameter `ev` is annotated with Any."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            a = node.args
            for arg in a.posonlyargs + a.args + a.kwonlyargs:
                if arg.arg == "ev" and _any_in(arg.annotation):
                    out.append(f"{where}:{node.lineno} {node.name}")
    return out


def test_the_scan_finds_every_spelling_of_an_any_typed_ev():
    source = (
        "import typing\nfrom typing import Any, Optional\n"
        "def a(ev: Any): ...\n"
        "def b(x, ev: Any = None): ...\n"
        "def c(*, ev: Any | None): ...\n"
        "def d(ev: typing.Any): ...\n"
        "def e(ev: 'Any'): ...\n"
        "def f(ev: Optional[Any]): ...\n"
        "class K:\n    def g(self, ev: Any) -> None: ...\n"
        "def ok(ev: 'Evidence', other: Any): ...\n"
    )
    found = ev_typed_any(source, "m.py")
    assert [f.split()[1] for f in found] == ["a", "b", "c", "d", "e", "f", "g"]


def test_no_ev_parameter_is_typed_any():
    found = []
    for pkg in ("forensics", "parsers"):
        for path in sorted((REPO / pkg).rglob("*.py")):
            found += ev_typed_any(path.read_text(), str(path.relative_to(REPO)))
    assert found == []

"""Print the module map of this checkout: lines per folder, import circles and upward imports.

Why: issue 29 asks that data flow one way (discover -> collect -> bundle -> read -> judge -> merge ->
present) with no import circle and no upward import, and that no function-local import hides one. This
script reads every import (top level and inside functions, from the source with `ast`, importing
nothing), so its before/after output shows the state of the tree in a change's note.

    python scripts/import_map.py [ROOT]

Circles: groups of modules that reach each other through imports (strongly connected components of
more than one module). Upward: an import from a stage folder to a later stage's folder (LAYERS below),
or from parsers/ to forensics/. Function-local imports are counted; those guarded by `except
ImportError` (optional dependencies) are listed apart. Imports under `if TYPE_CHECKING:` never run: they
name a type for an annotation (the model's `Findings` names the judges' result types), so they are no
edge of the runtime graph; they are listed apart, each one, so a reader sees every such reference.
"""

from __future__ import annotations

import ast
import sys
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

PACKAGES = ("parsers", "forensics", "nccl_patches")

#: the layer of a folder: an import from a lower number to a higher one runs upward. The order is that
#: of dependence: the bundle (its format, read and written by every later stage) sits below discovery,
#: discovery below collection, collection below the fleet, trigger and bisect, those below presentation
#: and the CLI. Folders not named here are judged for circles only.
LAYERS = {
    "parsers.input": 0,
    "parsers.model": 1,
    "parsers.readers": 2, "parsers.steps": 2, "parsers.stacks": 2, "parsers.knowledge": 2,
    "parsers.gather": 3,
    "parsers.judges": 4,
    "parsers.scale": 5,
    "parsers.pipeline": 6,
    "forensics.bundle": 10,
    "forensics.discover": 11,
    "forensics.collectors": 12, "forensics.collect": 12,
    "forensics.fleet": 13, "forensics.trigger": 13, "forensics.bisect": 13,
    "forensics.report": 14, "forensics.cli": 15,
}


def modules(root: Path) -> dict[str, Path]:
    """Dotted name -> file of every Python module of the packages."""
    out = {}
    for pkg in PACKAGES:
        for path in sorted((root / pkg).rglob("*.py")):
            rel = path.relative_to(root).with_suffix("")
            parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
            if "tests" in parts:
                continue
            out[".".join(parts)] = path
    return out


def _resolve(name: str, known: dict[str, Path]) -> str | None:
    """The longest known module that `name` names (a.b.c -> a.b when c is a function)."""
    while name:
        if name in known:
            return name
        name = name.rpartition(".")[0]
    return None


def _optional(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> bool:
    """True when the import sits in a `try` whose handlers catch ImportError (an optional dependency)."""
    while node in parents:
        node = parents[node]
        if isinstance(node, ast.Try):
            for h in node.handlers:
                names = ast.unparse(h.type) if h.type is not None else ""
                if "ImportError" in names or "ModuleNotFoundError" in names:
                    return True
    return False


def _type_only(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> bool:
    """True when the import sits under `if TYPE_CHECKING:` (or `typing.TYPE_CHECKING`): it never runs."""
    for p in _ancestors(node, parents):
        if isinstance(p, ast.If) and ast.unparse(p.test) in ("TYPE_CHECKING", "typing.TYPE_CHECKING"):
            return node in ast.walk(ast.Module(body=p.body, type_ignores=[]))
    return False


def imports(mod: str, path: Path, known: dict[str, Path]) -> list[tuple[str, bool, bool, int]]:
    """(target module, function-local, optional, line) of every import of ours in one file. `optional`
    is "optional" (guarded by except ImportError), "lazy" (a package's PEP 562 `__getattr__`, run only
    when the attribute is asked for, not on import), "type" (under `if TYPE_CHECKING:`, never run) or ""."""
    tree = ast.parse(path.read_text())
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    pkg = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
    found = []
    for node in ast.walk(tree):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = pkg.split(".")
                up = up[: len(up) - node.level + 1]
                base = ".".join(up + ([base] if base else []))
            targets = [f"{base}.{a.name}" for a in node.names] or [base]
        else:
            continue
        funcs = [p for p in _ancestors(node, parents) if isinstance(p, (ast.FunctionDef, ast.AsyncFunctionDef))]
        lazy = path.name == "__init__.py" and any(f.name == "__getattr__" for f in funcs)
        why = ("optional" if _optional(node, parents) else "lazy" if lazy
               else "type" if _type_only(node, parents) else "")
        for t in targets:
            hit = _resolve(t, known)
            if hit and hit != mod:
                found.append((hit, bool(funcs), why, node.lineno))
    return found


def _ancestors(node: ast.AST, parents: dict[ast.AST, ast.AST]):
    while node in parents:
        node = parents[node]
        yield node


def layer(mod: str) -> int | None:
    best = None
    for prefix, n in LAYERS.items():
        if mod == prefix or mod.startswith(prefix + "."):
            if best is None or len(prefix) > len(best[0]):
                best = (prefix, n)
    return best[1] if best else None


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on.add(start)
        while work:
            node, it = work[-1]
            nxt = next(it, None)
            if nxt is not None:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on.add(nxt)
                    work.append((nxt, iter(sorted(graph.get(nxt, ())))))
                elif nxt in on:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = []
                while True:
                    m = stack.pop()
                    on.discard(m)
                    group.append(m)
                    if m == node:
                        break
                if len(group) > 1:
                    out.append(sorted(group))
    return sorted(out)


@dataclass
class Survey:
    """What main() prints, as data (tests/forensics/discover/test_import_map.py asserts on it)."""

    lines: dict[str, int]  #: folder -> lines of Python
    modules: int
    circles: list[list[str]]
    upward: list[str]  #: "module:line -> target"
    local_hidden: list[str]  #: function-local imports of ours not guarded by except ImportError
    local_optional: list[str]
    lazy: list[str]
    type_only: list[str] = field(default_factory=list)  #: "module:line -> target" under `if TYPE_CHECKING:`


def survey(root: Path) -> Survey:
    """Read every import of the packages under `root` and judge the graph."""
    known = modules(root)
    lines: dict[str, int] = defaultdict(int)
    graph: dict[str, set[str]] = defaultdict(set)
    local_hidden, local_optional, lazy, upward, type_only = [], [], [], [], []
    for mod, path in known.items():
        folder = str(path.parent.relative_to(root))
        lines[folder] += len(path.read_text().splitlines())
        graph.setdefault(mod, set())
        for target, local, why, line in imports(mod, path, known):
            if why == "lazy":  # not an edge on import: listed apart
                lazy.append(f"{mod}:{line} -> {target}")
                continue
            if why == "type":  # never run: no edge, listed apart (and said where it names a later layer's type)
                later = (layer(mod) or 0) < (layer(target) or 0)
                type_only.append(f"{mod}:{line} -> {target}" + (" (a later layer's type)" if later else ""))
                continue
            graph[mod].add(target)
            if local:
                (local_optional if why else local_hidden).append(f"{mod}:{line} -> {target}")
            a, b = layer(mod), layer(target)
            wrong_pkg = mod.startswith("parsers") and target.startswith("forensics")
            if wrong_pkg or (a is not None and b is not None and b > a):
                if f"{mod}:{line} -> {target}" not in upward:
                    upward.append(f"{mod}:{line} -> {target}")
    return Survey(dict(lines), len(known), circles(graph), sorted(upward), local_hidden, local_optional, sorted(lazy),
                  sorted(type_only))


def main(argv: list[str]) -> int:
    root = Path(argv[1]) if len(argv) > 1 else Path(__file__).resolve().parents[1]
    found = survey(root)
    print("lines per folder:")
    for folder in sorted(found.lines):
        print(f"  {found.lines[folder]:>7}  {folder}/")
    print(f"  {sum(found.lines.values()):>7}  total ({found.modules} modules)")
    print(f"import circles: {len(found.circles)}")
    for g in found.circles:
        print("  " + " <-> ".join(g))
    print(f"upward imports: {len(found.upward)}")
    for u in found.upward:
        print("  " + u)
    print(f"function-local imports of our modules: {len(found.local_hidden)} (plus {len(found.local_optional)} "
          "guarded by except ImportError)")
    print(f"lazy package attributes (PEP 562 __getattr__, not counted as edges): {len(found.lazy)}")
    for item in found.lazy:
        print("  " + item)
    print(f"type-only imports (under if TYPE_CHECKING, never run, not counted as edges): {len(found.type_only)}")
    for item in found.type_only:
        print("  " + item)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

"""The shape of the code, held by CI so that it cannot erode again (issue 23, items 3 and 7).

* No function over 80 lines in nico/ or benchmarks/ (from ``def`` to its last line).
* No import cycle between nico's modules: an import inside a function counts as much as one at the
  top (moving an import into a function hides a cycle, it does not remove it); imports guarded by
  ``if TYPE_CHECKING:`` do not count, since they never run.

Retired words are held by test_words.py.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
GENERATED = re.compile(r"_pb2(_grpc)?\.pyi?$")
LONGEST_FUNCTION = 80


def sources(root: Path, top: str) -> Iterator[tuple[str, Path]]:
    """(dotted module name, path) of every hand-written module under ``root/top``."""
    for path in sorted((root / top).rglob("*.py")):
        if GENERATED.search(path.name):
            continue
        parts = path.relative_to(root).with_suffix("").parts
        yield ".".join(parts[:-1] if parts[-1] == "__init__" else parts), path


def long_functions(root: Path, tops: tuple[str, ...]) -> list[str]:
    found = []
    for top in tops:
        for _, path in sources(root, top):
            for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                    length = (node.end_lineno or node.lineno) - node.lineno + 1
                    if length > LONGEST_FUNCTION:
                        found.append(f"{path.relative_to(root)}:{node.lineno} {node.name} ({length} lines)")
    return found


def _type_checking_only(tree: ast.Module) -> set[int]:
    """Ids of the import nodes under ``if TYPE_CHECKING:``."""
    guarded: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            guarded |= {id(inner) for stmt in node.body for inner in ast.walk(stmt)}
    return guarded


def _imported(module: str, is_package: bool, node: ast.Import | ast.ImportFrom) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    base = node.module or ""
    if node.level:
        parent = module.split(".") if is_package else module.split(".")[:-1]
        parent = parent[: len(parent) - (node.level - 1)]
        base = ".".join(parent + ([base] if base else []))
    return [base] + [f"{base}.{alias.name}" for alias in node.names]


def import_graph(root: Path, top: str) -> dict[str, set[str]]:
    """Module -> the modules of ``top`` it imports (a name imported from a package that is itself a
    module counts as that module)."""
    modules = dict(sources(root, top))
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(), filename=str(path))
        guarded = _type_checking_only(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.Import | ast.ImportFrom) and id(node) not in guarded:
                for target in _imported(name, path.name == "__init__.py", node):
                    if target in modules and target != name:
                        graph[name].add(target)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_no_function_is_over_80_lines() -> None:
    assert long_functions(ROOT, ("nico", "benchmarks")) == []


def test_no_import_cycle_in_nico() -> None:
    assert cycles(import_graph(ROOT, "nico")) == []


def test_the_checks_find_what_they_look_for(tmp_path: Path) -> None:
    pkg = tmp_path / "nico"
    (pkg / "api").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "api" / "__init__.py").write_text("")
    (pkg / "a.py").write_text("def f():\n    from nico import b\n")
    (pkg / "b.py").write_text("from nico.api import c\n")
    (pkg / "api" / "c.py").write_text("from .. import a\n")
    (pkg / "d.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from nico import e\n")
    (pkg / "e.py").write_text("import nico.d\n" + "def long():\n" + "    x = 1\n" * 80)
    assert cycles(import_graph(tmp_path, "nico")) == [["nico.a", "nico.api.c", "nico.b"]]
    assert long_functions(tmp_path, ("nico",)) == ["nico/e.py:2 long (81 lines)"]

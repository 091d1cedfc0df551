"""The reconciler's shape (issue 23): modules of at most 400 lines and functions of at most 80 in
``nico/reconciler`` and ``nico/fabric``, no import cycle between their modules, a domain pass that
never reaches back into the scheduler, one name for the reconciler, and backends asked for their
declared capabilities, never probed by name, attribute or type anywhere in ``nico/``.

Each check reads the source (AST), and each is shown to fail on a file written for the purpose."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

NICO = Path(__file__).resolve().parents[2] / "nico"
RECONCILER = NICO / "reconciler"
FABRIC = NICO / "fabric"
GENERATED = {"nmx_c_pb2.py", "nmx_c_pb2.pyi", "nmx_c_pb2_grpc.py"}

MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 80
# The backend protocol's optional interfaces and the concrete backends: asking whether a backend is
# one of them is the probing Capabilities replaces.
BACKEND_TYPES = {
    "FabricBackend",
    "AsyncOperations",
    "PartitionEvents",
    "FabricHealth",
    "FabricTopology",
    "GpuTopology",
    "PartitionCounts",
    "StoredCredentials",
    "SiteInventory",
    "NmxcBackend",
    "NmxmBackend",
    "InProcessBackend",
}
RETIRED_CLASSES = {"Monitor", "MonitorMetrics"}


def sources(root: Path) -> Iterator[Path]:
    return (p for p in sorted(root.rglob("*.py")) if p.name not in GENERATED)


def parse(path: Path) -> ast.Module:
    return ast.parse(path.read_text(), filename=str(path))


def long_modules(root: Path) -> dict[str, int]:
    found = {}
    for path in sources(root):
        lines = len(path.read_text().splitlines())
        if lines > MAX_MODULE_LINES:
            found[str(path.relative_to(root))] = lines
    return found


def long_functions(root: Path) -> dict[str, int]:
    found = {}
    for path in sources(root):
        for node in ast.walk(parse(path)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = (node.end_lineno or node.lineno) - node.lineno + 1
                if lines > MAX_FUNCTION_LINES:
                    found[f"{path.relative_to(root)}:{node.name}"] = lines
    return found


def _mentions_backend(node: ast.expr) -> bool:
    return "backend" in ast.unparse(node).lower()


def _type_names(node: ast.expr) -> set[str]:
    if isinstance(node, ast.Tuple):
        return set().union(*(_type_names(e) for e in node.elts))
    if isinstance(node, ast.BinOp):  # isinstance(x, A | B)
        return _type_names(node.left) | _type_names(node.right)
    if isinstance(node, ast.Name):
        return {node.id}
    if isinstance(node, ast.Attribute):
        return {node.attr}
    return set()


def _is_probe(node: ast.AST) -> bool:
    if isinstance(node, ast.Compare):
        sides = (node.left, *node.comparators)
        kinds = [s for s in sides if isinstance(s, ast.Attribute) and s.attr == "kind"]
        return any(_mentions_backend(side.value) for side in kinds)
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.args):
        return False
    name, first = node.func.id, node.args[0]
    if name in ("getattr", "hasattr"):
        return _mentions_backend(first)
    if name != "isinstance" or len(node.args) != 2:
        return False
    return _mentions_backend(first) or bool(_type_names(node.args[1]) & BACKEND_TYPES)


def backend_probes(tree: ast.Module) -> list[str]:
    """Comparisons of a backend's ``kind``, ``getattr``/``hasattr`` on a backend, and ``isinstance``
    of a backend or against a backend type."""
    probes = [node for node in ast.walk(tree) if isinstance(node, ast.expr) and _is_probe(node)]
    return [f"{node.lineno}: {ast.unparse(node)}" for node in sorted(probes, key=lambda n: n.lineno)]


def probing_modules(root: Path) -> dict[str, list[str]]:
    found = {}
    for path in sources(root):
        if probes := backend_probes(parse(path)):
            found[str(path.relative_to(root))] = probes
    return found


def imported_modules(tree: ast.Module, package: str) -> set[str]:
    """Modules a module imports at its top level (``package``: the importing module's package)."""
    found: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parts, *([base] if base else [])])
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)
    return found


def scheduler_imports(path: Path) -> list[str]:
    tree = parse(path)
    return sorted(m for m in imported_modules(tree, "nico.reconciler") if m == "nico.reconciler.scheduler")


def module_name(path: Path) -> str:
    relative = path.relative_to(NICO.parent).with_suffix("")
    parts = list(relative.parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_cycle(paths: dict[str, Path]) -> list[str]:
    """One cycle among the given modules (name -> file), or []."""
    graph = {}
    for name, path in paths.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        graph[name] = sorted(m for m in imported_modules(parse(path), package) if m in paths and m != name)
    state: dict[str, int] = {}  # 1: on the path, 2: done
    stack: list[str] = []

    def visit(node: str) -> list[str]:
        state[node] = 1
        stack.append(node)
        for nxt in graph[node]:
            if state.get(nxt) == 1:
                return [*stack[stack.index(nxt) :], nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        stack.pop()
        state[node] = 2
        return []

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)):
            return cycle
    return []


def retired_names(root: Path) -> list[str]:
    found = [str(p.relative_to(root)) for p in sources(root) if p.name == "monitor.py"]
    for path in sources(root):
        for node in ast.walk(parse(path)):
            if isinstance(node, ast.ClassDef) and node.name in RETIRED_CLASSES:
                found.append(f"{path.relative_to(root)}:{node.name}")
    return found


# ---- the rules, on the code ---------------------------------------------------------------------


def test_no_reconciler_module_over_400_lines() -> None:
    assert long_modules(RECONCILER) == {}


def test_no_function_over_80_lines_in_the_reconciler_and_the_fabric() -> None:
    assert long_functions(RECONCILER) == {}
    assert long_functions(FABRIC) == {}


def test_no_module_probes_a_backend() -> None:
    assert probing_modules(NICO) == {}


def test_the_domain_pass_does_not_import_the_scheduler() -> None:
    assert scheduler_imports(RECONCILER / "domain_pass.py") == []


def test_no_import_cycle_in_the_reconciler_and_the_fabric() -> None:
    paths = {module_name(p): p for root in (RECONCILER, FABRIC) for p in sources(root)}
    assert import_cycle(paths) == []


def test_the_reconciler_has_one_name() -> None:
    assert retired_names(NICO) == []


# ---- each check can fail ------------------------------------------------------------------------


def test_the_checks_find_a_long_module_and_a_long_function(tmp_path: Path) -> None:
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_FUNCTION_LINES))
    (tmp_path / "long.py").write_text(f"def f() -> None:\n{body}\n" + "\n" * MAX_MODULE_LINES)
    (tmp_path / "short.py").write_text("def g() -> None:\n    pass\n")
    assert set(long_modules(tmp_path)) == {"long.py"}
    assert long_functions(tmp_path) == {"long.py:f": MAX_FUNCTION_LINES + 1}


def test_the_check_finds_each_way_of_probing_a_backend(tmp_path: Path) -> None:
    lines = [
        'if self.backend.kind == "nmxm": pass',
        'use = getattr(monitor.backend, "use_credentials", None)',
        "limit = 4 if isinstance(backend, FabricTopology) else None",
        "ok = isinstance(client, nmxm.NmxmBackend | PartitionEvents)",
        'ok = hasattr(self._backend, "site_gpus")',
        'fine = event.kind == "resync" and isinstance(exc, FabricError) and getattr(row, "x")',
    ]
    (tmp_path / "probe.py").write_text("\n".join(lines) + "\n")
    found = probing_modules(tmp_path)["probe.py"]
    assert [line.split(":")[0] for line in found] == ["1", "2", "3", "4", "5"]


def test_the_check_finds_the_scheduler_imported(tmp_path: Path) -> None:
    for line in (
        "from nico.reconciler.scheduler import Reconciler",
        "from nico.reconciler import scheduler",
        "import nico.reconciler.scheduler",
        "from . import scheduler",
    ):
        (tmp_path / "pass_.py").write_text(line + "\n")
        assert scheduler_imports(tmp_path / "pass_.py") == ["nico.reconciler.scheduler"], line
    (tmp_path / "pass_.py").write_text("from nico.reconciler import state\n")
    assert scheduler_imports(tmp_path / "pass_.py") == []


def test_the_check_finds_an_import_cycle(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("from nico.x import b\n")
    (tmp_path / "b.py").write_text("import nico.x.c\n")
    (tmp_path / "c.py").write_text("from nico.x.a import thing\n")
    paths = {"nico.x.a": tmp_path / "a.py", "nico.x.b": tmp_path / "b.py", "nico.x.c": tmp_path / "c.py"}
    assert import_cycle(paths) == ["nico.x.a", "nico.x.b", "nico.x.c", "nico.x.a"]
    (tmp_path / "c.py").write_text("def f() -> None:\n    from nico.x.a import thing\n")  # lazy: no cycle
    assert import_cycle(paths) == []


def test_the_check_finds_a_retired_name(tmp_path: Path) -> None:
    (tmp_path / "monitor.py").write_text("class MonitorMetrics:\n    pass\n")
    assert retired_names(tmp_path) == ["monitor.py", "monitor.py:MonitorMetrics"]

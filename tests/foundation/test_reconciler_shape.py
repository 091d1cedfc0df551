"""The reconciler's shape (issue 23): modules of at most 400 lines in ``nico/reconciler``, a domain
pass that never reaches back into the scheduler, and backends asked for their declared capabilities,
never probed by name, attribute or type anywhere in ``nico/``. (Function length and import cycles are
held for all of nico by test_shape.py, the reconciler's one name by test_words.py.)

Each check reads the source (AST), and each is shown to fail on a file written for the purpose."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

NICO = Path(__file__).resolve().parents[2] / "nico"
RECONCILER = NICO / "reconciler"
GENERATED = {"nmx_c_pb2.py", "nmx_c_pb2.pyi", "nmx_c_pb2_grpc.py"}

MAX_MODULE_LINES = 400
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


# ---- the rules, on the code ---------------------------------------------------------------------


def test_no_reconciler_module_over_400_lines() -> None:
    assert long_modules(RECONCILER) == {}


def test_no_module_probes_a_backend() -> None:
    assert probing_modules(NICO) == {}


def test_the_domain_pass_does_not_import_the_scheduler() -> None:
    assert scheduler_imports(RECONCILER / "domain_pass.py") == []


# ---- each check can fail ------------------------------------------------------------------------


def test_the_check_finds_a_long_module(tmp_path: Path) -> None:
    (tmp_path / "long.py").write_text("x = 1\n" * (MAX_MODULE_LINES + 1))
    (tmp_path / "short.py").write_text("x = 1\n" * MAX_MODULE_LINES)
    assert long_modules(tmp_path) == {"long.py": MAX_MODULE_LINES + 1}


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

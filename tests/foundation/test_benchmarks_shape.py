"""The benchmarks' shape: each script in ``benchmarks/`` stands alone on nico and ``bench_support`` (no
``tests`` import, no other benchmark script imported), has a row in ``benchmarks/README.md``'s table,
(function length: test_shape.py). Each check is shown to fail on files made to break it."""

from __future__ import annotations

import ast
import re
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
SUPPORT = "bench_support"


def scripts(folder: Path) -> list[Path]:
    """The benchmark scripts of ``folder``: every module but the support module."""
    return sorted(p for p in folder.glob("*.py") if p.stem != SUPPORT)


def imported(path: Path) -> list[tuple[int, str]]:
    """Every absolute module an import statement of ``path`` names, with its line."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module is not None:
            found.append((node.lineno, node.module))
            # ``from benchmarks import api_bench`` names the script in its names
            found += [(node.lineno, f"{node.module}.{alias.name}") for alias in node.names]
    return found


def forbidden_imports(folder: Path) -> dict[str, list[str]]:
    """Imports of ``tests`` or of another benchmark script, by script."""
    others = {p.stem for p in folder.glob("*.py")} - {SUPPORT}
    out: dict[str, list[str]] = {}
    for path in sorted(folder.glob("*.py")):
        bad = []
        for line, module in imported(path):
            top, _, rest = module.partition(".")
            if top == "tests":
                bad.append(f"{line}: {module} (the tests)")
            elif top in others or (top == "benchmarks" and rest.split(".")[0] in others):
                bad.append(f"{line}: {module} (another benchmark)")
        if bad:
            out[path.name] = sorted(set(bad))
    return out


def rows_missing(folder: Path) -> list[str]:
    """Scripts without a row of their own (a table line whose first cell names them) in README.md."""
    readme = folder / "README.md"
    text = readme.read_text() if readme.exists() else ""
    named = set()
    for line in text.splitlines():
        cells = line.strip().split("|")
        if line.lstrip().startswith("|") and len(cells) > 2:
            named.update(re.findall(r"`([\w.]+\.py)`", cells[1]))
    return [p.name for p in scripts(folder) if p.name not in named]


def test_no_benchmark_imports_the_tests_or_another_benchmark() -> None:
    assert forbidden_imports(BENCHMARKS) == {}


def test_every_benchmark_has_a_row_in_the_readme_table() -> None:
    assert scripts(BENCHMARKS), "no benchmark found"
    assert rows_missing(BENCHMARKS) == []


def test_the_import_check_finds_tests_and_other_benchmarks(tmp_path: Path) -> None:
    (tmp_path / "bench_support.py").write_text("import nico\n")
    (tmp_path / "reconcile_scale.py").write_text("from bench_support import free_port\nimport nico.db\n")
    (tmp_path / "soak.py").write_text(
        "from tests.support import factories\n"
        "import tests\n"
        "from reconcile_scale import seed\n"
        "import reconcile_scale\n"
        "from benchmarks import reconcile_scale as r\n"
        "from bench_support import expect\n"
        "import testsuite\n"
    )
    assert forbidden_imports(tmp_path) == {
        "soak.py": [
            "1: tests.support (the tests)",
            "1: tests.support.factories (the tests)",
            "2: tests (the tests)",
            "3: reconcile_scale (another benchmark)",
            "3: reconcile_scale.seed (another benchmark)",
            "4: reconcile_scale (another benchmark)",
            "5: benchmarks.reconcile_scale (another benchmark)",
        ]
    }


def test_the_readme_check_finds_a_script_without_a_row(tmp_path: Path) -> None:
    for name in ("bench_support.py", "api_bench.py", "soak.py", "fabric_bench.py"):
        (tmp_path / name).write_text("")
    (tmp_path / "README.md").write_text(
        "# Benchmarks\n\n`soak.py` and `fabric_bench.py` are named in prose only.\n\n"
        "| Benchmark | Measures |\n|---|---|\n| `api_bench.py` | requests; see `soak.py` |\n"
    )
    assert rows_missing(tmp_path) == ["fabric_bench.py", "soak.py"]

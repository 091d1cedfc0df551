"""The CLI's shape (issue 23, item 5), held so that it cannot erode again.

* Every typer app lives in ``nico/cli/``: no module elsewhere imports typer.
* The CLI calls services: no module of ``nico/cli/`` imports SQLAlchemy, the ORM models or the
  queries, not even for type hints. To reach the database it may use only ``OPENS_THE_DATABASE``:
  ``nico.db.engine`` (the URL, an engine and a transaction to hand to services or the fabric backend),
  ``nico.db.migrate`` (the schema) and ``nico.db.oneshot`` (a command's one transaction, and the
  database's failures by name for one-line errors).
* No import cycle, in the CLI as anywhere in nico: test_shape.py.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
OPENS_THE_DATABASE = {"nico.db.engine", "nico.db.migrate", "nico.db.oneshot"}


def modules(root: Path, top: str) -> dict[str, Path]:
    """Dotted name -> path of every module under ``root/top``."""
    found = {}
    for path in sorted((root / top).rglob("*.py")):
        parts = path.relative_to(root).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def imports(name: str, path: Path, *, type_checking: bool) -> list[tuple[int, str]]:
    """(line, module) of every import in the file, resolved to dotted names; ``from a import b``
    gives ``a`` and ``a.b``. Imports under ``if TYPE_CHECKING:`` are kept only when asked."""
    tree = ast.parse(path.read_text(), filename=str(path))
    guarded = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            guarded |= {id(inner) for stmt in node.body for inner in ast.walk(stmt)}
    found = []
    for node in ast.walk(tree):
        if id(node) in guarded and not type_checking:
            continue
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
                package = package[: len(package) - (node.level - 1)]
                base = ".".join([*package, base] if base else package)
            found += [(node.lineno, base)] + [(node.lineno, f"{base}.{a.name}") for a in node.names]
    return found


def typer_outside_the_cli(root: Path) -> list[str]:
    found = []
    for name, path in modules(root, "nico").items():
        if name == "nico.cli" or name.startswith("nico.cli."):
            continue
        lines = {line for line, module in imports(name, path, type_checking=True) if is_typer(module)}
        found += [f"{path.relative_to(root)}:{line}" for line in sorted(lines)]
    return found


def is_typer(module: str) -> bool:
    return module == "typer" or module.startswith("typer.")


def orm_in_the_cli(root: Path) -> list[str]:
    found = []
    for name, path in modules(root, "nico/cli").items():
        for line, module in imports(name, path, type_checking=True):
            if forbidden_in_the_cli(module):
                found.append(f"{path.relative_to(root)}:{line} {module}")
    return found


def forbidden_in_the_cli(module: str) -> bool:
    if module == "sqlalchemy" or module.startswith("sqlalchemy."):
        return True
    if module == "nico.db" or not module.startswith("nico.db."):
        return False  # ``from nico.db import migrate`` is judged by its second entry, nico.db.migrate
    return not any(module == allowed or module.startswith(allowed + ".") for allowed in OPENS_THE_DATABASE)


def test_every_typer_app_is_in_the_cli_package() -> None:
    assert typer_outside_the_cli(ROOT) == []


def test_the_cli_reaches_the_database_only_through_services() -> None:
    assert orm_in_the_cli(ROOT) == []


def test_the_checks_find_what_they_look_for(tmp_path: Path) -> None:
    cli = tmp_path / "nico" / "cli"
    cli.mkdir(parents=True)
    (tmp_path / "nico" / "__init__.py").write_text("")
    (tmp_path / "nico" / "sim").mkdir()
    (tmp_path / "nico" / "sim" / "commands.py").write_text("import typer\n\napp = typer.Typer()\n")
    (tmp_path / "nico" / "serving.py").write_text("def f():\n    from typer import Exit\n")
    (cli / "__init__.py").write_text("from nico.cli.app import app\n")
    (cli / "app.py").write_text("from nico.cli import admin\n")
    (cli / "admin.py").write_text(
        "from typing import TYPE_CHECKING\n"
        "from nico.db import engine, migrate, models\n"
        "if TYPE_CHECKING:\n"
        "    from sqlalchemy.ext.asyncio import AsyncSession\n"
        "    from nico.cli import app\n"
        "def f():\n"
        "    from nico.db.queries.inventory import machine\n"
        "    from .output import fail\n"
    )
    (cli / "output.py").write_text("from nico.db.oneshot import one_line\nfrom . import admin\n")
    assert typer_outside_the_cli(tmp_path) == ["nico/serving.py:2", "nico/sim/commands.py:1"]
    assert orm_in_the_cli(tmp_path) == [
        "nico/cli/admin.py:2 nico.db.models",
        "nico/cli/admin.py:4 sqlalchemy.ext.asyncio",
        "nico/cli/admin.py:4 sqlalchemy.ext.asyncio.AsyncSession",
        "nico/cli/admin.py:7 nico.db.queries.inventory",
        "nico/cli/admin.py:7 nico.db.queries.inventory.machine",
    ]


# Only these commands may make a database (start an embedded server in a new data directory): every
# other one takes the database that exists (bootstrap.existing_database_url_or_exit, with_session),
# so a mistyped NICO_DATA_DIR is one line instead of a new server and a traceback.
MAKES_THE_DATABASE = {"nico/cli/app.py": {"migrate", "serve", "reconcile"}, "nico/cli/demo.py": {"seed"}}
MAKER = "database_url_or_exit"


def callers_of(root: Path, name: str) -> dict[str, set[str]]:
    """Module path -> the top-level functions of ``nico/cli`` that call ``name`` (a module-level call
    counts as ``<module>``)."""
    found: dict[str, set[str]] = {}
    for path in sorted((root / "nico" / "cli").rglob("*.py")):
        tree = ast.parse(path.read_text(), filename=str(path))
        for top in tree.body:
            owner = top.name if isinstance(top, ast.FunctionDef | ast.AsyncFunctionDef) else "<module>"
            for node in ast.walk(top):
                if isinstance(node, ast.Call) and ast.unparse(node.func).split(".")[-1] == name:
                    found.setdefault(str(path.relative_to(root)), set()).add(owner)
    return found


def test_only_migrate_serve_reconcile_and_demo_make_a_database() -> None:
    found = callers_of(ROOT, MAKER)
    found.pop("nico/cli/bootstrap.py", None)  # where it is defined (and nothing there calls it)
    assert found == MAKES_THE_DATABASE


def test_the_maker_check_finds_a_new_caller(tmp_path: Path) -> None:
    cli = tmp_path / "nico" / "cli"
    cli.mkdir(parents=True)
    (cli / "adopt.py").write_text(
        "from nico.cli import bootstrap\n"
        "def adopt():\n"
        "    url = bootstrap.database_url_or_exit(settings)\n"
        "def show():\n"
        "    url = existing_database_url_or_exit(settings)\n"
    )
    assert callers_of(tmp_path, MAKER) == {"nico/cli/adopt.py": {"adopt"}}

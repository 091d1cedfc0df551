"""Layers: the API reaches the database only through services (api -> services -> db).

Handlers parse, authorize, call one service function and render what it returns; the only API modules
that may import :mod:`nico.db` are the ones that wire the app to its database, listed here."""

from __future__ import annotations

import ast
from pathlib import Path

API = Path(__file__).resolve().parents[2] / "nico" / "api"

# App wiring: building the engine, the raw pool, and the OpenAPI document without a database.
WIRING = {"app.py", "context.py", "openapi_yaml.py"}


def db_imports(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found += [f"{node.lineno}: import {a.name}" for a in node.names if is_db(a.name)]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module is not None:
            names = {a.name for a in node.names}
            if is_db(node.module) or (node.module == "nico" and "db" in names):
                found.append(f"{node.lineno}: from {node.module} import ...")
    return found


def is_db(module: str) -> bool:
    return module == "nico.db" or module.startswith("nico.db.")


def offenders(root: Path, allowed: set[str]) -> dict[str, list[str]]:
    out = {}
    for path in sorted(root.rglob("*.py")):
        name = str(path.relative_to(root))
        if name not in allowed and (found := db_imports(path)):
            out[name] = found
    return out


def test_no_router_imports_the_database_layer() -> None:
    assert offenders(API / "routers", set()) == {}


def test_only_app_wiring_imports_the_database_layer() -> None:
    assert offenders(API, WIRING) == {}


def test_no_domain_package_router_or_schemas_imports_the_database_layer() -> None:
    # nico/<domain>/router.py and schemas.py are API modules that live beside their service
    nico = API.parent
    found = {
        str(path.relative_to(nico)): imports
        for path in sorted(nico.glob("*/router.py")) + sorted(nico.glob("*/schemas.py"))
        if (imports := db_imports(path))
    }
    assert found == {}


def test_the_check_finds_a_database_import(tmp_path: Path) -> None:
    lines = ["from nico.db.models import Site", "import nico.db.enums", "from nico import db"]
    lines.append("import nico.dbx")
    (tmp_path / "handler.py").write_text("\n".join(lines) + "\n")
    expected = ["1: from nico.db.models import ...", "2: import nico.db.enums", "3: from nico import ..."]
    assert offenders(tmp_path, set()) == {"handler.py": expected}

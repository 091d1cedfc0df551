"""Layers: the API reaches the database only through services (api -> services -> db).

Handlers parse, authorize, call one service function and render what it returns; the only API modules
that may import :mod:`nico.db` are the ones that wire the app to its database, listed here."""

from __future__ import annotations

import ast
from pathlib import Path

API = Path(__file__).resolve().parents[2] / "nico" / "api"

# App wiring: building the engine, the raw pool, the OpenAPI document without a database, and the
# request's session with its one commit.
WIRING = {"app.py", "context.py", "deps.py", "openapi_yaml.py"}


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


# ---- domain packages (nico/<domain>/: router, schemas, service, views, queries, use-case modules) ----
# A router and its schemas reach the database only through the package's service: they import
# neither nico.db nor the package's queries. Every other module of the package (service, views,
# queries, use cases) knows nothing of HTTP: no nico.api, no FastAPI. Services never commit: the
# request scope does, once (nico.api.deps.get_session).

NICO = API.parent
HTTP_SIDE = {"router.py", "schemas.py"}


def domain_packages(root: Path) -> list[Path]:
    """The folders of ``root`` that are domain packages: those with a router or a service."""
    return sorted(p for p in root.iterdir() if (p / "router.py").exists() or (p / "service.py").exists())


def imported_modules(path: Path, package: str) -> list[tuple[int, str]]:
    """(line, module) of every import of ``path`` (a module of ``package``); ``from x import y`` counts
    as importing ``x`` and ``x.y`` (``y`` may be a module), relative imports resolved."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{parent}.{base}" if base else parent
            found.append((node.lineno, base))
            found += [(node.lineno, f"{base}.{a.name}") for a in node.names]
    return found


def under(module: str, prefix: str) -> bool:
    return module == prefix or module.startswith(prefix + ".")


def layer_offences(root: Path, package_prefix: str = "nico") -> dict[str, list[str]]:
    """What the domain packages under ``root`` import across their layers: module -> offences."""
    out: dict[str, list[str]] = {}
    for folder in domain_packages(root):
        package = f"{package_prefix}.{folder.name}"
        for path in sorted(folder.rglob("*.py")):
            if path.name in HTTP_SIDE:
                forbidden = ("nico.db", f"{package}.queries")
            else:
                forbidden = ("nico.api", "fastapi", "starlette")
            found = [
                f"{line}: {module}"
                for line, module in imported_modules(path, package)
                if any(under(module, f) for f in forbidden)
            ]
            if found:
                out[str(path.relative_to(root))] = sorted(set(found))
    return out


def commits(path: Path) -> list[int]:
    """The lines of ``path`` that call a ``commit`` method (``session.commit()``, ``conn.commit()``)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    return sorted(
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "commit"
    )


def committing_modules(root: Path) -> dict[str, list[int]]:
    """Modules of ``root``'s services folder and of its domain packages (their service and use-case
    modules) that commit."""
    paths = list((root / "services").rglob("*.py")) if (root / "services").exists() else []
    for folder in domain_packages(root):
        paths += [p for p in folder.rglob("*.py") if p.name not in HTTP_SIDE]
    return {str(p.relative_to(root)): found for p in sorted(paths) if (found := commits(p))}


def test_domain_packages_keep_their_layers() -> None:
    assert (NICO / "instance" / "router.py").exists()  # the check looks where the packages are
    assert layer_offences(NICO) == {}


def test_services_never_commit() -> None:
    assert committing_modules(NICO) == {}


def test_the_domain_package_checks_find_what_they_forbid(tmp_path: Path) -> None:
    shop = tmp_path / "shop"
    shop.mkdir()
    (shop / "router.py").write_text(
        "from nico.db.models import Site\nfrom nico.shop import queries\nfrom . import queries as q\n"
        "from nico.shop.service import buy\n"
    )
    (shop / "schemas.py").write_text("import nico.db.enums\n")
    (shop / "service.py").write_text(
        "from fastapi import HTTPException\nfrom nico.api.errors import x\nfrom nico.shop import queries\n"
        "async def buy(session):\n    await session.flush()\n    await session.commit()\n"
    )
    (shop / "creation.py").write_text("async def f(conn):\n    await conn.commit()\n")
    (shop / "queries.py").write_text("from nico.db.raw import commit\n")
    (tmp_path / "services").mkdir()
    (tmp_path / "services" / "vpc.py").write_text("async def f(s):\n    await s.commit()\n")
    (tmp_path / "notes").mkdir()  # no router, no service: not a domain package
    (tmp_path / "notes" / "x.py").write_text("from nico.db import raw\nfrom nico.api import deps\n")
    assert layer_offences(tmp_path) == {
        "shop/router.py": [
            "1: nico.db.models",
            "1: nico.db.models.Site",
            "2: nico.shop.queries",
            "3: nico.shop.queries",
        ],
        "shop/schemas.py": ["1: nico.db.enums"],
        "shop/service.py": [
            "1: fastapi",
            "1: fastapi.HTTPException",
            "2: nico.api.errors",
            "2: nico.api.errors.x",
        ],
    }
    assert committing_modules(tmp_path) == {
        "services/vpc.py": [2],
        "shop/creation.py": [2],
        "shop/service.py": [6],
    }

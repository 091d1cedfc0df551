"""Views hold plain values: no dataclass of a services module, nor of a domain package's ``views.py`` or
``service.py``, has a field typed with an ORM model.

A service returns views that the API's schemas are built from after the service is done; a view holding
an ORM row lets the API read (or lazily load) the database behind the service's back, and ties the wire
shape to the table's. Records (frozen dataclasses copied from rows, :mod:`nico.services.records`) are
what views hold instead."""

from __future__ import annotations

import ast
from pathlib import Path

NICO = Path(__file__).resolve().parents[2] / "nico"


def service_modules(root: Path) -> list[Path]:
    """``services/*.py`` and each domain package's ``views.py`` and ``service.py``."""
    packages = [*root.glob("*/views.py"), *root.glob("*/service.py")]
    return sorted(root.glob("services/*.py")) + sorted(packages)


def orm_names(tree: ast.Module) -> tuple[set[str], set[str]]:
    """The names a module binds to ORM models (``from nico.db.models import Site``), and the names it
    binds to the models module itself (``from nico.db import models``)."""
    models: set[str] = set()
    modules: set[str] = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.ImportFrom) or node.level != 0 or node.module is None:
            continue
        if node.module == "nico.db.models" or node.module.startswith("nico.db.models."):
            models |= {alias.asname or alias.name for alias in node.names}
        elif node.module == "nico.db":
            modules |= {alias.asname or alias.name for alias in node.names if alias.name == "models"}
    return models, modules


def is_dataclass(node: ast.ClassDef) -> bool:
    for decorator in node.decorator_list:
        target = decorator.func if isinstance(decorator, ast.Call) else decorator
        name = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", None)
        if name == "dataclass":
            return True
    return False


def names_orm(annotation: ast.expr, models: set[str], modules: set[str]) -> bool:
    if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):  # a quoted annotation
        return names_orm(ast.parse(annotation.value, mode="eval").body, models, modules)
    for node in ast.walk(annotation):
        if isinstance(node, ast.Name) and node.id in models:
            return True
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in modules:
            return True
    return False


def orm_fields(path: Path) -> list[str]:
    """``Class.field`` for each dataclass field of the module typed with an ORM model."""
    tree = ast.parse(path.read_text(), filename=str(path))
    models, modules = orm_names(tree)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and is_dataclass(node):
            for item in node.body:
                if (
                    isinstance(item, ast.AnnAssign)
                    and isinstance(item.target, ast.Name)
                    and names_orm(item.annotation, models, modules)
                ):
                    found.append(f"{node.name}.{item.target.id}")
    return found


def offenders(root: Path) -> dict[str, list[str]]:
    out = {}
    for path in service_modules(root):
        if found := orm_fields(path):
            out[str(path.relative_to(root))] = found
    return out


def test_no_view_holds_an_orm_object() -> None:
    assert offenders(NICO) == {}


def test_the_check_finds_an_orm_field(tmp_path: Path) -> None:
    (tmp_path / "services").mkdir()
    (tmp_path / "shelf").mkdir()
    (tmp_path / "services" / "vpc.py").write_text(
        "from dataclasses import dataclass\n"
        "from typing import Protocol\n"
        "from nico.db import models\n"
        "from nico.db.models import Site as SiteRow, Vpc\n\n"
        "@dataclass(frozen=True)\n"
        "class VpcView:\n"
        "    vpc: Vpc\n"
        "    site: SiteRow | None = None\n"
        "    others: list[models.Tenant] = ()\n"
        "    quoted: 'list[Vpc]' = ()\n"
        "    name: str = ''\n\n"
        "@dataclass\n"
        "class Plain:\n"
        "    vpc_id: int\n\n"
        "class NotADataclass(Protocol):\n"
        "    vpc: Vpc\n"
    )
    row = "from dataclasses import dataclass\nfrom nico.db.models import Vpc\n\n"
    row += "@dataclass\nclass {}:\n    vpc: Vpc\n"
    (tmp_path / "shelf" / "views.py").write_text(row.format("ShelfView"))
    (tmp_path / "shelf" / "service.py").write_text(row.format("Found"))
    (tmp_path / "shelf" / "checks.py").write_text(row.format("Context"))  # internal: not a view
    assert offenders(tmp_path) == {
        "services/vpc.py": ["VpcView.vpc", "VpcView.site", "VpcView.others", "VpcView.quoted"],
        "shelf/service.py": ["Found.vpc"],
        "shelf/views.py": ["ShelfView.vpc"],
    }

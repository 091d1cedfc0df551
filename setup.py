"""The Alembic migrations live in ``migrations/`` at the top of the repository (where ``alembic`` and
the developers look for them) and ship inside the wheel as the package data ``nico/_migrations``, so
an installed nico (wheel, ``pip install .``, pipx, the container image) migrates with no variable; the
stored functions and triggers those migrations apply ship with them as ``nico/db/sql/*.sql``.
Everything else is in pyproject.toml."""

from setuptools import find_namespace_packages, setup

setup(
    packages=[
        *find_namespace_packages(include=["nico", "nico.*"], exclude=["*.__pycache__"]),
        "nico._migrations",
        "nico._migrations.versions",
    ],
    package_dir={"nico._migrations": "migrations"},
    package_data={
        "nico": ["py.typed", "fabric/nmxc/*.pyi"],
        "nico.web.static": ["*.html", "*.js", "*.css"],
        "nico.db.sql": ["*.sql", "superseded/*.sql"],
        "nico._migrations": ["script.py.mako"],
    },
)

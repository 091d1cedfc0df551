"""How a command prints: progress and errors on stderr, results on stdout; a failure as one line
and an exit status; a listing as a table, JSON or YAML, exactly as ``--format`` asks."""

from __future__ import annotations

import enum
import json
from collections.abc import Sequence
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

console = Console(stderr=True)
listing = Console(width=200)  # wide, so a listing's uuids are never folded


def fail(message: str, code: int = 1, what: str = "error") -> typer.Exit:
    """Print ``what: message`` on stderr; raise what this returns to exit with ``code``."""
    console.print(f"[bold red]{what}:[/] {message}", highlight=False, soft_wrap=True)
    return typer.Exit(code)


class Format(enum.StrEnum):
    table = "table"
    json = "json"
    yaml = "yaml"


FormatOption = Annotated[Format, typer.Option("--format", case_sensitive=False, help="table, json or yaml.")]


def emit(rows: Sequence[dict[str, Any]] | dict[str, Any], fmt: Format, columns: Sequence[str] = ()) -> None:
    """Print ``rows`` as asked: a table of ``columns`` (a dict of lists: one table per key), JSON or
    YAML of everything."""
    if fmt is Format.json:
        print(json.dumps(rows, indent=2, default=str))
        return
    if fmt is Format.yaml:
        import yaml

        print(yaml.safe_dump(json.loads(json.dumps(rows, default=str)), sort_keys=False), end="")
        return
    if isinstance(rows, dict):
        scalars = {k: v for k, v in rows.items() if not isinstance(v, list)}
        if scalars:
            listing.print(_table([scalars], list(scalars)))
        for title, section in rows.items():
            if isinstance(section, list):
                listing.print(_table(section, list(section[0]) if section else ["(none)"], title=title))
        return
    listing.print(_table(rows, columns))


def _table(rows: Sequence[dict[str, Any]], columns: Sequence[str], title: str | None = None) -> Table:
    table = Table(*(c.upper().replace("_", " ") for c in columns), title=title)
    for row in rows:
        table.add_row(*(_cell(row.get(c)) for c in columns))
    return table


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, list | tuple | set | frozenset):
        return ",".join(str(v) for v in value)
    return str(value)

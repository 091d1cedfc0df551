"""``nico admin``: operator commands that work on the database directly (no API, no token).

``app`` is the ``admin`` group and ``machine_app`` its ``machine`` sub-group; other commands join
these groups from their own modules.
"""

from __future__ import annotations

import asyncio
import json
import sys
import uuid
from pathlib import Path
from typing import Annotated, Any

import typer
from pydantic import ValidationError
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn
from rich.table import Table

app = typer.Typer(
    name="admin",
    help="Operator commands that act on the database directly.",
    no_args_is_help=True,
    add_completion=False,
)
machine_app = typer.Typer(help="Machines: registration and NVLink info.", no_args_is_help=True)
app.add_typer(machine_app, name="machine")

console = Console(stderr=True)
out = Console()
SHOWN_IDS = 20


def fail(message: str, code: int = 1) -> typer.Exit:
    console.print(f"[bold red]error:[/] {message}", highlight=False)
    return typer.Exit(code)


def read_document(source: str) -> Any:
    try:
        raw = sys.stdin.read() if source == "-" else Path(source).read_text()
    except OSError as exc:
        raise fail(f"cannot read {source}: {exc.strerror or exc}", 2) from None
    try:
        return json.loads(raw)
    except ValueError as exc:
        raise fail(f"{source} is not valid JSON: {exc}", 2) from None


def merged_body(document: Any, site_id: str, instance_type_id: str | None) -> dict[str, Any]:
    """The API body from the file, with the options filled in (a file value must agree with them)."""
    if not isinstance(document, dict):
        raise fail('the file must hold the API body: {"siteId": ..., "machines": [...]}', 2)
    body = dict(document)
    for key, value in (("siteId", site_id), ("instanceTypeId", instance_type_id)):
        given = body.get(key)
        if value is not None and given is not None and str(given).lower() != value.lower():
            raise fail(f"{key} in the file ({given}) differs from the command line ({value})", 2)
        if value is not None:
            body[key] = value
    return body


def parse_body(body: dict[str, Any]) -> Any:
    """Validate the body one machine at a time, so a large file shows progress."""
    from nico.api.schemas.machine import MachineRecordRequest, MachineRegistrationRequest

    machines = body.get("machines")
    if not isinstance(machines, list):
        raise fail('"machines" must be a list of machines', 2)
    parsed = []
    with Progress(
        SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), console=console
    ) as progress:
        task = progress.add_task("checking machines", total=len(machines))
        for i, item in enumerate(machines):
            try:
                parsed.append(MachineRecordRequest.model_validate(item))
            except ValidationError as exc:
                first = exc.errors()[0]
                where = ".".join(str(p) for p in first["loc"])
                raise fail(f"machines.{i}{'.' + where if where else ''}: {first['msg']}", 2) from None
            progress.advance(task)
    try:
        return MachineRegistrationRequest.model_validate({**body, "machines": []}).model_copy(
            update={"machines": parsed}
        )
    except ValidationError as exc:
        raise fail(f"invalid body: {exc.errors()[0]['msg']}", 2) from None


async def run_registration(url: str, site: uuid.UUID, itype: uuid.UUID | None, records: list[Any]) -> Any:
    from nico.db.engine import make_engine, make_session_factory, transaction
    from nico.services.inventory import register_machines

    engine = make_engine(url, pool_size=1)
    try:
        async with transaction(make_session_factory(engine)) as session:
            return await register_machines(session, site_id=site, machines=records, instance_type_id=itype)
    finally:
        await engine.dispose()


def summary(result: Any) -> Table:
    table = Table(title="machine registration")
    table.add_column("outcome")
    table.add_column("machines", justify="right")
    table.add_column("ids")
    for name in ("created", "updated", "unchanged"):
        ids: list[str] = getattr(result, name)
        shown = ", ".join(ids[:SHOWN_IDS]) + (
            f", … (+{len(ids) - SHOWN_IDS})" if len(ids) > SHOWN_IDS else ""
        )
        table.add_row(name, str(len(ids)), shown)
    return table


@machine_app.command("register")
def register(
    site_id: Annotated[str, typer.Option("--site-id", help="Site the machines are at.")],
    file: Annotated[
        str, typer.Option("--file", help="JSON body of POST /machine/registration; - reads stdin.")
    ],
    instance_type_id: Annotated[
        str | None, typer.Option("--instance-type-id", help="Associate the machines with this instance type.")
    ] = None,
) -> None:
    """Create or update machines at a site, all or nothing (the registration API's rules)."""
    from nico.cli import database_url_or_exit, settings_or_exit
    from nico.services.errors import ServiceError

    site = _uuid_option("--site-id", site_id)
    itype = _uuid_option("--instance-type-id", instance_type_id) if instance_type_id else None
    body = parse_body(merged_body(read_document(file), site_id, instance_type_id))
    try:
        records = body.records()
    except ServiceError as exc:
        raise fail(_describe(exc), 2) from None
    settings = settings_or_exit()
    url = database_url_or_exit(settings)
    try:
        with console.status(f"registering {len(records)} machines"):
            result = asyncio.run(run_registration(url, site, itype, records))
    except ServiceError as exc:
        raise fail(_describe(exc)) from None
    out.print(summary(result))


def _uuid_option(name: str, value: str) -> uuid.UUID:
    try:
        return uuid.UUID(value)
    except ValueError:
        raise fail(f"{name} must be a UUID, got {value!r}", 2) from None


def _describe(exc: Any) -> str:
    details = "".join(f"\n  {key}: {value}" for key, value in (exc.data or {}).items())
    return f"{exc.message} ({exc.status}){details}"

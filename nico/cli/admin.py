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
from typing import TYPE_CHECKING, Annotated, Any

import typer
from pydantic import ValidationError
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn
from rich.table import Table

from nico.cli.admin_decommission import register as register_decommission
from nico.cli.admin_nvlink import AdminOptions
from nico.cli.admin_nvlink import register as register_nvlink_commands
from nico.cli.admin_plan import register as register_plan_command
from nico.cli.admin_quota import quota_app
from nico.cli.bootstrap import (
    existing_database_url_or_exit,
    run_in_transaction,
    settings_or_exit,
    with_session,
)
from nico.cli.output import Format, FormatOption, console, emit, fail
from nico.cli.takeover import register as register_takeover_commands
from nico.config import ConfigError
from nico.services.errors import ServiceError

if TYPE_CHECKING:
    from nico.config import Settings
    from nico.reconciler.discovery import DiscoveredMachine
    from nico.services.admin_reads import FabricAddress

app = typer.Typer(
    name="admin",
    help="Operator commands that act on the database directly.",
    no_args_is_help=True,
    add_completion=False,
)
machine_app = typer.Typer(help="Machines: registration and NVLink info.", no_args_is_help=True)
app.add_typer(machine_app, name="machine")
endpoints_app = typer.Typer(help="Rack chassis serial → NMX-C endpoint mappings.", no_args_is_help=True)
app.add_typer(endpoints_app, name="nvlink-nmxc-endpoints")
credential_app = typer.Typer(help="Credentials of fabric managers.", no_args_is_help=True)
app.add_typer(credential_app, name="credential")
nvlink_info_app = typer.Typer(
    help="A machine's NVLink GPU mapping, read from the fabric.", no_args_is_help=True
)
machine_app.add_typer(nvlink_info_app, name="nvlink-info")
register_nvlink_commands(app)
register_plan_command(app)
register_takeover_commands(app)


@app.callback()
def admin(
    ctx: typer.Context,
    cloud_unsafe_op: Annotated[
        str | None,
        typer.Option(
            "--cloud-unsafe-op",
            help="Your user name, for the commands that change a tenant's objects (the reference's "
            "global option; the commands take it too).",
        ),
    ] = None,
) -> None:
    """Operator commands that act on the database directly."""
    ctx.obj = AdminOptions(cloud_unsafe_op=cloud_unsafe_op)


app.add_typer(quota_app, name="quota")
register_decommission(machine_app)

out = Console()
SHOWN_IDS = 20
ChassisSerial = Annotated[str, typer.Option(help="Rack chassis serial.")]
EndpointUrl = Annotated[str, typer.Option(help="NMX-C URL, e.g. https://host:50051")]


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
    from nico.inventory.schemas import MachineRecordRequest, MachineRegistrationRequest

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


def run_registration(url: str, site: uuid.UUID, itype: uuid.UUID | None, records: list[Any]) -> Any:
    from nico.inventory.registration import register_machines

    return run_in_transaction(
        url,
        lambda session: register_machines(session, site_id=site, machines=records, instance_type_id=itype),
    )


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
    output: FormatOption = Format.table,
) -> None:
    """Create or update machines at a site, all or nothing (the registration API's rules)."""
    site = _uuid_option("--site-id", site_id)
    itype = _uuid_option("--instance-type-id", instance_type_id) if instance_type_id else None
    body = parse_body(merged_body(read_document(file), site_id, instance_type_id))
    try:
        records = body.records()
    except ServiceError as exc:
        raise fail(_describe(exc), 2) from None
    settings = settings_or_exit()
    url = existing_database_url_or_exit(settings)
    try:
        with console.status(f"registering {len(records)} machines"):
            result = run_registration(url, site, itype, records)
    except ServiceError as exc:
        raise fail(_describe(exc)) from None
    if output is Format.table:
        out.print(summary(result))
    else:
        emit({name: getattr(result, name) for name in ("created", "updated", "unchanged")}, output)


MACHINE_COLUMNS = (
    "id", "status", "site_id", "instance_id", "domain_uuid", "chassis_serial", "tray_index", "gpus"
)  # fmt: skip


@machine_app.command("list")
def machine_list(
    site_id: Annotated[str | None, typer.Option("--site-id", help="Only this site's machines.")] = None,
    output: FormatOption = Format.table,
) -> None:
    """List machines: where each is, what it holds, its NVLink domain and tray (JSON and YAML: every
    field, the instance type and hostname too)."""
    from nico.services import admin_reads

    site = _uuid_option("--site-id", site_id) if site_id is not None else None
    emit(with_session(lambda s: admin_reads.machines(s, site)), output, MACHINE_COLUMNS)


def _uuid_option(name: str, value: str) -> uuid.UUID:
    try:
        return uuid.UUID(value)
    except ValueError:
        raise fail(f"{name} must be a UUID, got {value!r}", 2) from None


def _describe(exc: Any) -> str:
    details = "".join(f"\n  {key}: {value}" for key, value in (exc.data or {}).items())
    return f"{exc.message} ({exc.status}){details}"


@endpoints_app.command("show")
def endpoints_show(
    chassis_serial: Annotated[str | None, typer.Option(help="Show only this chassis serial.")] = None,
    output: FormatOption = Format.table,
) -> None:
    """List chassis serial → endpoint mappings."""
    from nico.services import fabric_registry

    rows = with_session(lambda s: fabric_registry.list_endpoints(s, chassis_serial))
    found = [{"chassis_serial": r.chassis_serial, "endpoint": r.endpoint} for r in rows]
    emit(found, output, ("chassis_serial", "endpoint"))


DOMAIN_COLUMNS = ("uuid", "consecutive_failures", "gpus_without_home", "last_error_at", "last_error")


@app.command("nvlink-domains")
def nvlink_domains(output: FormatOption = Format.json) -> None:
    """NVLink domains with the reconciler's last error in full (endpoint addresses included: tenants
    see it only in their own terms)."""
    from nico.services import admin_reads

    emit(with_session(admin_reads.nvlink_domains), output, DOMAIN_COLUMNS)


@endpoints_app.command("create")
def endpoints_create(
    chassis_serial: ChassisSerial,
    endpoint: EndpointUrl,
) -> None:
    """Map a chassis serial to an NMX-C endpoint."""
    from nico.services import fabric_registry

    with_session(lambda s: fabric_registry.create_endpoint(s, chassis_serial, endpoint))
    print(f"created {chassis_serial} -> {endpoint}")


@endpoints_app.command("update")
def endpoints_update(
    chassis_serial: ChassisSerial,
    endpoint: EndpointUrl,
) -> None:
    """Point a chassis serial at another NMX-C endpoint."""
    from nico.services import fabric_registry

    with_session(lambda s: fabric_registry.update_endpoint(s, chassis_serial, endpoint))
    print(f"updated {chassis_serial} -> {endpoint}")


@endpoints_app.command("delete")
def endpoints_delete(chassis_serial: ChassisSerial) -> None:
    """Remove a chassis serial's mapping."""
    from nico.services import fabric_registry

    with_session(lambda s: fabric_registry.delete_endpoint(s, chassis_serial))
    print(f"deleted {chassis_serial}")


@credential_app.command("add-nmx-m")
def credential_add_nmxm(
    username: Annotated[str, typer.Option(help="NMX-M user.")],
    password: Annotated[
        str,
        typer.Option(prompt=True, hide_input=True, confirmation_prompt=True, help="Prompted when omitted."),
    ],
) -> None:
    """Store NMX-M basic-auth credentials (the password is never printed or logged)."""
    from nico.services import fabric_registry

    with_session(lambda s: fabric_registry.set_nmxm_credentials(s, username, password))
    print(f"stored NMX-M credentials for user {username}")


@credential_app.command("delete-nmx-m")
def credential_delete_nmxm(
    username: Annotated[
        str | None, typer.Option(help="Only when they are this user's (the reference's shape).")
    ] = None,
) -> None:
    """Forget the stored NMX-M credentials."""
    from nico.services import fabric_registry

    removed = with_session(lambda s: fabric_registry.delete_nmxm_credentials(s, username))
    print("deleted NMX-M credentials" if removed else "no NMX-M credentials were stored")


@nvlink_info_app.command("show")
def nvlink_info_show(
    machine_id: Annotated[str, typer.Argument(help="Machine id.")], output: FormatOption = Format.json
) -> None:
    """Print the NVLink info nico has recorded for a machine (JSON, as the reference prints it)."""
    from nico.services import admin_reads

    emit(with_session(lambda s: admin_reads.machine_nvlink_info(s, machine_id)), output)


@nvlink_info_app.command("populate")
def nvlink_info_populate(
    machine_id: Annotated[str, typer.Argument(help="Machine id.")],
    update_db: Annotated[
        bool, typer.Option("--update-db", help="Write what was read into the database.")
    ] = False,
    chassis_serial: Annotated[
        str | None, typer.Option(help="Chassis serial (default: the recorded one).")
    ] = None,
    tray_index: Annotated[
        int | None, typer.Option(help="Compute tray index (default: the recorded one).")
    ] = None,
    output: FormatOption = Format.json,
) -> None:
    """Read a machine's GPUs (device ids, GUIDs, slots) and domain from the fabric."""
    from nico.inventory import location
    from nico.services import admin_reads

    settings = settings_or_exit()
    address = with_session(
        lambda s: admin_reads.fabric_address(
            s, settings.nvlink_config, machine_id, chassis_serial, tray_index
        )
    )
    found = _read_from_fabric(settings, address)
    # The reference's line before its JSON; with another format on stderr, so stdout parses.
    say = print if output is Format.json else console.print
    if update_db:
        with_session(lambda s: location.replace_nvlink_info(s, machine_id, found.nvlink_info()))
        say("Updated nvlink_info in db with the following nvlink-info:")
    else:
        say("\nUse --update-db option to apply the following nvlink-info:")
    emit(found.as_json(), output)


def _read_from_fabric(settings: Settings, address: FabricAddress) -> DiscoveredMachine:
    """The machine at ``address`` as the fabric reports it; no answer is one line, exit 1."""
    from nico.db.engine import make_engine
    from nico.fabric.backend import FabricError
    from nico.reconciler.discovery import discover_machine
    from nico.reconciler.runtime import open_backend

    async def read() -> DiscoveredMachine | None:
        # NMX-M's stored credentials are in the database
        engine = make_engine(existing_database_url_or_exit(settings), pool_size=2)
        try:
            backend = await open_backend(settings, engine)
            try:
                return await discover_machine(
                    backend, address.endpoints, address.chassis_serial, address.tray
                )
            finally:
                await backend.close()
        finally:
            await engine.dispose()

    try:
        found = asyncio.run(read())
    except ConfigError as exc:
        raise fail(str(exc)) from None
    except FabricError as exc:
        raise fail(f"fabric error: {exc.message}") from None
    if found is None or not found.gpus:
        raise fail(f"the fabric reports no GPUs for chassis {address.chassis_serial} tray {address.tray}")
    return found

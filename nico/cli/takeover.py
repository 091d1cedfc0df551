"""Taking over a live site's NVLink partitions: ``nico admin logical-partition adopt`` (a foreign
partition becomes a tenant's logical partition) and ``nico admin import`` (a NICo site's objects of
one org, with their ids). Both read the fabric, change nothing on it, and work through
:mod:`nico.adoption`. Registered on the ``admin`` app by :func:`register`."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer

from nico.cli.admin_nvlink import logical_partition_app
from nico.cli.bootstrap import existing_database_url_or_exit, schema_or_exit, settings_or_exit
from nico.cli.options import org_option
from nico.cli.output import Format, FormatOption, console, emit, fail

if TYPE_CHECKING:
    from nico.adoption.views import Adoption, Imported
    from nico.config import Settings

T = TypeVar("T")


def register(app: typer.Typer) -> None:
    """``logical-partition adopt`` and ``import`` on the ``admin`` app."""
    logical_partition_app.command("adopt")(adopt)
    app.command("import")(import_site)


def _uuid(name: str, value: str) -> uuid.UUID:
    try:
        return uuid.UUID(value)
    except ValueError:
        raise fail(f"{name} must be a UUID, not {value!r}", 2) from None


def _run(work: Callable[[Settings, str], Coroutine[Any, Any, T]]) -> T:
    """``work`` with the settings and the database URL; a refusal, a fabric or source failure and an
    unreachable database are each one line, exit 1."""
    from nico.adoption.source import SourceError
    from nico.db.oneshot import DatabaseError, one_line
    from nico.fabric.backend import FabricError
    from nico.services.errors import ServiceError

    settings = settings_or_exit()
    url = existing_database_url_or_exit(settings)
    schema_or_exit(url)
    try:
        return asyncio.run(work(settings, url))
    except ServiceError as exc:
        raise fail(exc.message) from None
    except FabricError as exc:
        raise fail(f"fabric error: {exc.message}") from None
    except SourceError as exc:
        raise fail(f"source: {exc}") from None
    except DatabaseError as exc:
        raise fail(one_line(exc)) from None


def adopt(
    org: Annotated[str, org_option("Tenant org the partition becomes a logical partition of.")],
    domain_uuid: Annotated[str, typer.Option(help="NVLink domain the partition is on.")],
    nmx_partition_id: Annotated[int, typer.Option(help="The partition's NMX partition id.")],
    name: Annotated[
        str | None, typer.Option(help="Name of a new logical partition (default: the fabric's).")
    ] = None,
    logical_partition_id: Annotated[
        str | None,
        typer.Option(help="The logical partition it becomes (default: the one its name gives, or new)."),
    ] = None,
    vpc_id: Annotated[
        str | None,
        typer.Option(help="VPC of the instances made for it (default: the org's VPC at the site)."),
    ] = None,
    output: FormatOption = Format.table,
) -> None:
    """Make a partition nico did not make a tenant's logical partition, with an instance on each
    machine whose GPUs it holds, without changing the fabric."""
    from nico.adoption import takeover
    from nico.adoption.views import AdoptRequest

    domain = _uuid("--domain-uuid", domain_uuid)
    request = AdoptRequest(
        org,
        domain,
        nmx_partition_id,
        name,
        _uuid("--logical-partition-id", logical_partition_id) if logical_partition_id else None,
        _uuid("--vpc-id", vpc_id) if vpc_id else None,
    )
    done = _run(lambda settings, url: takeover.adopt_partition(settings, url, request))
    _print_adoption(done, output)


def _print_adoption(done: Adoption, output: Format) -> None:
    """The outcome: a line and a table of the instances, or the whole of it as JSON or YAML."""
    rows = [
        {
            "instance": str(i.id),
            "machine": i.machine_id,
            "device_instances": list(i.device_instances),
            "new_instance": i.created,
        }
        for i in done.instances
    ]
    if output is not Format.table:
        whole = {
            "logical_partition_id": str(done.logical_partition_id),
            "logical_partition_name": done.logical_partition_name,
            "domain_uuid": str(done.domain_uuid),
            "nmx_partition_id": done.nmx_partition_id,
            "fabric_name": done.fabric_name,
            "done_before": done.done_before,
            "instances": rows,
        }
        emit(whole, output)
        return
    where = f"partition {done.nmx_partition_id} ({done.fabric_name}) of domain {done.domain_uuid}"
    lp = f"logical partition {done.logical_partition_id} ({done.logical_partition_name})"
    print(f"{where} is already {lp}: nothing to do" if done.done_before else f"adopted {where} as {lp}")
    if rows:
        emit(rows, output, list(rows[0]))


def import_site(
    source_url: Annotated[str, typer.Option("--from", help="URL of the NICo site (its API root or host).")],
    token: Annotated[
        str, typer.Option(envvar="NICO_SOURCE_TOKEN", help="Bearer token of the org at the source.")
    ],
    org: Annotated[str, org_option("The org whose objects are taken over (the same name here).")],
    output: FormatOption = Format.table,
) -> None:
    """Take over a NICo site's logical partitions, VPCs and instances of one org with their ids,
    matched to this site's machines by the GPUs the fabric shows in their partitions. Safe to run
    again: what is here already is left as it is."""
    from rich.progress import Progress, SpinnerColumn, TextColumn

    from nico.adoption import takeover
    from nico.adoption.source import NicoSource

    async def work(settings: Settings, url: str) -> list[Imported]:
        with Progress(SpinnerColumn(), TextColumn("{task.description}"), console=console) as bar:
            task = bar.add_task("importing", total=None)

            def seen(result: Imported) -> None:
                bar.update(task, description=f"{result.outcome} {result.kind} {result.name}")

            return await takeover.import_org(settings, url, NicoSource(source_url, token, org), org, seen)

    results = _run(work)
    rows = [
        {"kind": r.kind, "id": str(r.id), "name": r.name, "outcome": r.outcome, "why": r.why} for r in results
    ]
    emit(rows, output, ["kind", "id", "name", "outcome", "why"])
    counts = takeover.summary(results)
    console.print(", ".join(f"{n} {outcome}" for outcome, n in counts.items()), highlight=False)

"""``nico admin quota show``: each tenant's usage at each site against its quotas (``[quotas]``)."""

from __future__ import annotations

import dataclasses
import uuid
from typing import Annotated

import typer

from nico.cli.bootstrap import settings_or_exit, with_session
from nico.cli.output import Format, FormatOption, emit, fail

quota_app = typer.Typer(help="Tenants' quotas: usage against limits, per site.", no_args_is_help=True)

COLUMNS = (
    "org",
    "site_name",
    "logical_partitions",
    "logical_partitions_limit",
    "nvlink_changes_in_flight",
    "nvlink_changes_in_flight_limit",
)


@quota_app.command("show")
def show(
    org: Annotated[str | None, typer.Option(help="Only this tenant org.")] = None,
    site_id: Annotated[str | None, typer.Option(help="Only this site.")] = None,
    output: FormatOption = Format.table,
) -> None:
    """Logical partitions and instances with NVLink changes in flight, per tenant and site, beside the
    limits the API enforces (the settings' [quotas], with their per-org exceptions)."""
    from nico.services import quotas

    try:
        site = uuid.UUID(site_id) if site_id is not None else None
    except ValueError:
        raise fail(f"--site-id must be a UUID, not {site_id!r}", 2) from None
    limits = settings_or_exit().quotas
    found = with_session(lambda s: quotas.usage(s, limits, org=org, site_id=site))
    emit([dataclasses.asdict(row) for row in found], output, COLUMNS)

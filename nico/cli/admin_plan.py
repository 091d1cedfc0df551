"""``nico admin nvlink-plan``: what the next reconciler pass would send to the fabric, domain by domain,
and why; the GPUs partitions nico did not make hold. The same in observe and in active mode (it
reads the database and lists the fabric; it locks, records and sends nothing).

Registered on the ``admin`` app by :func:`register`.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import TYPE_CHECKING, Annotated, Any

import typer

from nico.cli.bootstrap import existing_database_url_or_exit, schema_or_exit, settings_or_exit
from nico.cli.output import Format, FormatOption, emit, fail

if TYPE_CHECKING:
    from nico.config import Settings
    from nico.reconciler.preview import DomainPlan

CHANGE_COLUMNS = ("domain_uuid", "kind", "partition", "nmx_partition_id", "gpus", "why")


def register(app: typer.Typer) -> None:
    app.command("nvlink-plan")(nvlink_plan)


def nvlink_plan(
    domain_uuid: Annotated[str | None, typer.Option(help="Only this NVLink domain (default: all).")] = None,
    output: FormatOption = Format.table,
) -> None:
    """Each fabric operation the next pass would send, per domain, and why; logical partitions that
    cannot be placed; GPUs kept in partitions nico did not make."""
    settings = settings_or_exit()
    domain = None
    if domain_uuid is not None:
        try:
            domain = uuid.UUID(domain_uuid)
        except ValueError:
            raise fail(f"--domain-uuid must be a UUID, not {domain_uuid!r}", 2) from None
    plans = _read(settings, domain)
    if domain is not None and not plans:
        raise fail(f"NVLink domain {domain} not found")
    if output is not Format.table:
        emit([as_dict(p, settings) for p in plans], output)
        return
    emit(_tables(plans, settings), output)


def _read(settings: Settings, domain: uuid.UUID | None) -> list[DomainPlan]:
    from nico.config import ConfigError
    from nico.db.engine import make_engine
    from nico.reconciler.preview import preview
    from nico.reconciler.runtime import open_backend

    url = existing_database_url_or_exit(settings)
    schema_or_exit(url)

    async def read() -> list[DomainPlan]:
        engine = make_engine(url, pool_size=2)
        try:
            backend = await open_backend(settings, engine)
            try:
                return await preview(engine, backend, settings.nvlink_config, domain)
            finally:
                await backend.close()
        finally:
            await engine.dispose()

    try:
        return asyncio.run(read())
    except ConfigError as exc:
        raise fail(str(exc)) from None


def as_dict(found: DomainPlan, settings: Settings) -> dict[str, Any]:
    """One domain's plan as printed in JSON and YAML."""
    config = settings.nvlink_config
    return {
        "domain_uuid": str(found.domain),
        "mode": config.mode,
        "foreign_partitions": config.foreign_partitions,
        "error": found.error,
        "foreign_gpus": found.foreign_gpus,
        "operations": [
            {
                "kind": c.kind,
                "partition": c.partition,
                "nmx_partition_id": c.nmx_partition_id,
                "gpus": [str(g) for g in c.gpus],
                "logical_partition_id": str(c.logical_partition_id) if c.logical_partition_id else None,
                "why": c.why,
            }
            for c in found.changes
        ],
        "blocked": [{"logical_partition_id": str(lp), "why": why} for lp, why in found.blocked.items()],
        "held": [
            {
                "gpu_uid": str(h.gpu_uid),
                "machine_id": h.machine_id,
                "partition": h.partition,
                "instance_id": str(h.instance_id) if h.instance_id else None,
                "wanted_by": str(h.wanted_by) if h.wanted_by else None,
            }
            for h in found.held
        ],
    }


def _tables(plans: list[DomainPlan], settings: Settings) -> dict[str, Any]:
    """The table form: a summary per domain, then every operation, blocked partition and held GPU."""
    found = [as_dict(p, settings) for p in plans]
    domains = [
        {
            "domain_uuid": d["domain_uuid"],
            "mode": d["mode"],
            "operations": len(d["operations"]),
            "foreign_gpus": d["foreign_gpus"],
            "held": len(d["held"]),
            "blocked": len(d["blocked"]),
            "error": d["error"],
        }
        for d in found
    ]
    operations = [
        {"domain_uuid": d["domain_uuid"], **{k: op[k] for k in CHANGE_COLUMNS if k in op}}
        for d in found
        for op in d["operations"]
    ]
    for op in operations:
        op["gpus"] = " ".join(op["gpus"])
    tables: dict[str, Any] = {"domains": domains, "operations": operations}
    blocked = [{"domain_uuid": d["domain_uuid"], **b} for d in found for b in d["blocked"]]
    held = [{"domain_uuid": d["domain_uuid"], **h} for d in found for h in d["held"]]
    if blocked:
        tables["blocked"] = blocked
    if held:
        tables["held"] = held
    return tables

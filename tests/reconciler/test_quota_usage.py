"""Operators see each tenant's usage at each site against its quotas: ``nico admin quota show`` and
the ``nico_tenant_quota_*`` gauges, both counting what the API's checks count (logical partitions;
instances on an NVLink domain whose NVLink state the fabric has not settled), with the limits of the
settings (an org's exception included)."""

from __future__ import annotations

import asyncio
import json

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession
from typer.testing import CliRunner

from nico.api.context import AppContext
from nico.cli import app
from nico.config import QuotaConfig, QuotaLimits
from nico.db.engine import reading
from nico.db.models import Instance
from nico.reconciler.quota_metrics import QuotaGauges
from tests.support import factories as f


async def tenant_with_usage(session: AsyncSession) -> f.NvlinkSite:
    """A tenant with three logical partitions and three instances at its site: one on a domain not yet
    settled, one settled, one on a machine without a domain (nothing for the fabric to do)."""
    world = await f.nvlink_site(session, racks=1, trays=4)
    for n in range(3):
        await f.logical_partition(session, world.tenant, world.site, name=f"lp-{n}")
    for n, machine in enumerate(world.machines[:3]):
        instance = Instance(
            tenant_id=world.tenant.id,
            site_id=world.site.id,
            vpc_id=world.vpc.id,
            instance_type_id=world.instance_type.id,
            name=f"i-{n}",
            nvlink_applied_version=1 if n == 1 else None,
        )
        session.add(instance)
        await session.flush()
        machine.instance_id = instance.id
        if n == 2:
            machine.domain_uuid, machine.chassis_serial, machine.tray_index = None, None, None
    await session.commit()
    return world


async def test_admin_quota_show_prints_usage_beside_the_limits(
    session: AsyncSession, cli_env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    world = await tenant_with_usage(session)
    monkeypatch.setenv("NICO_QUOTAS__ORGS", json.dumps({"tenant-org": {"logical_partitions": 5}}))
    result = await asyncio.to_thread(CliRunner().invoke, app, ["admin", "quota", "show", "--format", "json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == [
        {
            "org": "tenant-org",
            "site_id": str(world.site.id),
            "site_name": world.site.name,
            "logical_partitions": 3,
            "logical_partitions_limit": 5,
            "nvlink_changes_in_flight": 1,
            "nvlink_changes_in_flight_limit": QuotaConfig().nvlink_changes_in_flight,
        }
    ]
    table = await asyncio.to_thread(CliRunner().invoke, app, ["admin", "quota", "show", "--org", "nobody"])
    assert table.exit_code == 0 and "tenant-org" not in table.stdout


async def test_the_gauges_show_usage_and_limits_per_tenant_and_site(
    session: AsyncSession, app_context: AppContext
) -> None:
    world = await tenant_with_usage(session)
    registry = CollectorRegistry()
    gauges = QuotaGauges(hold_seconds=60.0).register(registry)
    gauges.limits = QuotaConfig(orgs={"tenant-org": QuotaLimits(nvlink_changes_in_flight=7)})
    assert generate_latest(registry) == b""  # nothing read yet: no series rather than zeros
    async with reading(app_context.engine) as conn:
        await gauges.refresh(conn)
    labels = {"org": "tenant-org", "site": str(world.site.id)}
    samples = {
        s.name: s.value
        for family in text_string_to_metric_families(generate_latest(registry).decode())
        for s in family.samples
        if s.labels == labels
    }
    assert samples == {
        "nico_tenant_quota_logical_partitions": 3,
        "nico_tenant_quota_logical_partitions_limit": QuotaConfig().logical_partitions,
        "nico_tenant_quota_nvlink_changes_in_flight": 1,
        "nico_tenant_quota_nvlink_changes_in_flight_limit": 7,
    }
    # A change the fabric settles leaves the count at the next refresh.
    await session.execute(text("UPDATE instance SET nvlink_applied_version = nvlink_config_version"))
    await session.commit()
    async with reading(app_context.engine) as conn:
        await gauges.refresh(conn)
    assert [r.nvlink_changes_in_flight for r in gauges.rows] == [0]

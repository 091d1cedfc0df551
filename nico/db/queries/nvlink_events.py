"""The SQL of handing desired NVLink changes to the reconciler: version bumps and NOTIFY."""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from sqlalchemy import func, select, text, update
from sqlalchemy.ext.asyncio import AsyncSession

from nico.db.models import Instance, Machine


async def bump_nvlink_config_versions(session: AsyncSession, instance_ids: Sequence[uuid.UUID]) -> None:
    """One more NVLink config version for each instance, changed now."""
    await session.execute(
        update(Instance)
        .where(Instance.id.in_(instance_ids))
        .values(
            nvlink_config_version=Instance.nvlink_config_version + 1,
            nvlink_config_changed_at=func.now(),
        )
        .execution_options(synchronize_session=False)
    )


async def domains_of_instances(session: AsyncSession, instance_ids: Sequence[uuid.UUID]) -> set[uuid.UUID]:
    """The NVLink domains of the instances' machines."""
    rows = await session.scalars(
        select(Machine.domain_uuid).where(
            Machine.instance_id.in_(instance_ids), Machine.domain_uuid.is_not(None)
        )
    )
    return {d for d in rows if d is not None}


async def notify(session: AsyncSession, channel: str, payload: str) -> None:
    """NOTIFY ``channel`` (delivered when the transaction commits)."""
    await session.execute(
        text("SELECT pg_notify(:channel, :payload)"), {"channel": channel, "payload": payload}
    )

"""Placement events: what nico decided about where each NVLink interface is, as an append-only log.

Rows are written by database triggers (migration 0005) whenever an NVLink interface is added, changes
status, domain or logical partition, or is removed, and whenever a physical partition that holds Ready
interfaces is created, renumbered or removed (the clique id of its interfaces changes). A change of a
bound GPU's health gives an event too (column ``health``, rule feed_health). Each insert
also sends ``NOTIFY nico_placement``. Nothing in Python writes this table; the API streams it
(``/nvlink-topology/events``) and prunes rows older than ``api.placement_event_retention_seconds``.
"""

from __future__ import annotations

import uuid
from datetime import datetime

from sqlalchemy import BigInteger, Index, String
from sqlalchemy.orm import Mapped, mapped_column

from nico.db.base import Base, created_at


class FeedEvent(Base):
    __tablename__ = "placement_event"
    __table_args__ = (
        Index("ix_placement_event_tenant", "tenant_id", "txid", "id"),
        Index("ix_placement_event_site", "site_id", "txid", "id"),
        Index("ix_placement_event_order", "txid", "id"),
        Index("ix_placement_event_created", "created"),
    )

    id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=True)
    # The writing transaction's id: readers deliver rows in (txid, id) order and only from transactions
    # older than every one still running, so a slow transaction's events are never skipped.
    txid: Mapped[int] = mapped_column(BigInteger)
    created: Mapped[datetime] = created_at()
    # No foreign keys: an event outlives the rows it tells about.
    tenant_id: Mapped[uuid.UUID | None]
    site_id: Mapped[uuid.UUID]
    instance_id: Mapped[uuid.UUID]
    instance_name: Mapped[str | None] = mapped_column(String(256))
    interface_id: Mapped[uuid.UUID]
    device_instance: Mapped[int]
    kind: Mapped[str] = mapped_column(String(32))  # the interface status, or Removed
    domain_uuid: Mapped[uuid.UUID | None]
    logical_partition_id: Mapped[uuid.UUID]
    clique_id: Mapped[str | None] = mapped_column(String(64))
    # The GPU's health, on events that report a change of it (rule feed_health); null on the others.
    health: Mapped[str | None] = mapped_column(String(32))

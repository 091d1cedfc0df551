"""Free and used machines per NVLink domain, kept in step with the machine table by database triggers.

Placement reads one row per domain instead of counting every machine (issue 15): a site of 2,000
racks has 36,000 machines and 2,000 rows here. Rows are written by triggers on ``machine`` whenever a
machine is inserted, updated or deleted in a way that changes a count, so every path that assigns or
frees a machine (creates, deletes, registration, maintenance, a machine missing on site, a changed
instance type or domain) keeps them right, in the same transaction: a statement trigger (migration
0010) sums the statement's changes per domain into ``domain_capacity_delta``, and a constraint
trigger on that table, deferred to the commit, adds them here. Deferred: a domain's row is locked
only while the transaction commits. Nothing in Python writes these tables; within a transaction that
changed machines the counts show its changes only after the commit.

``free`` counts machines that are Ready, unassigned and not missing on site (what
``nico.instance.queries`` may lock); ``used`` counts assigned machines. Machines without an NVLink
domain count under the nil UUID (``NO_DOMAIN``); machines without an instance type are not counted.
There are no foreign keys: the rows are derived data, and a row whose machines went elsewhere stays
at zero.
"""

from __future__ import annotations

import uuid

from sqlalchemy import BigInteger, Integer
from sqlalchemy.orm import Mapped, mapped_column

from nico.db.base import Base

NO_DOMAIN = uuid.UUID(int=0)


class DomainCapacity(Base):
    __tablename__ = "domain_capacity"

    site_id: Mapped[uuid.UUID] = mapped_column(primary_key=True)
    instance_type_id: Mapped[uuid.UUID] = mapped_column(primary_key=True)
    domain_uuid: Mapped[uuid.UUID] = mapped_column(primary_key=True)  # NO_DOMAIN: machines without one
    free: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    used: Mapped[int] = mapped_column(Integer, default=0, server_default="0")


class DomainCapacityDelta(Base):
    """A statement's change of one domain's counts, waiting for its transaction's commit (migration
    0010). Unlogged: a row lives only inside the transaction that wrote it (the deferred trigger that
    applies it deletes it), so a crash, which ends that transaction, loses nothing."""

    __tablename__ = "domain_capacity_delta"
    __table_args__ = {"prefixes": ["UNLOGGED"]}

    id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=True)
    site_id: Mapped[uuid.UUID]
    instance_type_id: Mapped[uuid.UUID]
    domain_uuid: Mapped[uuid.UUID]
    free: Mapped[int] = mapped_column(Integer)
    used: Mapped[int] = mapped_column(Integer)

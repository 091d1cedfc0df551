"""What a tenant's limits keep in the database: the token buckets of fabric-changing requests."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import DateTime, Double, String
from sqlalchemy.orm import Mapped, mapped_column

from nico.db.base import Base


class FabricRateBucket(Base):
    """One org's bucket of fabric-changing requests (``nico_take_fabric_token``, migration 0018),
    shared by every API replica. Unlogged: a crash loses the rows, which only refills the buckets."""

    __tablename__ = "fabric_rate_bucket"
    __table_args__ = {"prefixes": ["UNLOGGED"]}

    org: Mapped[str] = mapped_column(String(256), primary_key=True)
    tokens: Mapped[float] = mapped_column(Double)
    refilled: Mapped[datetime] = mapped_column(DateTime(timezone=True))

"""What a running API needs, built once per process and shared by every request."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from prometheus_client import CollectorRegistry
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from nico.api.auth import TokenVerifier
from nico.config import Settings


@dataclass
class AppContext:
    settings: Settings
    engine: AsyncEngine
    sessions: async_sessionmaker[AsyncSession]
    verifier: TokenVerifier
    registry: CollectorRegistry
    extras: dict[str, Any] = field(default_factory=dict)

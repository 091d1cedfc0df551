"""The rate of a tenant's fabric-changing requests (instance create, batch, NVLink PATCH and delete,
logical partition create and delete): one token bucket per org, kept in PostgreSQL so that every API
replica draws from the same one (docs/configuration.md, ``[quotas]``)."""

from __future__ import annotations

import math
from typing import Any

import psycopg

from nico.config import QuotaConfig
from nico.db.queries.tenant_limits import take_fabric_token
from nico.services.errors import too_many_requests


def rate_exceeded(quotas: QuotaConfig) -> str:
    """The refusal's text, naming the limit."""
    return (
        "Tenant has exceeded its rate of fabric-changing requests "
        f"({quotas.fabric_requests_per_second:g} per second, bursts of {quotas.fabric_request_burst}: "
        "quotas.fabric_requests_per_second), retry after the time given in Retry-After"
    )


async def take(conn: psycopg.AsyncConnection[Any], org: str, quotas: QuotaConfig) -> None:
    """Spend one of the org's tokens, or refuse with 429 and the whole seconds until one is there."""
    wait = await take_fabric_token(conn, org, quotas.fabric_requests_per_second, quotas.fabric_request_burst)
    if wait > 0:
        raise too_many_requests(rate_exceeded(quotas), max(1, math.ceil(wait)))

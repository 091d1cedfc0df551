"""The rate limit of fabric-changing requests at the API: the dependency the routes that change the
fabric declare, and their 429 in the OpenAPI document."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Depends, Request

from nico.api.deps import TenantAdmin, context_of
from nico.services import fabric_rate

RATE_LIMITED: dict[int | str, dict[str, Any]] = {
    429: {
        "description": "The tenant has asked for fabric changes faster than its rate (setting "
        "`quotas.fabric_requests_per_second`, a token bucket shared by every API replica); nothing was "
        "done",
        "headers": {
            "Retry-After": {
                "description": "Whole seconds until the tenant's next fabric-changing request is accepted.",
                "required": True,
                "schema": {"type": "integer", "minimum": 1},
            }
        },
    }
}


async def spend_fabric_token(request: Request, org: str) -> None:
    """One of the org's tokens spent, or 429 with ``Retry-After`` (:mod:`nico.services.fabric_rate`)."""
    ctx = context_of(request)
    async with ctx.raw.connection() as conn:
        await fabric_rate.take(conn, org, ctx.settings.quotas)


async def fabric_request(org: str, _: TenantAdmin, request: Request) -> None:
    """A route that always changes the fabric: the caller's role first, then its rate."""
    await spend_fabric_token(request, org)


FabricRequest = Annotated[None, Depends(fabric_request)]

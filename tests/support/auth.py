"""Bearer headers for tests, signed like ``nico token`` does."""

from __future__ import annotations

from nico.api.auth import issue_dev_token
from nico.config import Settings


def bearer(settings: Settings, org: str, *roles: str) -> dict[str, str]:
    token = issue_dev_token(settings, org=org, roles=list(roles) or ["TENANT_ADMIN"])
    return {"Authorization": f"Bearer {token}"}

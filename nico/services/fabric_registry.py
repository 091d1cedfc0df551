"""Where the fabric managers are: the chassis serial -> NMX-C endpoint registry, and the NMX-M
basic-auth credentials (stored, never printed or logged)."""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncSession

from nico.db.base import utcnow
from nico.db.models import FabricCredential, NvlinkNmxcEndpoint
from nico.db.queries import fabric_registry as queries
from nico.services.errors import ServiceError, bad_request, conflict, not_found

NMXM_CREDENTIAL = "nmx-m"


def _require(serial: str, endpoint: str | None = None) -> None:
    if not serial.strip():
        raise bad_request("chassis_serial must not be empty")
    if endpoint is not None and not endpoint.strip():
        raise bad_request("endpoint must not be empty")


async def list_endpoints(
    session: AsyncSession, chassis_serial: str | None = None
) -> list[NvlinkNmxcEndpoint]:
    return await queries.endpoints(session, chassis_serial)


async def create_endpoint(session: AsyncSession, chassis_serial: str, endpoint: str) -> NvlinkNmxcEndpoint:
    _require(chassis_serial, endpoint)
    if not await queries.insert_endpoint(session, chassis_serial, endpoint):
        raise conflict(f"nvlink_nmxc_endpoints: chassis_serial {chassis_serial} already exists")
    row = await session.get(NvlinkNmxcEndpoint, chassis_serial)
    assert row is not None
    return row


async def update_endpoint(session: AsyncSession, chassis_serial: str, endpoint: str) -> NvlinkNmxcEndpoint:
    _require(chassis_serial, endpoint)
    row = await session.get(NvlinkNmxcEndpoint, chassis_serial, with_for_update=True)
    if row is None:
        raise not_found("nvlink_nmxc_endpoints: no row for chassis_serial")
    row.endpoint = endpoint
    row.updated = utcnow()
    await session.flush()
    return row


async def delete_endpoint(session: AsyncSession, chassis_serial: str) -> None:
    _require(chassis_serial)
    if not await queries.delete_endpoint(session, chassis_serial):
        raise not_found("nvlink_nmxc_endpoints: no row for chassis_serial")


async def set_nmxm_credentials(session: AsyncSession, username: str, password: str) -> None:
    if not username or not password:
        raise ServiceError(400, "username and password must not be empty")
    await queries.upsert_credential(session, NMXM_CREDENTIAL, username, password)


async def delete_nmxm_credentials(session: AsyncSession, username: str | None = None) -> bool:
    """Forget the NMX-M credentials; with ``username`` (the reference's ``--username``), only that
    user's: another user's are a 409, kept."""
    if username is not None:
        row = await session.get(FabricCredential, NMXM_CREDENTIAL)
        if row is not None and row.username != username:
            raise ServiceError(409, f"the stored NMX-M credentials are {row.username}'s, not {username}'s")
    return bool(await queries.delete_credential(session, NMXM_CREDENTIAL))


async def nmxm_credentials(session: AsyncSession) -> tuple[str, str] | None:
    row = await session.get(FabricCredential, NMXM_CREDENTIAL)
    return (row.username, row.password) if row else None

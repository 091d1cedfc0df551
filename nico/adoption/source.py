"""Reading a NICo site over its REST API (NVIDIA Infra Controller itself, or another nico: the same
wire): the org's logical partitions, VPCs and instances with their NVLink interfaces, every page of
each list (``X-Pagination``), as plain values (:mod:`nico.adoption.views`)."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx

from nico.adoption.views import SourceInstance, SourceInterface, SourcePartition, SourceVpc

PAGE_SIZE = 100  # the most a NICo list answers per page
TIMEOUT = 30.0


class SourceError(Exception):
    """The source answered something other than what NICo's API answers (or did not answer)."""


def org_base(url: str, org: str) -> str:
    """The org's API root: ``url`` itself when it already ends in ``/nico``, else
    ``<url>/v2/org/<org>/nico``."""
    url = url.rstrip("/")
    return url if url.endswith("/nico") else f"{url}/v2/org/{org}/nico"


class NicoSource:
    """One org of a NICo site, read with a bearer token."""

    def __init__(self, url: str, token: str, org: str, *, transport: httpx.AsyncBaseTransport | None = None):
        self.base = org_base(url, org)
        self._client = httpx.AsyncClient(
            headers={"Authorization": f"Bearer {token}"}, timeout=TIMEOUT, transport=transport
        )

    async def close(self) -> None:
        await self._client.aclose()

    async def _pages(self, path: str) -> AsyncIterator[dict[str, Any]]:
        """Every item of a list, page after page, until ``X-Pagination``'s total is read."""
        page, seen = 1, 0
        while True:
            try:
                answer = await self._client.get(
                    f"{self.base}/{path}", params={"pageNumber": page, "pageSize": PAGE_SIZE}
                )
            except httpx.HTTPError as exc:
                raise SourceError(f"{self.base}/{path}: {exc}") from None
            if answer.status_code != 200:
                message = _message(answer)
                raise SourceError(f"{self.base}/{path} answered {answer.status_code}: {message}")
            items = answer.json()
            total = _total(answer.headers.get("X-Pagination"), seen + len(items))
            for item in items:
                yield item
            seen += len(items)
            if not items or seen >= total:
                return
            page += 1

    async def logical_partitions(self) -> list[SourcePartition]:
        return [_partition(item) async for item in self._pages("nvlink-logical-partition")]

    async def vpcs(self) -> list[SourceVpc]:
        return [_vpc(item) async for item in self._pages("vpc")]

    async def instances(self) -> list[SourceInstance]:
        return [_instance(item) async for item in self._pages("instance")]


def _message(answer: httpx.Response) -> str:
    try:
        return str(answer.json().get("message"))
    except (ValueError, AttributeError):
        return answer.text[:200]


def _total(header: str | None, fallback: int) -> int:
    try:
        return int(json.loads(header or "")["total"])
    except (ValueError, KeyError, TypeError):
        return fallback


def _uuid(value: Any) -> uuid.UUID | None:
    return uuid.UUID(str(value)) if value else None


def _partition(item: dict[str, Any]) -> SourcePartition:
    return SourcePartition(
        uuid.UUID(item["id"]),
        item["name"],
        item.get("description"),
        uuid.UUID(item["siteId"]),
        item["status"],
    )


def _vpc(item: dict[str, Any]) -> SourceVpc:
    return SourceVpc(
        id=uuid.UUID(item["id"]),
        name=item["name"],
        description=item.get("description"),
        site_id=uuid.UUID(item["siteId"]),
        labels=item.get("labels"),
        network_virtualization_type=item.get("networkVirtualizationType"),
        logical_partition_id=_uuid(item.get("nvLinkLogicalPartitionId")),
    )


def _interface(item: dict[str, Any]) -> SourceInterface:
    lp = item.get("nvLinkLogicalPartitionId") or item.get("nvLinklogicalPartitionId")
    guid = item.get("gpuGuid")
    return SourceInterface(
        id=uuid.UUID(item["id"]),
        logical_partition_id=uuid.UUID(str(lp)),
        device_instance=int(item["deviceInstance"]),
        gpu_uid=int(guid) if guid not in (None, "") else None,
        domain_uuid=_uuid(item.get("nvLinkDomainId")),
    )


def _instance(item: dict[str, Any]) -> SourceInstance:
    return SourceInstance(
        id=uuid.UUID(item["id"]),
        name=item["name"],
        description=item.get("description"),
        site_id=uuid.UUID(item["siteId"]),
        vpc_id=uuid.UUID(item["vpcId"]),
        machine_id=item.get("machineId") or None,
        status=item["status"],
        labels=item.get("labels"),
        interfaces=tuple(
            _interface(i) for i in item.get("nvLinkInterfaces") or () if i.get("status") != "Deleting"
        ),
    )

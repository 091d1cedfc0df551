"""NMX-M client: :class:`NmxmBackend`, the fabric backend over NMX-M REST (spec §5).

One site-wide endpoint, HTTP basic auth, one pooled ``httpx.AsyncClient``. Changes are asynchronous:
create (POST), update (PUT with the full member list) and delete answer ``202 {"operationId"}`` and
are polled on ``/nmx/v1/operations/{id}`` every ``poll_interval`` until a terminal state or
``operation_timeout``. An operation still running then raises
:class:`~nico.fabric.backend.OperationPending` with its id: the caller keeps it and asks
:meth:`NmxmBackend.operation_state` later, and adopts what it made (by name) when it completes, so a
slow manager never leaves ghost partitions. ``failed`` and ``cancelled`` operations are errors.

NMX-M identifies GPUs by entity ``ID``, nico by ``gpu_uid`` (the ``DeviceUID``): the map between the
two comes from ``GET /nmx/v1/gpus``, is cached, and is refreshed when an id or uid is missing from it.
Partitions carry no domain: one is attributed to the domain of its members' ``DomainUUID``, and the
domain of every partition seen with members (or created here) is remembered by partition ``ID`` so
an emptied partition, such as a drained default partition, is still found. Limit: an empty
partition that this process never saw with members is attributed to no domain and is not listed.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import uuid
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import Any, Literal, cast

import httpx

from nico.config import NvLinkConfig
from nico.fabric.backend import (
    Capabilities,
    DomainHealth,
    DomainHello,
    DomainTarget,
    EndpointNotConfigured,
    FabricBusy,
    FabricComputeNode,
    FabricError,
    FabricGpu,
    FabricPartition,
    FabricRejected,
    FabricTimeout,
    FabricUnavailable,
    OperationPending,
    OperationState,
    PartitionNotFound,
    health_counts,
)
from nico.fabric.return_codes import code_from_name, return_code_error

log = logging.getLogger(__name__)

API = "/nmx/v1"
# How old a site-wide listing (GPUs, compute nodes, partitions) may be to serve a health read or a
# domain's GPU list: the reconciler reads the health of many domains at once (every domain's first pass
# after a quiet spell), and each would otherwise list the whole site three times; health itself stands
# for seconds. A read-back after a change never takes a shared listing (``list_partitions``).
HEALTH_LISTING_REUSE = 1.0
_STATES: dict[str, OperationState] = {
    "pending": "pending",
    "in-progress": "in-progress",
    "completed": "completed",
    "failed": "failed",
    "cancelled": "cancelled",
}


@dataclass(frozen=True, slots=True)
class _Gpu:
    entity_id: str
    gpu_uid: int
    domain_uuid: uuid.UUID | None


class NmxmBackend:
    """:class:`~nico.fabric.backend.FabricBackend` and ``AsyncOperations`` over NMX-M REST."""

    kind: Literal["nmxc", "nmxm"] = "nmxm"

    def __init__(
        self,
        base_url: str,
        username: str | None,
        password: str | None,
        *,
        operation_timeout: float = 10.0,
        call_timeout: float = 5.0,
        verify: bool | str = True,
        poll_interval: float = 0.05,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        if not base_url:
            raise EndpointNotConfigured("no NMX-M endpoint configured (nmx_m_endpoint)")
        self.base_url = base_url.rstrip("/")
        self._operation_timeout = operation_timeout
        self._call_timeout = call_timeout
        self._poll_interval = poll_interval
        self._http = httpx.AsyncClient(
            base_url=self.base_url,
            auth=httpx.BasicAuth(username, password or "") if username else None,
            verify=verify,
            timeout=call_timeout,
            headers={"Accept": "application/json", "User-Agent": "nico"},
            transport=transport,
        )
        self._credentials = (username, password or "") if username else None
        self._by_id: dict[str, _Gpu] = {}
        self._by_uid: dict[int, _Gpu] = {}
        self._partition_domain: dict[str, uuid.UUID] = {}
        self._gpus_listed: tuple[float, list[dict[str, Any]]] | None = None  # (began, GET /gpus)
        # Listings shared by the reads that may take one HEALTH_LISTING_REUSE seconds old: path ->
        # (began, the listing, done or still on its way).
        self._shared: dict[str, tuple[float, asyncio.Future[Any]]] = {}
        self.capabilities = Capabilities(
            manager="NMX-M",
            per_endpoint=False,
            multicast_limits=False,
            operations=self,
            credentials=self,
            health=self,
            site=self,
        )

    @classmethod
    def from_config(cls, config: NvLinkConfig, username: str | None, password: str | None) -> NmxmBackend:
        if not config.nmx_m_endpoint:
            raise EndpointNotConfigured("no NMX-M endpoint configured (nmx_m_endpoint)")
        return cls(
            config.nmx_m_endpoint,
            username,
            password,
            operation_timeout=config.nmx_m_operation_timeout.total_seconds(),
            call_timeout=config.fabric_call_timeout.total_seconds(),
            verify=not config.allow_insecure,
        )

    def use_credentials(self, credentials: tuple[str, str]) -> None:
        """Sign in with ``(username, password)`` from the next request on; the reconciler passes what
        is stored at the start of every pass."""
        if credentials != self._credentials:
            self._credentials = credentials
            self._http.auth = httpx.BasicAuth(*credentials)

    async def close(self) -> None:
        await self._http.aclose()

    # ----------------------------------------------------------------------------------------- HTTP

    async def _request(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        """One request with a total deadline; the decoded JSON of a 2xx answer, else a FabricError."""
        url = f"{API}{path}"
        try:
            async with asyncio.timeout(self._call_timeout):
                response = await self._http.request(method, url, json=body)
        except TimeoutError:
            raise FabricTimeout(
                f"NMX-M {method} {url}: no answer within {self._call_timeout}s",
                code="TIMEOUT",
                endpoint=self.base_url,
            ) from None
        except httpx.TimeoutException as exc:
            raise FabricTimeout(
                f"NMX-M {method} {url}: {exc!r}", code="TIMEOUT", endpoint=self.base_url
            ) from None
        except httpx.TransportError as exc:
            raise FabricUnavailable(
                f"NMX-M {method} {url}: {exc!r}", code="UNAVAILABLE", endpoint=self.base_url
            ) from None
        if response.is_success:
            try:
                return response.json()
            except ValueError:
                raise FabricBusy(
                    f"NMX-M {method} {url}: answer is not JSON", code="BAD_RESPONSE", endpoint=self.base_url
                ) from None
        raise self._http_error(method, path, response)

    def _http_error(self, method: str, path: str, response: httpx.Response) -> FabricError:
        status = response.status_code
        custom, description = "", response.text[:200]
        try:
            body = response.json()
            if isinstance(body, dict):
                custom = str(body.get("customErrorCode") or "")
                description = str(body.get("description") or description)
        except ValueError:
            pass
        message = f"NMX-M {method} {API}{path}: HTTP {status} {description}".rstrip()
        code = code_from_name(custom)
        if status in (401, 403) or (status == 404 and path.startswith("/operations/")):
            return FabricRejected(message, code=f"HTTP_{status}", endpoint=self.base_url)
        if code is not None:
            return return_code_error(code, message, endpoint=self.base_url)
        if status == 404 and path.startswith("/partitions/"):
            return PartitionNotFound(message, code="HTTP_404", endpoint=self.base_url)
        if status in (502, 503):
            return FabricUnavailable(message, code=f"HTTP_{status}", endpoint=self.base_url)
        if status == 504:
            return FabricTimeout(message, code="HTTP_504", endpoint=self.base_url)
        if status == 429 or status >= 500:
            return FabricBusy(message, code=f"HTTP_{status}", endpoint=self.base_url)
        return FabricRejected(message, code=f"HTTP_{status}", endpoint=self.base_url)

    # ----------------------------------------------------------------------------------- operations

    async def _run(self, method: str, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        """Issue a change and wait for its operation; the finished operation."""
        accepted = await self._request(method, path, body)
        operation_id = accepted.get("operationId") if isinstance(accepted, dict) else None
        if not isinstance(operation_id, str) or not operation_id:
            raise FabricBusy(
                f"NMX-M {method} {API}{path}: no operationId in {accepted!r}",
                code="BAD_RESPONSE",
                endpoint=self.base_url,
            )
        return await self._wait(operation_id)

    async def _wait(self, operation_id: str) -> dict[str, Any]:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._operation_timeout
        last = "no answer yet"
        while True:
            try:
                op = await self._request("GET", f"/operations/{operation_id}")
            except FabricError as exc:
                # The change was accepted: losing track of it here would make a ghost. Keep asking
                # until the deadline, then hand the id back.
                op, last = None, f"{exc.code}: {exc.message}"
            if isinstance(op, dict):
                status = op.get("Status")
                last = str(status)
                if status == "completed":
                    return op
                if status == "failed":
                    raise self._failed(operation_id, op)
                if status == "cancelled":
                    raise FabricBusy(
                        f"NMX-M operation {operation_id} was cancelled",
                        code="OPERATION_CANCELLED",
                        endpoint=self.base_url,
                    )
            remaining = deadline - loop.time()
            if remaining <= 0:
                raise OperationPending(
                    f"NMX-M operation {operation_id} not finished after {self._operation_timeout}s ({last})",
                    operation_id=operation_id,
                    code="OPERATION_PENDING",
                )
            await asyncio.sleep(min(self._poll_interval, remaining))

    def _failed(self, operation_id: str, op: dict[str, Any]) -> FabricError:
        result = op.get("Result") or {}
        error = str(result.get("Error") or "")
        details = str(result.get("Details") or "")
        code = code_from_name(error)
        if code is not None:
            # return_code_error appends the code's name to the message.
            return return_code_error(
                code, f"NMX-M operation {operation_id} failed ({details})", endpoint=self.base_url
            )
        message = f"NMX-M operation {operation_id} failed: {error} {details}".rstrip()
        return FabricRejected(message, code=error or "OPERATION_FAILED", endpoint=self.base_url)

    async def operation_state(self, operation_id: str) -> OperationState:
        """Where a tracked operation stands now; ``unknown`` when the manager no longer knows it."""
        try:
            op = await self._request("GET", f"/operations/{operation_id}")
        except FabricRejected as exc:
            if exc.code == "HTTP_404":
                return "unknown"
            raise
        status = op.get("Status") if isinstance(op, dict) else None
        return _STATES.get(str(status), "unknown")

    @contextlib.contextmanager
    def _parsing(self, what: str) -> Iterator[None]:
        """A reply of an unexpected shape is an error of the call, not a crash of the caller."""
        try:
            yield
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise FabricBusy(
                f"NMX-M {what}: unexpected reply ({exc!r})", code="BAD_RESPONSE", endpoint=self.base_url
            ) from None

    # ------------------------------------------------------------------------------------- GPU map

    async def _refresh_gpus(self) -> list[dict[str, Any]]:
        started = asyncio.get_running_loop().time()
        listed = await self._request("GET", "/gpus")
        by_id: dict[str, _Gpu] = {}
        with self._parsing("GET /gpus"):
            for item in listed:
                gpu = _Gpu(str(item["ID"]), int(item["DeviceUID"]), _uuid(item.get("DomainUUID")))
                by_id[gpu.entity_id] = gpu
        self._by_id = by_id
        self._by_uid = {g.gpu_uid: g for g in by_id.values()}
        self._gpus_listed = (started, cast(list[dict[str, Any]], listed))
        return self._gpus_listed[1]

    async def _recent_gpus(self) -> list[dict[str, Any]]:
        """The site's GPU listing for health and domain GPU lists: the last one when it began at most
        ``HEALTH_LISTING_REUSE`` seconds ago, else one shared with the concurrent reads
        (:meth:`_recent`)."""
        if self._gpus_listed is not None:
            started, listed = self._gpus_listed
            if asyncio.get_running_loop().time() - started <= HEALTH_LISTING_REUSE:
                return listed
        return cast(list[dict[str, Any]], await self._recent("/gpus", self._refresh_gpus))

    async def _recent(self, path: str, fetch: Callable[[], Awaitable[Any]]) -> Any:
        """A site-wide listing that began at most ``HEALTH_LISTING_REUSE`` seconds ago, waited for if it
        is still on its way, else a new one (``fetch``) that the reads arriving meanwhile share: the
        health reads of 16 domains at once list the site once, not 16 times. A failed listing is not
        shared beyond the reads that waited for it."""
        loop = asyncio.get_running_loop()
        found = self._shared.get(path)
        if found is None or loop.time() - found[0] > HEALTH_LISTING_REUSE:
            found = (loop.time(), asyncio.ensure_future(fetch()))
            self._shared[path] = found
        try:
            return await asyncio.shield(found[1])  # one reader cancelled does not cancel the others'
        except Exception:
            if self._shared.get(path) is found:
                del self._shared[path]
            raise

    async def _entity_ids(self, target: DomainTarget, gpu_uids: frozenset[int]) -> list[str]:
        if any(uid not in self._by_uid for uid in gpu_uids):
            await self._refresh_gpus()
        ids = []
        for uid in sorted(gpu_uids):
            gpu = self._by_uid.get(uid)
            if gpu is None:
                raise FabricRejected(f"NMX-M knows no GPU {uid}", code="UNKNOWN_GPU", endpoint=self.base_url)
            if gpu.domain_uuid != target.domain_uuid:
                raise FabricRejected(
                    f"GPU {uid} is in domain {gpu.domain_uuid}, not {target.domain_uuid}",
                    code="GPU_NOT_IN_DOMAIN",
                    endpoint=self.base_url,
                )
            ids.append(gpu.entity_id)
        return ids

    # ------------------------------------------------------------------------------------- backend

    async def hello(self, target: DomainTarget) -> DomainHello:
        """NMX-M has no hello: the domain is known when the manager lists GPUs in it."""
        await self._refresh_gpus()
        if not any(g.domain_uuid == target.domain_uuid for g in self._by_id.values()):
            raise FabricRejected(
                f"NMX-M knows no GPU in domain {target.domain_uuid}",
                code="UNKNOWN_DOMAIN",
                endpoint=self.base_url,
            )
        return DomainHello(domain_uuid=target.domain_uuid)

    async def list_partitions(self, target: DomainTarget) -> list[FabricPartition]:
        """The domain's partitions, from a listing made now (a read-back: never a shared one)."""
        return await self._partitions_of(target, await self._request("GET", "/partitions"))

    async def _partitions_of(self, target: DomainTarget, listed: Any) -> list[FabricPartition]:
        with self._parsing("GET /partitions"):
            members_of = {str(p["ID"]): _member_ids(p.get("Members")) for p in listed}
            if any(m not in self._by_id for ids in members_of.values() for m in ids):
                await self._refresh_gpus()
            return self._attribute(target, listed, members_of)

    def _attribute(
        self, target: DomainTarget, listed: list[dict[str, Any]], members_of: dict[str, list[str]]
    ) -> list[FabricPartition]:
        """The listed partitions that belong to the target's domain (see the module docstring)."""
        found = []
        for item in listed:
            entity_id = str(item["ID"])
            gpus = [self._by_id[m] for m in members_of[entity_id] if m in self._by_id]
            if len(gpus) < len(members_of[entity_id]):
                log.warning("NMX-M partition %s has members that NMX-M does not list as GPUs", entity_id)
            domains = {g.domain_uuid for g in gpus if g.domain_uuid is not None}
            if len(domains) == 1:
                self._partition_domain[entity_id] = next(iter(domains))
            elif len(domains) > 1:  # a controller never allows it; show it wherever it has members
                log.warning("NMX-M partition %s spans domains %s", entity_id, sorted(map(str, domains)))
            belongs = (
                target.domain_uuid in domains
                if domains
                else self._partition_domain.get(entity_id) == target.domain_uuid
            )
            if not belongs:
                continue
            found.append(
                FabricPartition(
                    nmx_partition_id=int(item["PartitionID"]),
                    ref=entity_id,
                    name=str(item.get("Name") or ""),
                    gpu_uids=frozenset(g.gpu_uid for g in gpus),
                    health=str(item.get("Health") or "UNKNOWN"),
                )
            )
        return found

    async def create_partition(
        self,
        target: DomainTarget,
        name: str,
        gpu_uids: frozenset[int],
        *,
        resiliency_mode: str | None = None,
        multicast_groups_limit: int | None = None,
    ) -> FabricPartition:
        if resiliency_mode is not None or multicast_groups_limit is not None:
            # NMX-M's partition has no attributes: dropping them silently would break the budget.
            raise FabricRejected(
                "NMX-M cannot set a partition's resiliency mode or multicast group limit: use NMX-C",
                code="NOT_SUPPORTED",
                endpoint=self.base_url,
            )
        members = await self._entity_ids(target, gpu_uids)
        done = await self._run("POST", "/partitions", {"Name": name, "Members": members})
        made = self._made_partition(target, name, done)
        if made is not None:  # the operation's result names it: no listing needed
            return made
        for partition in await self.list_partitions(target):
            if partition.name == name:
                self._partition_domain[partition.ref] = target.domain_uuid
                return partition
        raise PartitionNotFound(
            f"NMX-M created partition {name!r} but does not list it",
            code="NOT_LISTED",
            endpoint=self.base_url,
        )

    def _made_partition(
        self, target: DomainTarget, name: str, operation: dict[str, Any]
    ) -> FabricPartition | None:
        """The partition a completed create reports in ``Result.Data``, when it reports one by this
        name whose members are all known GPUs of the target's domain (else None: list instead)."""
        data = (operation.get("Result") or {}).get("Data")
        if not isinstance(data, dict) or data.get("Name") != name:
            return None
        with contextlib.suppress(KeyError, TypeError, ValueError):
            ids = _member_ids(data.get("Members"))
            gpus = [self._by_id.get(m) for m in ids]
            if not gpus or any(g is None or g.domain_uuid != target.domain_uuid for g in gpus):
                return None
            entity_id = str(data["ID"])
            self._partition_domain[entity_id] = target.domain_uuid
            return FabricPartition(
                nmx_partition_id=int(data["PartitionID"]),
                ref=entity_id,
                name=name,
                gpu_uids=frozenset(g.gpu_uid for g in gpus if g is not None),
                health=str(data.get("Health") or "UNKNOWN"),
            )
        return None

    async def add_gpus(
        self, target: DomainTarget, partition: FabricPartition, gpu_uids: frozenset[int]
    ) -> None:
        if gpu_uids:
            await self._set_members(target, partition, partition.gpu_uids | gpu_uids)

    async def remove_gpus(
        self, target: DomainTarget, partition: FabricPartition, gpu_uids: frozenset[int]
    ) -> None:
        if gpu_uids:
            await self._set_members(target, partition, partition.gpu_uids - gpu_uids)

    async def _set_members(
        self, target: DomainTarget, partition: FabricPartition, members: frozenset[int]
    ) -> None:
        """NMX-M updates replace the member list: send the whole new list."""
        ids = await self._entity_ids(target, members)
        self._partition_domain[partition.ref] = target.domain_uuid
        await self._run("PUT", f"/partitions/{partition.ref}", {"Members": ids})

    async def delete_partition(self, target: DomainTarget, partition: FabricPartition) -> None:
        await self._run("DELETE", f"/partitions/{partition.ref}")
        self._partition_domain.pop(partition.ref, None)

    async def site_gpus(self) -> list[FabricGpu]:
        """Every GPU the manager knows, in every domain (NMX-M is site-wide; discovery starts here)."""
        listed = await self._refresh_gpus()
        with self._parsing("GET /gpus"):
            return [
                _gpu(item, domain) for item in listed if (domain := _uuid(item.get("DomainUUID"))) is not None
            ]

    async def list_gpus(self, target: DomainTarget) -> list[FabricGpu]:
        return self._domain_gpus(target, await self._refresh_gpus())

    async def health_gpus(self, target: DomainTarget) -> list[FabricGpu]:
        """The domain's GPUs from a site listing at most ``HEALTH_LISTING_REUSE`` seconds old, shared
        with the other domains' health reads."""
        return self._domain_gpus(target, await self._recent_gpus())

    def _domain_gpus(self, target: DomainTarget, listed: list[dict[str, Any]]) -> list[FabricGpu]:
        with self._parsing("GET /gpus"):
            return [
                _gpu(item, target.domain_uuid)
                for item in listed
                if _uuid(item.get("DomainUUID")) == target.domain_uuid
            ]

    async def list_compute_nodes(self, target: DomainTarget) -> list[FabricComputeNode]:
        """The domain's compute trays with their ``Health`` (``GET /compute-nodes``)."""
        listed, gpus = await asyncio.gather(self._request("GET", "/compute-nodes"), self._refresh_gpus())
        return self._nodes(target, listed, gpus)

    def _nodes(
        self, target: DomainTarget, listed: Any, gpu_listing: list[dict[str, Any]]
    ) -> list[FabricComputeNode]:
        gpus = {g["ID"]: g for g in gpu_listing if isinstance(g, dict) and "ID" in g}
        with self._parsing("GET /compute-nodes"):
            nodes = []
            for item in listed:
                if _uuid(item.get("DomainUUID")) != target.domain_uuid:
                    continue
                location = item.get("LocationInfo") or {}
                members = [gpus[i] for i in item.get("GpuIDList") or [] if i in gpus]
                nodes.append(
                    FabricComputeNode(
                        chassis_serial=str(location.get("ChassisSerialNumber") or ""),
                        tray_index=int(location.get("TrayIndex") or 0),
                        slot_id=int(location.get("SlotID") or 0),
                        num_gpus=len(item.get("GpuIDList") or []),
                        health=str(item.get("Health") or "UNKNOWN"),
                        partition_ids=frozenset(
                            int(g["PartitionID"]) for g in members if g.get("PartitionID") is not None
                        ),
                    )
                )
            return nodes

    async def domain_health(self, target: DomainTarget) -> DomainHealth:
        """GPU, compute-node and partition ``Health`` counts; NMX-M reports no switch or controller
        health, so those stay empty / UNKNOWN. The three site-wide listings are asked at once, each
        shared with the other domains' health reads (``HEALTH_LISTING_REUSE``)."""
        gpu_listing, node_listing, partition_listing = await asyncio.gather(
            self._recent_gpus(),
            self._recent("/compute-nodes", lambda: self._request("GET", "/compute-nodes")),
            self._recent("/partitions", lambda: self._request("GET", "/partitions")),
        )
        partitions = await self._partitions_of(target, partition_listing)
        gpus = self._domain_gpus(target, gpu_listing)
        nodes = self._nodes(target, node_listing, gpu_listing)
        return DomainHealth(
            domain_uuid=target.domain_uuid,
            gpus=health_counts(g.health for g in gpus),
            compute_nodes=health_counts(n.health for n in nodes),
            switch_nodes={},
            partitions=health_counts(p.health for p in partitions),
        )


def _gpu(item: dict[str, Any], domain_uuid: uuid.UUID) -> FabricGpu:
    location = item.get("LocationInfo") or {}
    partition_id = item.get("PartitionID")
    return FabricGpu(
        gpu_uid=int(item["DeviceUID"]),
        device_id=int(item["DeviceID"]),
        chassis_serial=str(location.get("ChassisSerialNumber") or ""),
        tray_index=int(location.get("TrayIndex") or 0),
        slot_id=int(location.get("SlotID") or 0),
        domain_uuid=domain_uuid,
        health=str(item.get("Health") or "UNKNOWN"),
        nmx_partition_id=int(partition_id) if partition_id is not None else None,
        description=str(item.get("Description") or "").strip(),
    )


def _member_ids(members: Any) -> list[str]:
    """GPU entity IDs of an ID-based ``PartitionMembers``; location-based or null members give none."""
    if not isinstance(members, list):
        return []
    return [m for m in members if isinstance(m, str)]


def _uuid(value: Any) -> uuid.UUID | None:
    return _uuid_of(str(value))


@functools.lru_cache(maxsize=4096)
def _uuid_of(text: str) -> uuid.UUID | None:
    """A listing repeats a few domain uuids over every GPU: each is parsed once."""
    try:
        return uuid.UUID(text)
    except ValueError:
        return None

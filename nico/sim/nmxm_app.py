"""Simulated NMX-M: the REST API of spec §5 over a :class:`SimFabric`, and a runner serving it.

One site-wide endpoint, HTTP basic auth, PascalCase JSON. Create (POST), update (PUT, full member
list) and delete answer ``202 {"operationId"}``; the operation completes after ``operation_delay``
seconds (or the domain's / site's ``operation_delay`` knob), stays ``in-progress`` while a
``never_complete`` knob is set, and then either applies to the fabric (``completed``) or ``failed``
with ``Result.Error`` = the ``NMX_ST_*`` name a controller answered. Operations advance lazily, on
every request, so a late completion is seen by whoever asks next. Requests that are malformed or
name unknown entities are refused at once (400/404, error body ``{httpErrorCode, customErrorCode,
description}``); the partition rules are applied when the operation runs, as the controller would.
"""

from __future__ import annotations

import asyncio
import itertools
import secrets
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Annotated, Any

from fastapi import Depends, FastAPI, Request
from fastapi.responses import JSONResponse
from fastapi.security import HTTPBasic, HTTPBasicCredentials

from nico.fabric.backend import PartitionNotFound
from nico.fabric.nmxc import nmx_c_pb2 as pb
from nico.fabric.return_codes import code_name, return_code_error
from nico.sim.fabric import (
    MAX_NAME_LENGTH,
    EndpointDown,
    SimDomain,
    SimError,
    SimFabric,
    SimGpu,
    SimPartition,
)
from nico.sim.http_server import Listening, listen
from nico.sim.nmxc_server import LOOPBACK

_BASIC = HTTPBasic(auto_error=False)
TERMINAL = frozenset({"completed", "failed", "cancelled"})
_BAD_REQUEST = frozenset({pb.NMX_ST_UNDEFINED, pb.NMX_ST_BADPARAM, pb.NMX_ST_NOT_SUPPORTED})


class NmxmError(Exception):
    """An HTTP error answer; ``code`` is the ``NMX_ST_*`` return code behind it, if any."""

    def __init__(self, status: int, code: int | None, description: str) -> None:
        super().__init__(description)
        self.status = status
        self.code = code
        self.description = description


def _refusal(code: int, description: str) -> NmxmError:
    """The HTTP answer to a refusal with return code ``code``."""
    error = return_code_error(code, description)
    if isinstance(error, PartitionNotFound):
        return NmxmError(404, code, description)
    if error.retryable:
        return NmxmError(503, code, description)
    return NmxmError(400 if code in _BAD_REQUEST else 409, code, description)


@dataclass
class Operation:
    id: str
    method: str
    uri: str
    body: dict[str, Any] | None
    domain: SimDomain
    apply: Callable[[], dict[str, Any] | None]
    created_at: datetime
    started: float  # monotonic
    status: str = "pending"
    updated_at: datetime = field(default_factory=lambda: datetime.now(UTC))
    result: dict[str, Any] | None = None


class NmxmState:
    """The operations of one simulated NMX-M and their progress."""

    def __init__(self, fabric: SimFabric, operation_delay: float) -> None:
        self.fabric = fabric
        self.operation_delay = operation_delay
        self.operations: dict[str, Operation] = {}
        self._open: list[Operation] = []
        self._ids = itertools.count(1)
        self.closing = asyncio.Event()

    def issue(
        self,
        method: str,
        uri: str,
        body: dict[str, Any] | None,
        domain: SimDomain,
        apply: Callable[[], dict[str, Any] | None],
    ) -> Operation:
        op = Operation(
            id=f"{next(self._ids):024x}",
            method=method,
            uri=uri,
            body=body,
            domain=domain,
            apply=apply,
            created_at=datetime.now(UTC),
            started=time.monotonic(),
        )
        self.operations[op.id] = op
        self._open.append(op)
        return op

    def advance(self) -> None:
        """Run every operation whose time has come, in the order they were issued."""
        if not self._open:
            return
        now = time.monotonic()
        still_open = []
        for op in self._open:
            if op.status in TERMINAL:
                continue
            domain_faults, site_faults = op.domain.gate.faults, self.fabric.site_gate.faults
            delay = domain_faults.operation_delay
            if delay is None:
                delay = site_faults.operation_delay
            if delay is None:
                delay = self.operation_delay
            if domain_faults.never_complete or site_faults.never_complete or now < op.started + delay:
                if op.status == "pending":
                    op.status, op.updated_at = "in-progress", datetime.now(UTC)
                still_open.append(op)
                continue
            try:
                data = op.apply()
            except SimError as exc:
                op.status = "failed"
                op.result = {"Data": None, "Error": code_name(exc.code), "Details": exc.message}
            else:
                op.status = "completed"
                op.result = {"Data": data, "Error": "", "Details": ""}
            op.updated_at = datetime.now(UTC)
        self._open = still_open

    def cancel(self, op: Operation) -> None:
        if op.status in TERMINAL:
            raise NmxmError(400, pb.NMX_ST_BADPARAM, f"operation {op.id} is already {op.status}")
        op.status, op.updated_at = "cancelled", datetime.now(UTC)


def create_nmxm_app(
    fabric: SimFabric, *, username: str = "admin", password: str = "admin", operation_delay: float = 0.0
) -> FastAPI:
    """The NMX-M REST app; its :class:`NmxmState` is ``app.state.nmxm``."""
    state = NmxmState(fabric, operation_delay)
    app = FastAPI(title="NMX Manager Rest API (nico simulator)", version="85.1.1000")
    app.state.nmxm = state
    app.exception_handler(NmxmError)(_error_answer)
    guarded = [Depends(_guard(state, username, password))]
    _partition_routes(app, state, guarded)
    _operation_routes(app, state, guarded)
    _inventory_routes(app, fabric, guarded)
    return app


async def _error_answer(request: Request, exc: NmxmError) -> JSONResponse:
    """NMX-M's error body: ``{httpErrorCode, customErrorCode, description}``."""
    custom = code_name(exc.code) if exc.code is not None else f"HTTP_{exc.status}"
    body = {"httpErrorCode": exc.status, "customErrorCode": custom, "description": exc.description}
    headers = {"WWW-Authenticate": "Basic"} if exc.status == 401 else None
    return JSONResponse(body, status_code=exc.status, headers=headers)


def _guard(state: NmxmState, username: str, password: str) -> Callable[..., Awaitable[None]]:
    """The dependency of every route: basic auth, then the site's fault knobs, then due operations."""
    fabric = state.fabric

    async def guard(credentials: Annotated[HTTPBasicCredentials | None, Depends(_BASIC)]) -> None:
        if credentials is None or not (
            secrets.compare_digest(credentials.username.encode(), username.encode())
            and secrets.compare_digest(credentials.password.encode(), password.encode())
        ):
            raise NmxmError(401, None, "unauthorized")
        gate = fabric.site_gate
        if not gate.idle:
            try:
                injected = await _unless_closing(state, gate.enter())
            except EndpointDown as exc:
                raise NmxmError(503, None, str(exc)) from None
            if injected is not None:
                raise _refusal(injected, "injected error")
        state.advance()

    return guard


def _partition_routes(app: FastAPI, state: NmxmState, guarded: list[Any]) -> None:
    """``/nmx/v1/partitions``: read at once; create, update and delete as operations."""
    fabric = state.fabric

    @app.get("/nmx/v1/partitions", dependencies=guarded)
    async def list_partitions() -> list[dict[str, Any]]:
        return [
            _partition_json(d, p)
            for d in fabric.domains.values()
            for p in sorted(d.partitions.values(), key=lambda p: p.partition_id)
        ]

    @app.get("/nmx/v1/partitions/{entity_id}", dependencies=guarded)
    async def get_partition(entity_id: str) -> dict[str, Any]:
        domain, partition = _partition_or_404(fabric, entity_id)
        return _partition_json(domain, partition)

    @app.post("/nmx/v1/partitions", dependencies=guarded, status_code=202)
    async def create_partition(request: Request) -> dict[str, str]:
        body = await _json_object(request)
        name = body.get("Name")
        if not isinstance(name, str) or not 1 <= len(name) <= MAX_NAME_LENGTH:
            raise NmxmError(400, pb.NMX_ST_BADPARAM, f"Name: 1..{MAX_NAME_LENGTH} printable ASCII characters")
        gpus = _members(fabric, body.get("Members"), allow_empty=False)
        domains = {g.domain_uuid for g in gpus}
        if len(domains) != 1:
            raise NmxmError(400, pb.NMX_ST_BADPARAM, "the GPUs of a partition must share one NVLink domain")
        domain = fabric.domain(domains.pop())
        uids = [g.gpu_uid for g in gpus]

        def apply() -> dict[str, Any]:
            return _partition_json(domain, fabric.create_partition(domain.domain_uuid, name, uids))

        return _accepted(state.issue("post", "/nmx/v1/partitions", body, domain, apply))

    @app.put("/nmx/v1/partitions/{entity_id}", dependencies=guarded, status_code=202)
    async def update_partition(entity_id: str, request: Request) -> dict[str, str]:
        domain, _ = _partition_or_404(fabric, entity_id)
        body = await _json_object(request)
        gpus = _members(fabric, body.get("Members"), allow_empty=True)
        if any(g.domain_uuid != domain.domain_uuid for g in gpus):
            raise NmxmError(400, pb.NMX_ST_BADPARAM, "a GPU of another NVLink domain")
        uids = [g.gpu_uid for g in gpus]

        def apply() -> dict[str, Any]:
            _, partition = _partition_or_gone(fabric, entity_id)
            return _partition_json(
                domain, fabric.set_members(domain.domain_uuid, partition.partition_id, uids)
            )

        return _accepted(state.issue("put", f"/nmx/v1/partitions/{entity_id}", body, domain, apply))

    @app.delete("/nmx/v1/partitions/{entity_id}", dependencies=guarded, status_code=202)
    async def delete_partition(entity_id: str) -> dict[str, str]:
        domain, _ = _partition_or_404(fabric, entity_id)

        def apply() -> None:
            _, partition = _partition_or_gone(fabric, entity_id)
            fabric.delete_partition(domain.domain_uuid, partition.partition_id)

        return _accepted(state.issue("delete", f"/nmx/v1/partitions/{entity_id}", None, domain, apply))


def _operation_routes(app: FastAPI, state: NmxmState, guarded: list[Any]) -> None:
    """``/nmx/v1/operations``: read, and cancel while not terminal."""

    @app.get("/nmx/v1/operations", dependencies=guarded)
    async def list_operations() -> list[dict[str, Any]]:
        return [_operation_json(op) for op in state.operations.values()]

    @app.get("/nmx/v1/operations/{operation_id}", dependencies=guarded)
    async def get_operation(operation_id: str) -> dict[str, Any]:
        return _operation_json(_operation_or_404(state, operation_id))

    @app.delete("/nmx/v1/operations/{operation_id}", dependencies=guarded, status_code=202)
    async def cancel_operation(operation_id: str) -> dict[str, str]:
        op = _operation_or_404(state, operation_id)
        state.cancel(op)
        return _accepted(op)


def _inventory_routes(app: FastAPI, fabric: SimFabric, guarded: list[Any]) -> None:
    """``/nmx/v1/gpus`` (by domain when asked) and ``/nmx/v1/compute-nodes``."""

    @app.get("/nmx/v1/gpus", dependencies=guarded)
    async def list_gpus(request: Request) -> list[dict[str, Any]]:
        wanted = _domain_filter(request)
        return [
            _gpu_json(gpu, d.owner.get(gpu.gpu_uid), d.gpu_description)
            for d in fabric.domains.values()
            if wanted is None or d.domain_uuid in wanted
            for gpu in d.gpus.values()
        ]

    @app.get("/nmx/v1/compute-nodes", dependencies=guarded)
    async def list_compute_nodes() -> list[dict[str, Any]]:
        nodes: dict[tuple[str, int], list[SimGpu]] = {}
        for d in fabric.domains.values():
            for gpu in d.gpus.values():
                nodes.setdefault((gpu.chassis_serial, gpu.tray_index), []).append(gpu)
        return [_compute_node_json(fabric.domain(gpus[0].domain_uuid), gpus) for gpus in nodes.values()]


async def _unless_closing(state: NmxmState, entered: Any) -> int | None:
    """Await a fault gate, but give up when the server is stopping (so a hung request ends)."""
    gate_task = asyncio.ensure_future(entered)
    closing_task = asyncio.ensure_future(state.closing.wait())
    done, pending = await asyncio.wait({gate_task, closing_task}, return_when=asyncio.FIRST_COMPLETED)
    for task in pending:
        task.cancel()
    if gate_task not in done:
        raise NmxmError(503, None, "server stopping")
    result: int | None = gate_task.result()
    return result


async def _json_object(request: Request) -> dict[str, Any]:
    try:
        body = await request.json()
    except ValueError:
        raise NmxmError(400, pb.NMX_ST_BADPARAM, "the body is not JSON") from None
    if not isinstance(body, dict):
        raise NmxmError(400, pb.NMX_ST_BADPARAM, "the body is not a JSON object")
    return body


def _members(fabric: SimFabric, members: Any, *, allow_empty: bool) -> list[SimGpu]:
    """GPUs named by a ``PartitionMembers`` value (ID-based form only)."""
    if members is None:
        members = []
    if not isinstance(members, list):
        raise NmxmError(400, pb.NMX_ST_BADPARAM, "Members: a list of GPU IDs")
    if any(isinstance(m, dict) for m in members):
        raise NmxmError(400, pb.NMX_ST_NOT_SUPPORTED, "location-based members are not simulated")
    if not all(isinstance(m, str) for m in members) or len(set(members)) != len(members):
        raise NmxmError(400, pb.NMX_ST_BADPARAM, "Members: unique GPU ID strings")
    if not members and not allow_empty:
        raise NmxmError(400, pb.NMX_ST_BADPARAM, "Members: at least one GPU")
    gpus = []
    for entity_id in members:
        gpu = fabric.gpu_by_entity(entity_id)
        if gpu is None:
            raise NmxmError(404, pb.NMX_ST_BADPARAM, f"no GPU {entity_id}")
        gpus.append(gpu)
    return gpus


def _partition_or_404(fabric: SimFabric, entity_id: str) -> tuple[SimDomain, SimPartition]:
    found = fabric.partition_by_entity(entity_id)
    if found is None:
        raise NmxmError(404, pb.NMX_ST_PARTITION_ID_NOT_IN_USE, f"no partition {entity_id}")
    return found


def _partition_or_gone(fabric: SimFabric, entity_id: str) -> tuple[SimDomain, SimPartition]:
    found = fabric.partition_by_entity(entity_id)
    if found is None:
        raise SimError(pb.NMX_ST_PARTITION_ID_NOT_IN_USE, f"partition {entity_id} no longer exists")
    return found


def _operation_or_404(state: NmxmState, operation_id: str) -> Operation:
    op = state.operations.get(operation_id)
    if op is None:
        raise NmxmError(404, None, f"no operation {operation_id}")
    return op


def _domain_filter(request: Request) -> set[uuid.UUID] | None:
    values = request.query_params.getlist("domain")
    if not values:
        return None
    try:
        return {uuid.UUID(v) for v in values}
    except ValueError:
        raise NmxmError(400, pb.NMX_ST_BADPARAM, "domain: NVLink domain uuids") from None


def _accepted(op: Operation) -> dict[str, str]:
    return {"operationId": op.id}


def _time(moment: datetime) -> str:
    return moment.isoformat().replace("+00:00", "Z")


def _partition_json(domain: SimDomain, partition: SimPartition) -> dict[str, Any]:
    return {
        "ID": partition.entity_id,
        "PartitionID": partition.partition_id,
        "Name": partition.name,
        "Type": "ID_BASED",
        "Health": domain.partition_health_of(partition),
        "Members": sorted(domain.gpus[uid].entity_id for uid in partition.gpu_uids),
        "CreatedAt": _time(partition.created_at),
        "UpdatedAt": _time(partition.updated_at),
    }


def _location_json(gpu: SimGpu) -> dict[str, Any]:
    return {
        "ChassisID": gpu.chassis_id,
        "ChassisSerialNumber": gpu.chassis_serial,
        "SlotID": gpu.slot_id,
        "TrayIndex": gpu.tray_index,
        "HostID": gpu.host_id,
    }


_EPOCH = "2025-01-01T00:00:00Z"


def _gpu_json(gpu: SimGpu, partition_id: int | None, description: str) -> dict[str, Any]:
    body: dict[str, Any] = {
        "ID": gpu.entity_id,
        "Name": f"{gpu.chassis_serial}/tray{gpu.tray_index}/gpu{gpu.device_id}",
        "Description": description,
        "InternalDescription": "",
        "CreatedAt": _EPOCH,
        "UpdatedAt": _EPOCH,
        "DomainUUID": str(gpu.domain_uuid),
        "LocationInfo": _location_json(gpu),
        "DeviceUID": gpu.gpu_uid,
        "DeviceID": gpu.device_id,
        "DevicePcieID": 0x2941,
        "SystemUID": gpu.chassis_id,
        "VendorID": 0x10DE,
        "ALIDList": [],
        "PortIDList": [],
        "Health": gpu.health,
    }
    if partition_id is not None:
        body["PartitionID"] = partition_id
    return body


def _compute_node_json(domain: SimDomain, gpus: list[SimGpu]) -> dict[str, Any]:
    first = gpus[0]
    return {
        "ID": f"{first.chassis_id:012x}{first.tray_index:012x}",
        "Name": f"{first.chassis_serial}/tray{first.tray_index}",
        "Description": "",
        "CreatedAt": _EPOCH,
        "UpdatedAt": _EPOCH,
        "DomainUUID": str(first.domain_uuid),
        "LocationInfo": _location_json(first),
        "Health": domain.node_health_of(first.chassis_serial, first.tray_index),
        "GpuIDList": [g.entity_id for g in gpus],
    }


def _operation_json(op: Operation) -> dict[str, Any]:
    body: dict[str, Any] = {
        "ID": op.id,
        "CreatedAt": _time(op.created_at),
        "UpdatedAt": _time(op.updated_at),
        "Status": op.status,
        "Percentage": 100.0 if op.status in TERMINAL else (50.0 if op.status == "in-progress" else 0.0),
        "CurrentStep": op.status,
        "Request": {"Method": op.method, "URI": op.uri, "Body": op.body, "Cancellable": True},
    }
    if op.result is not None:
        body["Result"] = op.result
    return body


class NmxmSimulator:
    """Serves the NMX-M app with uvicorn (on 127.0.0.1 unless ``host`` says otherwise) inside the running
    event loop."""

    def __init__(
        self,
        fabric: SimFabric,
        *,
        port: int = 0,
        username: str = "admin",
        password: str = "admin",
        operation_delay: float = 0.0,
        host: str = LOOPBACK,
    ) -> None:
        self.fabric = fabric
        self.host = host
        self.app = create_nmxm_app(
            fabric, username=username, password=password, operation_delay=operation_delay
        )
        self.state: NmxmState = self.app.state.nmxm
        self.port = port
        self._listening: Listening | None = None

    @property
    def url(self) -> str:
        if not self.port:
            raise RuntimeError("the NMX-M simulator has not started yet")
        return f"http://{self.host}:{self.port}"

    async def start(self) -> NmxmSimulator:
        """Listen (again, on the same port after a :meth:`stop`)."""
        if self._listening is not None:
            return self
        self.state.closing.clear()
        self._listening = await listen(self.app, self.host, self.port)
        self.port = self._listening.port
        return self

    async def stop(self) -> None:
        """Stop listening; the port then refuses connections until :meth:`start`."""
        if self._listening is None:
            return
        self.state.closing.set()
        listening, self._listening = self._listening, None
        await listening.stop()

    async def __aenter__(self) -> NmxmSimulator:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

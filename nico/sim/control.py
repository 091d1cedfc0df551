"""The simulators' control API: faults and tray swaps set from outside their process.

``nico sim nmxc|nmxm --control-port P`` serves it on 127.0.0.1:P (JSON, camelCase), so an operator
can rehearse an outage or a tray swap against a running simulator:

* ``GET /control``: the site (chassis serials, domains, trays) and the faults in force;
* ``POST /control/fault`` ``{"chassisSerial": S, "kind": K, "value": V}`` sets a fault on the
  endpoint serving S: ``down`` (NMX-C: the domain's port really closes; NMX-M: the site endpoint
  answers 503), ``hang`` (calls are held), ``error`` (every call answered with return code V,
  default NMX_ST_NOT_READY), ``latency`` (V seconds before every answer), ``late`` (NMX-M only: the
  domain's operations complete V seconds late, or never when V is null);
* ``DELETE /control/fault?chassisSerial=S`` clears S's faults (back to what the simulator started
  with);
* ``POST /control/replace-tray`` ``{"chassisSerial": S, "trayIndex": T}`` swaps a compute tray
  (:meth:`~nico.sim.fabric.SimFabric.replace_tray`) and answers ``{"oldGuids": [...], "newGuids":
  [...]}`` (GUIDs as decimal strings: they exceed JSON's safe integers).

NMX-C faults are per endpoint (each domain has its own); NMX-M has one endpoint for the site, so
``down``, ``hang``, ``error`` and ``latency`` given for any of its chassis apply to the whole site.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Awaitable, Callable
from typing import Annotated, Any, Literal

from fastapi import FastAPI, Query
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from nico.fabric.nmxc import nmx_c_pb2 as pb
from nico.sim.fabric import Faults, SimFabric
from nico.sim.http_server import Listening, listen
from nico.sim.nmxc_server import LOOPBACK

Manager = Literal["nmxc", "nmxm"]
FaultKind = Literal["down", "hang", "error", "latency", "late"]


class _Body(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid")


class FaultRequest(_Body):
    chassis_serial: str = Field(min_length=1, max_length=64)
    kind: FaultKind
    value: float | None = None


class TrayRequest(_Body):
    chassis_serial: str = Field(min_length=1, max_length=64)
    tray_index: int = Field(ge=0, le=255)


@dataclasses.dataclass
class Endpoints:
    """How the control API reaches the simulator's endpoints: ``stop`` / ``start`` close and reopen a
    domain's NMX-C port (None for NMX-M, whose ``down`` is its site gate)."""

    manager: Manager
    stop: Callable[[uuid.UUID], Awaitable[None]] | None = None
    start: Callable[[uuid.UUID], Awaitable[None]] | None = None
    closed: set[uuid.UUID] = dataclasses.field(default_factory=set)


class ControlError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status, self.message = status, message


def create_control_app(fabric: SimFabric, endpoints: Endpoints) -> FastAPI:
    """The control API over ``fabric``; faults cleared return to those in force now."""
    started = {d: fabric.gate(d).faults for d in fabric.domains}
    started_site = fabric.site_gate.faults
    app = FastAPI(title="nico simulator control", docs_url=None, redoc_url=None)

    @app.exception_handler(ControlError)
    async def refused(_: object, exc: ControlError) -> JSONResponse:
        return JSONResponse({"message": exc.message}, status_code=exc.status)

    @app.get("/control")
    async def show() -> dict[str, Any]:
        return _site(fabric, endpoints)

    @app.post("/control/fault")
    async def set_fault(body: FaultRequest) -> dict[str, Any]:
        domains = _domains(fabric, body.chassis_serial)
        await _apply(fabric, endpoints, domains, body)
        return _site(fabric, endpoints)

    @app.delete("/control/fault")
    async def clear_fault(serial: Annotated[str, Query(alias="chassisSerial")]) -> dict[str, Any]:
        for domain in _domains(fabric, serial):
            fabric.gate(domain).set(**dataclasses.asdict(started[domain]))
            if domain in endpoints.closed and endpoints.start is not None:
                await endpoints.start(domain)
                endpoints.closed.discard(domain)
        if endpoints.manager == "nmxm":
            fabric.site_gate.set(**dataclasses.asdict(started_site))
        return _site(fabric, endpoints)

    @app.post("/control/replace-tray")
    async def replace_tray(body: TrayRequest) -> dict[str, list[str]]:
        _domains(fabric, body.chassis_serial)
        try:
            old, new = fabric.replace_tray(body.chassis_serial, body.tray_index)
        except KeyError as exc:
            raise ControlError(404, str(exc.args[0])) from None
        return {"oldGuids": [str(g) for g in old], "newGuids": [str(g) for g in new]}

    return app


def _domains(fabric: SimFabric, serial: str) -> list[uuid.UUID]:
    domains = fabric.domains_of(serial)
    if not domains:
        raise ControlError(404, f"no chassis {serial} in this site")
    return domains


async def _apply(
    fabric: SimFabric, endpoints: Endpoints, domains: list[uuid.UUID], body: FaultRequest
) -> None:
    """Set one fault on the endpoints serving ``domains``."""
    if body.kind == "late":
        if endpoints.manager != "nmxm":
            raise ControlError(400, "late completions are an NMX-M fault (NMX-C answers each call)")
        for domain in domains:
            late = {"never_complete": True} if body.value is None else {"operation_delay": _seconds(body)}
            fabric.gate(domain).set(**late)
        return
    if body.kind == "down" and endpoints.manager == "nmxc":
        for domain in domains:
            if domain not in endpoints.closed and endpoints.stop is not None:
                await endpoints.stop(domain)
                endpoints.closed.add(domain)
        return
    change = _change(body)
    if endpoints.manager == "nmxm":
        fabric.site_gate.set(**change)
    else:
        for domain in domains:
            fabric.gate(domain).set(**change)


def _change(body: FaultRequest) -> dict[str, object]:
    if body.kind == "down":
        return {"down": True}
    if body.kind == "hang":
        return {"hang": True}
    if body.kind == "latency":
        return {"latency": _seconds(body)}
    code = pb.NMX_ST_NOT_READY if body.value is None else int(body.value)
    if code in (pb.NMX_ST_UNDEFINED, pb.NMX_ST_SUCCESS) or code not in pb.StReturnCode.values():
        raise ControlError(400, f"error needs a failing NMX return code, not {body.value}")
    return {"error_rate": 1.0, "error_code": code}


def _seconds(body: FaultRequest) -> float:
    if body.value is None or not 0 <= body.value <= 3600:
        raise ControlError(400, f"{body.kind} needs a value in seconds (0..3600)")
    return body.value


def _faults(faults: Faults, down: bool) -> dict[str, Any]:
    found: dict[str, Any] = {}
    if down or faults.down:
        found["down"] = True
    if faults.hang:
        found["hang"] = True
    if faults.error_rate:
        found["error"] = {"rate": faults.error_rate, "code": faults.error_code}
    if faults.latency:
        found["latency"] = faults.latency
    if faults.never_complete or faults.operation_delay is not None:
        found["late"] = None if faults.never_complete else faults.operation_delay
    return found


def _site(fabric: SimFabric, endpoints: Endpoints) -> dict[str, Any]:
    chassis = []
    for serial in sorted(fabric.chassis_serials):
        for domain in fabric.domains_of(serial):
            trays = sorted({t for (s, t) in fabric.domain(domain).compute_nodes() if s == serial})
            faults = _faults(fabric.gate(domain).faults, domain in endpoints.closed)
            chassis.append(
                {"chassisSerial": serial, "domainUuid": str(domain), "trays": trays, "faults": faults}
            )
    site = _faults(fabric.site_gate.faults, False) if endpoints.manager == "nmxm" else {}
    return {"manager": endpoints.manager, "chassis": chassis, "siteFaults": site}


class ControlServer:
    """The control API on 127.0.0.1:``port`` inside the running event loop."""

    def __init__(self, fabric: SimFabric, endpoints: Endpoints, port: int = 0) -> None:
        self.app = create_control_app(fabric, endpoints)
        self.port = port
        self._listening: Listening | None = None

    @property
    def url(self) -> str:
        return f"http://{LOOPBACK}:{self.port}"

    async def __aenter__(self) -> ControlServer:
        self._listening = await listen(self.app, LOOPBACK, self.port)
        self.port = self._listening.port
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._listening is not None:
            await self._listening.stop()
            self._listening = None

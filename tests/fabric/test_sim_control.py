"""The simulators' control API over real HTTP on loopback, checked through real NMX clients: faults
set from outside reach the wire, clearing them restores service, a tray swap changes the GUIDs the
fabric reports."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest
import pytest_asyncio

from nico.fabric.backend import DEFAULT_PARTITION_ID, DomainTarget, FabricBusy, FabricUnavailable
from nico.fabric.nmxc import nmx_c_pb2 as pb
from nico.fabric.nmxc.client import NmxcBackend
from nico.fabric.nmxm.client import NmxmBackend
from nico.sim.control import ControlServer, Endpoints
from nico.sim.fabric import SimFabric
from nico.sim.nmxc_server import NmxcSimulator
from nico.sim.nmxm_app import NmxmSimulator
from tests.support.waiting import wait_for


@pytest_asyncio.fixture
async def nmxc_control(nmxc_sim: NmxcSimulator, fabric: SimFabric) -> AsyncIterator[httpx.AsyncClient]:
    endpoints = Endpoints("nmxc", stop=nmxc_sim.stop_domain, start=nmxc_sim.start_domain)
    async with ControlServer(fabric, endpoints) as control, httpx.AsyncClient(base_url=control.url) as http:
        yield http


@pytest_asyncio.fixture
async def nmxm_control(nmxm_sim: NmxmSimulator, fabric: SimFabric) -> AsyncIterator[httpx.AsyncClient]:
    async with (
        ControlServer(fabric, Endpoints("nmxm")) as control,
        httpx.AsyncClient(base_url=control.url) as http,
    ):
        yield http


async def _answers(client: NmxcBackend | NmxmBackend, target: DomainTarget) -> bool:
    try:
        await client.list_partitions(target)
    except (FabricUnavailable, FabricBusy):
        return False
    return True


async def test_control_shows_the_site_and_the_faults_in_force(nmxc_control: httpx.AsyncClient) -> None:
    site = (await nmxc_control.get("/control")).json()
    serials = [c["chassisSerial"] for c in site["chassis"]]
    assert serials == ["SIM-0001", "SIM-0002", "SIM-0003", "SIM-0004"]
    assert site["chassis"][0]["trays"] == list(range(18)) and site["chassis"][0]["faults"] == {}
    set_ = await nmxc_control.post(
        "/control/fault", json={"chassisSerial": "SIM-0002", "kind": "latency", "value": 0.01}
    )
    faults = {c["chassisSerial"]: c["faults"] for c in set_.json()["chassis"]}
    assert faults["SIM-0002"] == {"latency": 0.01} and faults["SIM-0001"] == {}


async def test_down_closes_the_port_and_clearing_reopens_it(
    nmxc_control: httpx.AsyncClient, nmxc: NmxcBackend, nmxc_sim: NmxcSimulator
) -> None:
    target = nmxc_sim.target("SIM-0001")
    assert await _answers(nmxc, target)
    down = await nmxc_control.post("/control/fault", json={"chassisSerial": "SIM-0001", "kind": "down"})
    assert down.status_code == 200
    with pytest.raises(FabricUnavailable):
        await nmxc.list_partitions(target)
    assert await _answers(nmxc, nmxc_sim.target("SIM-0002"))  # other endpoints are untouched
    cleared = await nmxc_control.delete("/control/fault", params={"chassisSerial": "SIM-0001"})
    assert cleared.status_code == 200
    await wait_for(lambda: _answers(nmxc, target), what="the endpoint answering again")


async def test_error_answers_the_given_return_code(
    nmxc_control: httpx.AsyncClient, nmxc: NmxcBackend, nmxc_sim: NmxcSimulator
) -> None:
    body = {"chassisSerial": "SIM-0001", "kind": "error", "value": pb.NMX_ST_NOT_READY}
    assert (await nmxc_control.post("/control/fault", json=body)).status_code == 200
    with pytest.raises(FabricBusy):
        await nmxc.list_partitions(nmxc_sim.target("SIM-0001"))
    bad = await nmxc_control.post("/control/fault", json={**body, "value": pb.NMX_ST_SUCCESS})
    assert bad.status_code == 400 and "return code" in bad.json()["message"]
    unknown = await nmxc_control.post("/control/fault", json={**body, "chassisSerial": "NOPE"})
    assert unknown.status_code == 404
    late = await nmxc_control.post("/control/fault", json={**body, "kind": "late", "value": 1})
    assert late.status_code == 400  # NMX-C answers each call: no late completions


async def test_a_swapped_tray_reports_new_guids_in_the_default_partition(
    nmxc_control: httpx.AsyncClient, nmxc: NmxcBackend, nmxc_sim: NmxcSimulator, fabric: SimFabric
) -> None:
    target = nmxc_sim.target("SIM-0001")
    before = {g.gpu_uid: g for g in await nmxc.list_gpus(target)}
    tray = [g for g in before.values() if g.tray_index == 5]
    mine = sorted(g.gpu_uid for g in tray)[:2]
    fabric.remove_gpus("SIM-0001", DEFAULT_PARTITION_ID, mine)
    fabric.create_partition("SIM-0001", "a-job", mine)  # a job held two of its GPUs
    swapped = await nmxc_control.post(
        "/control/replace-tray", json={"chassisSerial": "SIM-0001", "trayIndex": 5}
    )
    old, new = (list(map(int, swapped.json()[k])) for k in ("oldGuids", "newGuids"))
    assert sorted(old) == sorted(g.gpu_uid for g in tray) and len(new) == 4 and not set(new) & set(before)
    after = {g.gpu_uid: g for g in await nmxc.list_gpus(target)}
    assert not set(old) & set(after)
    assert [(after[u].tray_index, after[u].device_id) for u in new] == [(5, d) for d in (1, 2, 3, 4)]
    partitions = {p.name: p for p in await nmxc.list_partitions(target)}
    assert set(new) <= partitions["Default Partition"].gpu_uids and not partitions["a-job"].gpu_uids
    assert (
        SimFabric.from_json(fabric.to_json()).domain("SIM-0001").gpus.keys()
        == fabric.domain("SIM-0001").gpus.keys()
    )
    missing = await nmxc_control.post(
        "/control/replace-tray", json={"chassisSerial": "SIM-0001", "trayIndex": 40}
    )
    assert missing.status_code == 404


async def test_nmxm_faults_apply_to_the_site_endpoint(
    nmxm_control: httpx.AsyncClient, nmxm: NmxmBackend, fabric: SimFabric
) -> None:
    target = DomainTarget(domain_uuid=fabric.domain("SIM-0002").domain_uuid)
    await nmxm_control.post("/control/fault", json={"chassisSerial": "SIM-0002", "kind": "down"})
    assert not await _answers(nmxm, target)
    shown = (await nmxm_control.get("/control")).json()
    assert shown["siteFaults"] == {"down": True}
    await nmxm_control.delete("/control/fault", params={"chassisSerial": "SIM-0002"})
    assert await _answers(nmxm, target)
    late = await nmxm_control.post(
        "/control/fault", json={"chassisSerial": "SIM-0002", "kind": "late", "value": None}
    )
    assert late.status_code == 200 and fabric.gate("SIM-0002").faults.never_complete

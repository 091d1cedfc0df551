"""Rack shapes and tray generations of the simulator, and finding them through the fabric: minipods
(several NMX-C domains behind one chassis serial, one endpoint each), GB300 trays whose GPUs report
their name (NMX-C ``GpuTopoInfo.description``, NMX-M ``Description``), snapshots of them (old ones
still load), discovery of machines with their GPU names, and the fabric observation finding each
domain's endpoint by Hello."""

from __future__ import annotations

import json
import uuid

import pytest

from nico.config import NvLinkConfig
from nico.fabric.backend import DEFAULT_PARTITION_ID, DomainTarget, EndpointNotConfigured
from nico.fabric.nmxc.client import NmxcBackend
from nico.fabric.nmxm.client import NmxmBackend
from nico.fabric.observation import FabricObserver
from nico.reconciler.discovery import discover_endpoint, discover_machine
from nico.sim.fabric import SimFabric
from nico.sim.nmxc_server import NmxcSimulator
from nico.sim.nmxm_app import NmxmSimulator
from tests.fabric.conftest import CALL_TIMEOUT


def test_a_minipod_rack_holds_several_domains_behind_one_chassis_serial() -> None:
    fabric = SimFabric(1, minipods=1, minipod_domains=3, seed=4)
    rack, *pods = fabric.domains.values()
    assert len(pods) == 3 and fabric.shape == "mixed"
    assert fabric.domains_of("SIM-0002") == [d.domain_uuid for d in pods]
    assert fabric.domain("SIM-0002") is pods[0]  # the chassis serial names its first domain
    trays = [sorted({g.tray_index for g in d.gpus.values()}) for d in pods]
    assert trays == [list(range(6)), list(range(6, 12)), list(range(12, 18))]
    for pod in pods:
        assert pod.chassis_serials == ("SIM-0002",) and len(pod.gpus) == 24
        assert pod.switch_slots("SIM-0002") == rack.switch_slots("SIM-0001")
    # The trays sit where an NVL72's would: the same slots, each once in the rack.
    pod_slots = sorted(g.slot_id for d in pods for g in d.gpus.values() if g.device_id == 1)
    assert pod_slots == sorted(g.slot_id for g in rack.gpus.values() if g.device_id == 1)
    uids = [u for d in fabric.domains.values() for u in d.gpus]
    assert len(set(uids)) == len(uids) and len({d.domain_uuid for d in fabric.domains.values()}) == 4
    # A site grown by a minipod keeps the uuids and GUIDs of its racks and pairs.
    before = SimFabric(1, nvl36x2=1, seed=4)
    after = SimFabric(1, nvl36x2=1, minipods=1, seed=4)
    assert [(d, sorted(before.domain(d).gpus)) for d in before.domains] == [
        (d, sorted(after.domain(d).gpus)) for d in list(after.domains)[:2]
    ]
    with pytest.raises(ValueError, match="minipod_domains"):
        SimFabric(0, minipods=1, minipod_domains=4)
    with pytest.raises(ValueError, match="gpu"):
        SimFabric(1, gpu="h100")


def test_snapshots_round_trip_minipods_and_gb300_and_old_ones_still_load() -> None:
    fabric = SimFabric(0, minipods=2, gpu="gb300", seed=9)
    second = list(fabric.domains)[1]
    uids = sorted(fabric.domain(second).gpus)[:4]
    fabric.remove_gpus(second, DEFAULT_PARTITION_ID, uids)
    fabric.create_partition(second, "pod-lp", uids)
    again = SimFabric.from_json(fabric.to_json())
    assert (again.minipods, again.minipod_domains, again.gpu_model, again.shape) == (2, 2, "gb300", "minipod")
    assert list(again.domains) == list(fabric.domains)
    assert all(again.members(d) == fabric.members(d) for d in fabric.domains)
    assert {d.gpu_description for d in again.domains.values()} == {"NVIDIA GB300"}
    # A snapshot written before shapes and generations were recorded: NVL72/NVL36x2 of GB200 trays.
    old = SimFabric(1, nvl36x2=1, seed=9)
    recorded = json.loads(old.to_json())
    for key in ("minipods", "minipod_domains", "gpu"):
        del recorded[key]
    loaded = SimFabric.from_json(json.dumps(recorded))
    assert list(loaded.domains) == list(old.domains) and loaded.gpu_model == "gb200"
    assert loaded.shape == "mixed" and loaded.minipods == 0


@pytest.mark.e2e
async def test_each_minipod_domain_has_its_endpoint_and_gb300_gpus_report_their_name() -> None:
    fabric = SimFabric(0, minipods=1, gpu="gb300", seed=2)
    async with NmxcSimulator(fabric) as nmxc:
        backend = NmxcBackend(NvLinkConfig(), call_timeout=CALL_TIMEOUT)
        try:
            first, other = fabric.domains
            assert nmxc.endpoints == {"SIM-0001": nmxc.url(first)}
            assert set(nmxc.domain_endpoints) == {first, other}
            for domain, url in nmxc.domain_endpoints.items():
                hello = await backend.hello(DomainTarget(uuid.UUID(int=0), url))
                assert hello.domain_uuid == domain
                listed = await backend.gpu_topology(DomainTarget(domain, url))
                sim = fabric.domain(domain).gpus
                assert {g.gpu_uid for g in listed} == set(sim)
                for gpu in listed:
                    s = sim[gpu.gpu_uid]
                    assert (gpu.description, gpu.device_id, gpu.slot_id, gpu.tray_index) == (
                        "NVIDIA GB300",
                        s.device_id,
                        s.slot_id,
                        s.tray_index,
                    )
                    assert gpu.domain_uuid == domain and gpu.nmx_partition_id == DEFAULT_PARTITION_ID
                # GetGpuInfoList does not carry the name: discovery asks GetTopologyInfo.
                assert {g.description for g in await backend.list_gpus(DomainTarget(domain, url))} == {""}
                machines = await discover_endpoint(backend, url)
                assert len(machines) == 9 and {m.domain_uuid for m in machines.values()} == {domain}
                info = next(iter(machines.values())).nvlink_info()
                assert {g.name for g in info.gpus} == {"NVIDIA GB300"}
            # populate: the registered endpoint serves the first domain; the tray is in the other.
            urls = [nmxc.url(first), nmxc.url(other)]
            found = await discover_machine(backend, urls, "SIM-0001", 12)
            assert found is not None and found.domain_uuid == other
            assert await discover_machine(backend, urls[:1], "SIM-0001", 12) is None
        finally:
            await backend.close()


@pytest.mark.e2e
async def test_nmxm_reports_the_gpu_name_as_its_description() -> None:
    fabric = SimFabric(0, minipods=1, gpu="gb300", seed=2)
    async with NmxmSimulator(fabric, username="u", password="p") as sim:
        client = NmxmBackend(sim.url, "u", "p", operation_timeout=CALL_TIMEOUT, call_timeout=CALL_TIMEOUT)
        try:
            gpus = await client.site_gpus()
        finally:
            await client.close()
    assert {g.description for g in gpus} == {"NVIDIA GB300"}
    assert {g.domain_uuid for g in gpus} == set(fabric.domains)


@pytest.mark.e2e
async def test_the_observer_finds_a_domain_behind_a_registered_chassis_by_hello() -> None:
    """The chassis' registered endpoint serves the minipod's first domain; the second is found among
    the discovery endpoints (one of them down: it does not stop the others being asked)."""
    fabric = SimFabric(0, minipods=1, seed=2)
    first, other = fabric.domains
    async with NmxcSimulator(fabric) as nmxc:
        config = NvLinkConfig(fabric_call_timeout="2s")
        backend = NmxcBackend(config, call_timeout=CALL_TIMEOUT)
        try:
            alone = FabricObserver(backend, config.nmxc_endpoints)
            alone.use_registry({"SIM-0001": nmxc.url(first)}, None)
            assert (await alone.target(first, {"SIM-0001"})).endpoint == nmxc.url(first)
            with pytest.raises(EndpointNotConfigured, match=f"serves domain {first}, not {other}"):
                await alone.target(other, {"SIM-0001"})

            down = "http://127.0.0.1:1"
            found = FabricObserver(backend, [down, nmxc.url(other)])
            found.use_registry({"SIM-0001": nmxc.url(first)}, None)
            assert (await found.target(other, {"SIM-0001"})).endpoint == nmxc.url(other)
            assert (await found.target(first, {"SIM-0001"})).endpoint == nmxc.url(first)
            assert found.endpoints.discovered == {first: nmxc.url(first), other: nmxc.url(other)}
            assert down in found.endpoints._hello_failed
        finally:
            await backend.close()

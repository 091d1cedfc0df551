"""What operators and tenants are shown of a live site: ``nico admin nvlink-plan`` (every format, in
observe mode, sending nothing), ``nico admin nvlink-domains``, the topology view and the allocation
figures, after another manager made a partition through NMX-C gRPC."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest
import yaml
from sqlalchemy.ext.asyncio import AsyncSession
from typer.testing import CliRunner

from nico.cli import app
from nico.config import NvLinkConfig, Settings
from nico.fabric.backend import DEFAULT_PARTITION_ID
from nico.fabric.nmxc.client import NmxcBackend
from nico.reconciler.planner import partition_name
from nico.sim.fabric import SimFabric
from nico.sim.nmxc_server import NmxcSimulator
from tests.reconciler.conftest import MakeReconciler
from tests.support import factories as f
from tests.support.auth import bearer
from tests.support.foreign_manager import nmxc_take
from tests.support.sim_site import SimSite, place, seed


async def run(*args: str) -> tuple[int, str]:
    """The CLI in a thread: its own event loop must not block the test's (simulator, session)."""
    result = await asyncio.to_thread(CliRunner().invoke, app, list(args))
    return result.exit_code, result.stdout if result.exit_code == 0 else result.output


def tray_gpus(site: SimSite, tray: int) -> list[int]:
    domain = site.domains[0]
    machine = site.machines[domain][tray]
    return sorted(
        g.gpu_uid
        for g in site.fabric.domain(domain).gpus.values()
        if g.chassis_serial == machine.chassis_serial and g.tray_index == machine.tray_index
    )


def fabric_now(site: SimSite) -> dict[tuple[int, str], frozenset[int]]:
    return {(p.partition_id, p.name): frozenset(p.gpu_uids) for p in site.fabric.partitions(site.domains[0])}


async def test_nvlink_plan_domains_and_topology_show_a_live_site(
    cli_env: dict[str, str],
    monkeypatch: pytest.MonkeyPatch,
    session: AsyncSession,
    client: httpx.AsyncClient,
    settings: Settings,
    make_reconciler: MakeReconciler,
) -> None:
    monkeypatch.setenv("NICO_NVLINK_CONFIG__MODE", "observe")
    fabric = SimFabric(racks=1, seed=43)
    async with NmxcSimulator(fabric) as sim:
        site = await seed(session, fabric, sim.endpoints)
        domain = site.domains[0]
        await nmxc_take(sim.url(domain), "operator-job", tray_gpus(site, 0) + tray_gpus(site, 1)[:2])
        lp = await f.logical_partition(session, site.nv.tenant, site.nv.site)
        waiting = await place(session, site, site.machines[domain][0], {0: lp}, name="waiting")
        await place(session, site, site.machines[domain][2], dict.fromkeys(range(4), lp), name="free")
        before = fabric_now(site)

        code, output = await run("admin", "nvlink-plan", "--format", "json")
        assert code == 0, output
        (found,) = json.loads(output)
        assert found["domain_uuid"] == str(domain) and found["mode"] == "observe"
        assert found["foreign_partitions"] == "keep" and found["error"] is None
        assert [(o["kind"], o["nmx_partition_id"]) for o in found["operations"]] == [
            ("remove", DEFAULT_PARTITION_ID),
            ("create", None),
        ]
        assert found["operations"][1]["partition"] == partition_name(lp.id)
        assert all(o["why"] for o in found["operations"])
        assert found["foreign_gpus"] == 6
        held = {h["gpu_uid"]: h for h in found["held"]}
        assert set(held) == {str(g) for g in tray_gpus(site, 0) + tray_gpus(site, 1)[:2]}
        assert {h["partition"] for h in held.values()} == {"operator-job"}
        assert held[str(tray_gpus(site, 0)[0])]["instance_id"] == str(waiting.id)
        assert held[str(tray_gpus(site, 0)[0])]["wanted_by"] == str(lp.id)

        code, output = await run("admin", "nvlink-plan", "--domain-uuid", str(domain), "--format", "yaml")
        assert code == 0, output
        assert yaml.safe_load(output) == [found]
        code, output = await run("admin", "nvlink-plan")
        assert code == 0, output
        assert "WHY" in output and "operator-job" in output and "observe" in output
        code, output = await run("admin", "nvlink-plan", "--domain-uuid", "not-a-uuid")
        assert code == 2 and "must be a UUID" in output
        assert fabric_now(site) == before, "nvlink-plan changed the fabric"

        # A pass (observe) records the hold; the operators' table and the tenant's view show it.
        backend = NmxcBackend(NvLinkConfig(backend="nmxc"))
        try:
            reconciler = make_reconciler(backend, mode="observe")
            assert (await reconciler.reconcile([domain]))[domain].status == "ok"
        finally:
            await backend.close()
        assert fabric_now(site) == before

    code, output = await run("admin", "nvlink-domains")
    assert code == 0, output
    assert {d["uuid"]: d["foreign_gpus"] for d in json.loads(output)} == {str(domain): 6}

    topology = await client.get(
        f"/v2/org/{site.nv.tenant.org}/nico/nvlink-topology", headers=bearer(settings, site.nv.tenant.org)
    )
    assert topology.status_code == 200, topology.text
    (shown,) = topology.json()["domains"]
    assert shown["foreignGpus"] == 6
    states = trays_by_state(shown)
    tray0, tray1, tray2 = (site.machines[domain][i].tray_index for i in range(3))
    assert states[tray0] == {"mine"} and states[tray2] == {"mine"}
    assert states[tray1] == {"held"}, "a tray half in another manager's partition is not free"
    assert all(states[t] == {"free"} for t in states if t not in (tray0, tray1, tray2))

    # The provider's capacity figures leave the held tray out: 18 machines, 2 with instances, 1 held.
    provider = site.nv.provider.org
    types = await client.get(
        f"/v2/org/{provider}/nico/instance/type",
        headers=bearer(settings, provider, "PROVIDER_ADMIN"),
        params={"includeAllocationStats": "true"},
    )
    assert types.status_code == 200, types.text
    (stats,) = [t["allocationStats"] for t in types.json()]
    assert stats["unused"] == 16 and stats["unusedUsable"] == 15


def trays_by_state(domain: dict[str, Any]) -> dict[int, set[str]]:
    return {
        tray["trayIndex"]: {g["state"] for g in tray["gpus"]}
        for chassis in domain["chassis"]
        for tray in chassis["trays"]
    }

"""The reference's NVLink admin commands: nvl-partition (nvp), logical-partition (lp), instance
update-nvlink-config and nmxc browse, each honouring ``--format table|json|yaml``."""

from __future__ import annotations

import json

import yaml
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from nico.db.enums import NvLinkInterfaceStatus
from nico.db.models import LogicalPartition, NvlinkInterface
from nico.sim.fabric import SimFabric
from nico.sim.nmxc_server import NmxcSimulator
from tests.support import factories as f
from tests.support.cli import run
from tests.support.sim_site import place, seed


async def test_nmxc_browse_shows_nodes_gpus_switches_and_partitions_in_every_format(
    cli_env: dict[str, str], session: AsyncSession
) -> None:
    fabric = SimFabric(racks=1, seed=31)
    async with NmxcSimulator(fabric) as sim:
        await seed(session, fabric, sim.endpoints)
        sick = sorted(fabric.domain("SIM-0001").gpus)[5]
        fabric.set_gpu_health(sick, "NO_NVLINK")
        fabric.set_switch_node_health("SIM-0001", "SIM-0001", 1, "UNHEALTHY")
        url = sim.url(fabric.domain("SIM-0001").domain_uuid)

        code, output = await run("admin", "nmxc", "browse", "--endpoint", url, "--format", "json")
        assert code == 0, output
        found = json.loads(output)
        assert found["domain_uuid"] == str(fabric.domain("SIM-0001").domain_uuid)
        assert len(found["compute_nodes"]) == 18 and len(found["gpus"]) == 72
        assert len(found["switch_nodes"]) == 9 and len(found["partitions"]) == 1
        assert {g["gpu_uid"]: g["health"] for g in found["gpus"]}[sick] == "NO_NVLINK"
        assert [n["health"] for n in found["switch_nodes"]].count("UNHEALTHY") == 1
        assert sorted(n["health"] for n in found["compute_nodes"]).count("DEGRADED") == 1

        code, output = await run(
            "admin", "nmxc", "browse", "--chassis-serial", "SIM-0001", "--format", "yaml"
        )
        assert code == 0, output
        assert yaml.safe_load(output) == found

        code, output = await run("admin", "nmxc", "browse", "--chassis-serial", "SIM-0001")
        assert code == 0, output
        assert "┃ ENDPOINT" in output and "DOMAIN UUID" in output
        assert "compute_nodes" in output and "NO_NVLINK" in output and "SIM-0001" in output

    code, output = await run("admin", "nmxc", "browse", "--chassis-serial", "NOPE")
    assert code == 1 and "no NMX-C endpoint registered for chassis NOPE" in output
    code, output = await run("admin", "nmxc", "browse")
    assert code == 2


async def test_logical_partition_show_create_delete(cli_env: dict[str, str], session: AsyncSession) -> None:
    fabric = SimFabric(racks=1, seed=32)
    site = await seed(session, fabric)
    site_id = str(site.nv.site.id)

    code, output = await run(
        "admin", "logical-partition", "create", "--org", "tenant-org", "--name", "lp-a", "--site-id", site_id,
        "--format", "json",
    )  # fmt: skip
    assert code == 0, output
    made = json.loads(output)
    assert (made["name"], made["org"], made["status"], made["physical_partitions"]) == (
        "lp-a", "tenant-org", "Ready", 0,
    )  # fmt: skip
    code, output = await run(
        "admin", "lp", "create", "--org", "tenant-org", "--name", "lp-a", "--site-id", site_id
    )
    assert code == 1 and "already exists" in output

    code, output = await run("admin", "lp", "show", "--format", "yaml")
    assert code == 0, output
    assert [row["id"] for row in yaml.safe_load(output)] == [made["id"]]
    code, output = await run("admin", "logical-partition", "show", made["id"], "--format", "json")
    assert json.loads(output)["name"] == "lp-a"
    code, output = await run("admin", "logical-partition", "show")
    assert code == 0 and "lp-a" in output and "PHYSICAL PARTITIONS" in output

    code, output = await run("admin", "lp", "delete", made["id"])
    assert (code, output) == (0, f"deleted {made['id']}\n")
    assert await session.scalar(select(LogicalPartition).where(LogicalPartition.name == "lp-a")) is None
    code, output = await run("admin", "lp", "show", "--format", "json")
    assert json.loads(output) == []
    code, output = await run("admin", "lp", "delete", made["id"])
    assert code == 1 and "no logical partition" in output


async def test_nvl_partition_show(cli_env: dict[str, str], session: AsyncSession) -> None:
    fabric = SimFabric(racks=2, seed=33)
    site = await seed(session, fabric)
    lp = await f.logical_partition(session, site.nv.tenant, site.nv.site, name="lp-pp")
    rows = await f.physical_partitions(session, [(lp, d, f"nico-{n}") for n, d in enumerate(site.domains)])

    code, output = await run("admin", "nvl-partition", "show", "--format", "json")
    assert code == 0, output
    shown = json.loads(output)
    assert {(r["name"], r["nmx_c_partition_id"], r["domain_uuid"]) for r in shown} == {
        ("nico-0", 1, str(site.domains[0])),
        ("nico-1", 2, str(site.domains[1])),
    }
    assert all(r["logical_partition_id"] == str(lp.id) for r in shown)
    code, output = await run(
        "admin", "nvp", "show", "--domain-uuid", str(site.domains[1]), "--format", "yaml"
    )
    assert [r["name"] for r in yaml.safe_load(output)] == ["nico-1"]
    code, output = await run("admin", "nvp", "show", str(rows[0].id), "--format", "json")
    assert json.loads(output)["name"] == "nico-0"
    code, output = await run("admin", "nvp", "show")
    assert code == 0 and "NMX C PARTITION ID" in output and "nico-1" in output
    code, output = await run("admin", "nvp", "show", "not-a-uuid")
    assert code == 2


async def test_instance_update_nvlink_config(cli_env: dict[str, str], session: AsyncSession) -> None:
    fabric = SimFabric(racks=1, seed=34)
    site = await seed(session, fabric)
    first = await f.logical_partition(session, site.nv.tenant, site.nv.site, name="lp-1")
    second = await f.logical_partition(session, site.nv.tenant, site.nv.site, name="lp-2")
    second_id = second.id
    machine = site.machines[site.domains[0]][0]
    instance = await place(session, site, machine, {0: first, 1: first})
    instance_id = instance.id  # place() commits: read ids before the objects expire

    config = {
        "gpu_configs": [{"device_instance": d, "logical_partition_id": str(second_id)} for d in range(4)]
    }
    update = (
        "admin",
        "instance",
        "update-nvlink-config",
        "--instance",
        str(instance_id),
        "--cloud-unsafe-op",
        "ops",
    )
    code, output = await run(
        "admin", "instance", "update-nvlink-config", "--instance", str(instance_id), "--config", "{}"
    )
    assert code == 2 and "--cloud-unsafe-op" in output
    code, output = await run(*update, "--config", json.dumps(config), "--format", "json")
    assert code == 0, output
    assert len(json.loads(output)) == 4
    session.expire_all()
    bound = (
        await session.scalars(select(NvlinkInterface).where(NvlinkInterface.instance_id == instance_id))
    ).all()
    live = [b for b in bound if b.status != NvLinkInterfaceStatus.DELETING]  # the old ones: released
    assert len(bound) - len(live) == 2
    assert sorted((b.device_instance, b.logical_partition_id) for b in live) == [
        (d, second_id) for d in range(4)
    ]

    code, output = await run(*update, "--config", '{"gpus": []}')
    assert code == 2 and "gpu_configs" in output


async def test_logical_partition_show_marks_a_split_partition(
    cli_env: dict[str, str], session: AsyncSession
) -> None:
    fabric = SimFabric(racks=2, seed=33)
    site = await seed(session, fabric)
    d0, d1 = site.domains
    split = await f.logical_partition(session, site.nv.tenant, site.nv.site, name="split")
    whole = await f.logical_partition(session, site.nv.tenant, site.nv.site, name="whole")
    await place(session, site, site.machines[d0][0], dict.fromkeys(range(4), split))
    await place(session, site, site.machines[d1][0], dict.fromkeys(range(4), split))
    await place(session, site, site.machines[d0][1], dict.fromkeys(range(4), whole))

    code, output = await run("admin", "lp", "show", "--format", "json")
    assert code == 0, output
    rows = {row["name"]: row for row in json.loads(output)}
    assert (rows["split"]["domains"], rows["split"]["split"]) == ("2 (split)", True)
    assert sorted(rows["split"]["nvlink_domain_ids"]) == sorted(str(d) for d in (d0, d1))
    assert (rows["whole"]["domains"], rows["whole"]["split"]) == ("1", False)
    code, output = await run("admin", "lp", "show")
    assert code == 0 and "DOMAINS" in output and "2 (split)" in output

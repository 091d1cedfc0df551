"""The reference's admin commands typed as its users type them (spec §8.3): ``lp create -n NAME -t
ORG`` (no site: the org's one NVLink site), ``lp show [ID] -n NAME``, ``lp delete -n UUID``, ``nvp show
[ID] -t ORG -n NAME``, ``--cloud-unsafe-op`` before the command with ``update-nv-link-config``, and
``credential delete-nmx-m --username``; each beside nico's own shape."""

from __future__ import annotations

import json

import yaml
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from nico.db.enums import NvLinkInterfaceStatus
from nico.db.models import FabricCredential, LogicalPartition, NvlinkInterface
from nico.sim.fabric import SimFabric
from tests.support import factories as f
from tests.support.cli import run
from tests.support.sim_site import place, seed


async def test_lp_create_show_delete_as_the_reference_types_them(
    cli_env: dict[str, str], session: AsyncSession
) -> None:
    site = await seed(session, SimFabric(racks=1, seed=41))
    other = await f.tenant(session, "other-org")
    await f.logical_partition(session, other, site.nv.site, name="training")
    await session.commit()

    code, output = await run(
        "admin", "lp", "create", "-n", "training", "-t", "tenant-org", "--format", "json"
    )
    assert code == 0, output
    made = json.loads(output)
    assert (made["name"], made["org"], made["site_id"]) == ("training", "tenant-org", str(site.nv.site.id))
    code, output = await run(
        "admin", "logical-partition", "create", "--name", "training", "--tenant-organization-id", "tenant-org"
    )
    assert code == 1 and "already exists" in output

    code, output = await run("admin", "lp", "show", "-n", "training", "--format", "yaml")
    assert code == 0, output
    assert sorted(row["org"] for row in yaml.safe_load(output)) == ["other-org", "tenant-org"]
    code, output = await run("admin", "lp", "show", made["id"], "-n", "training", "--format", "json")
    assert json.loads(output)["id"] == made["id"]
    code, output = await run("admin", "lp", "show", "", "--name", "nope", "--format", "json")
    assert (code, json.loads(output)) == (0, [])

    code, output = await run("admin", "lp", "delete", "-n", "training")
    assert code == 2 and "UUID Conversion failed." in output
    code, output = await run("admin", "lp", "delete", made["id"], "-n", made["id"])
    assert code == 2
    code, output = await run("admin", "lp", "delete", "-n", made["id"])
    assert (code, output) == (0, f"deleted {made['id']}\n")
    names = await session.scalars(select(LogicalPartition.name).where(LogicalPartition.name == "training"))
    assert list(names) == ["training"]  # the other org's is untouched


async def test_lp_create_without_a_site_needs_exactly_one(
    cli_env: dict[str, str], session: AsyncSession
) -> None:
    site = await seed(session, SimFabric(racks=1, seed=42))
    await f.tenant(session, "no-site-org")
    second = await f.site(session, site.nv.provider, name="site-2")
    await f.allocation(session, site.nv.tenant, second, site.nv.instance_type, 1)
    await session.commit()

    code, output = await run("admin", "lp", "create", "-n", "lp-x", "-t", "no-site-org")
    assert code == 1 and "org no-site-org uses no site with NVLink partitioning enabled" in output
    code, output = await run("admin", "lp", "create", "-n", "lp-x", "-t", "tenant-org")
    assert code == 1 and "uses 2 sites with NVLink partitioning: pass --site-id" in output
    assert str(second.id) in output
    code, output = await run(
        "admin",
        "lp",
        "create",
        "-n",
        "lp-x",
        "-t",
        "tenant-org",
        "--site-id",
        str(second.id),
        "--format",
        "json",
    )
    assert code == 0 and json.loads(output)["site_id"] == str(second.id)


async def test_nvp_show_by_tenant_org_and_name(cli_env: dict[str, str], session: AsyncSession) -> None:
    site = await seed(session, SimFabric(racks=2, seed=43))
    mine = await f.logical_partition(session, site.nv.tenant, site.nv.site, name="lp-mine")
    other = await f.tenant(session, "other-org")
    theirs = await f.logical_partition(session, other, site.nv.site, name="lp-theirs")
    rows = await f.physical_partitions(
        session,
        [
            (mine, site.domains[0], "nico-a"),
            (mine, site.domains[1], "nico-b"),
            (theirs, site.domains[0], "nico-c"),
        ],
    )

    code, output = await run("admin", "nvp", "show", "-t", "tenant-org", "--format", "json")
    assert code == 0, output
    assert sorted(r["name"] for r in json.loads(output)) == ["nico-a", "nico-b"]
    code, output = await run(
        "admin", "nvp", "show", "", "-t", "tenant-org", "-n", "nico-b", "--format", "yaml"
    )
    assert [r["name"] for r in yaml.safe_load(output)] == ["nico-b"]
    code, output = await run(
        "admin", "nvl-partition", "show", "--tenant-org-id", "other-org", "--name", "nico-c"
    )
    assert code == 0 and "nico-c" in output and "nico-a" not in output
    code, output = await run("admin", "nvp", "show", "-t", "other-org", "-n", "nico-a", "--format", "json")
    assert json.loads(output) == []
    code, output = await run("admin", "nvp", "show", str(rows[2].id), "--format", "json")
    assert json.loads(output)["name"] == "nico-c"
    code, output = await run("admin", "nvp", "show", "not-a-uuid")
    assert code == 2 and "UUID Conversion failed." in output


async def test_update_nv_link_config_with_the_global_cloud_unsafe_op(
    cli_env: dict[str, str], session: AsyncSession
) -> None:
    site = await seed(session, SimFabric(racks=1, seed=44))
    first = await f.logical_partition(session, site.nv.tenant, site.nv.site, name="lp-1")
    second = await f.logical_partition(session, site.nv.tenant, site.nv.site, name="lp-2")
    second_id = second.id
    instance = await place(session, site, site.machines[site.domains[0]][0], {0: first})
    instance_id = instance.id
    config = json.dumps({"gpu_configs": [{"device_instance": 0, "logical_partition_id": str(second_id)}]})

    code, output = await run(
        "admin", "instance", "update-nv-link-config", "--instance", str(instance_id), "--config", config
    )
    assert code == 2 and "--cloud-unsafe-op" in output
    code, output = await run(
        "admin", "--cloud-unsafe-op", "alice",
        "instance", "update-nv-link-config", "--instance", str(instance_id), "--config", config,
        "--format", "json",
    )  # fmt: skip
    assert code == 0, output
    assert [row["device_instance"] for row in json.loads(output)] == [0]
    session.expire_all()
    live = (
        await session.scalars(
            select(NvlinkInterface).where(
                NvlinkInterface.instance_id == instance_id,
                NvlinkInterface.status != NvLinkInterfaceStatus.DELETING,
            )
        )
    ).all()
    assert [(b.device_instance, b.logical_partition_id) for b in live] == [(0, second_id)]


async def test_delete_nmx_m_with_the_reference_username(
    cli_env: dict[str, str], session: AsyncSession
) -> None:
    code, output = await run("admin", "credential", "add-nmx-m", "--username", "nmx", "--password", "pw")
    assert code == 0, output
    code, output = await run("admin", "credential", "delete-nmx-m", "--username", "someone-else")
    assert code == 1 and "the stored NMX-M credentials are nmx's, not someone-else's" in output
    assert await session.scalar(select(FabricCredential.username)) == "nmx"
    code, output = await run("admin", "credential", "delete-nmx-m", "--username", "nmx")
    assert (code, output) == (0, "deleted NMX-M credentials\n")
    session.expire_all()
    assert await session.scalar(select(FabricCredential.username)) is None

"""What the admin commands print, in the format asked: ``machine list`` (every site's or one's),
the endpoint registry, the domains and a machine's NVLink info as a table, JSON or YAML (the same
data in both)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import yaml
from sqlalchemy.ext.asyncio import AsyncSession

from nico.sim.fabric import SimFabric
from tests.support import factories as f
from tests.support.cli import run
from tests.support.sim_site import place, seed


async def same_in_json_and_yaml(*args: str) -> object:
    code, as_json = await run(*args, "--format", "json")
    assert code == 0, as_json
    code, as_yaml = await run(*args, "--format", "yaml")
    assert code == 0, as_yaml
    assert yaml.safe_load(as_yaml) == json.loads(as_json)
    return json.loads(as_json)


async def test_machine_list(cli_env: dict[str, str], session: AsyncSession) -> None:
    site = await seed(session, SimFabric(racks=1, seed=51))
    elsewhere = await f.site(session, site.nv.provider, name="site-2")
    await session.commit()
    busy = site.machines[site.domains[0]][3]
    instance = await place(
        session, site, busy, {0: await f.logical_partition(session, site.nv.tenant, site.nv.site)}
    )

    listed = await same_in_json_and_yaml("admin", "machine", "list")
    assert isinstance(listed, list) and len(listed) == 18
    assert [m["tray_index"] for m in listed] == list(range(18))
    assert {m["gpus"] for m in listed} == {4}
    assert {m["site_id"] for m in listed} == {str(site.nv.site.id)}
    assert {m["domain_uuid"] for m in listed} == {str(site.domains[0])}
    assert {m["id"]: m["instance_id"] for m in listed}[busy.id] == str(instance.id)
    assert listed[0]["instance_type_id"] == str(site.nv.instance_type.id)

    assert await same_in_json_and_yaml("admin", "machine", "list", "--site-id", str(elsewhere.id)) == []
    assert (
        len(await same_in_json_and_yaml("admin", "machine", "list", "--site-id", str(site.nv.site.id))) == 18
    )
    code, output = await run("admin", "machine", "list")
    assert code == 0 and "CHASSIS SERIAL" in output and busy.id in output
    code, output = await run("admin", "machine", "list", "--site-id", "site-1")
    assert code == 2 and "--site-id must be a UUID" in output
    code, output = await run("admin", "machine", "list", "--format", "xml")
    assert code == 2


async def test_registry_domains_and_nvlink_info_in_every_format(
    cli_env: dict[str, str], session: AsyncSession
) -> None:
    site = await seed(session, SimFabric(racks=1, seed=52))
    machine = site.machines[site.domains[0]][0].id

    endpoints = await same_in_json_and_yaml("admin", "nvlink-nmxc-endpoints", "show")
    assert endpoints == [{"chassis_serial": "SIM-0001", "endpoint": "http://in-process.invalid/SIM-0001"}]
    code, output = await run("admin", "nvlink-nmxc-endpoints", "show")
    assert code == 0 and "CHASSIS SERIAL" in output and "in-process.invalid" in output

    domains = await same_in_json_and_yaml("admin", "nvlink-domains")
    assert isinstance(domains, list) and [d["uuid"] for d in domains] == [str(site.domains[0])]
    code, output = await run("admin", "nvlink-domains")
    assert json.loads(output) == domains  # JSON unless asked otherwise, as before
    code, output = await run("admin", "nvlink-domains", "--format", "table")
    assert code == 0 and "CONSECUTIVE FAILURES" in output and str(site.domains[0]) in output

    info = await same_in_json_and_yaml("admin", "machine", "nvlink-info", "show", machine)
    assert isinstance(info, dict) and list(info) == ["domain_uuid", "gpus", "chassis_serial"]
    assert len(info["gpus"]) == 4
    code, output = await run("admin", "machine", "nvlink-info", "show", machine, "--format", "table")
    assert code == 0 and "DOMAIN UUID" in output and "gpus" in output


async def test_machine_register_prints_its_outcome_as_asked(
    cli_env: dict[str, str], session: AsyncSession, tmp_path: Path
) -> None:
    at = await f.site(session, await f.provider(session))
    await session.commit()
    body = {"machines": [{"id": f"m-{n}", "hostname": f"m-{n}"} for n in range(2)]}
    path = tmp_path / "body.json"
    await asyncio.to_thread(path.write_text, json.dumps(body))
    base = ("admin", "machine", "register", "--site-id", str(at.id), "--file", str(path))
    code, output = await run(*base, "--format", "yaml")
    assert code == 0, output
    assert yaml.safe_load(output) == {"created": ["m-0", "m-1"], "updated": [], "unchanged": []}
    code, output = await run(*base, "--format", "json")
    assert json.loads(output) == {"created": [], "updated": [], "unchanged": ["m-0", "m-1"]}
    code, output = await run(*base)
    assert code == 0 and "unchanged" in output and "m-0, m-1" in output

"""Clique ids in the API and ``GET /nvlink-topology/export``: Slurm topology files, Kubernetes labels
and a Kueue Topology, checked against their consumers' rules, and scoped to the caller."""

from __future__ import annotations

import json
import re
import uuid
from pathlib import Path
from typing import Any

import httpx
import jsonschema
import kubernetes_validate
import pytest
import yaml
from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncSession

from nico.config import Settings
from nico.db.models import Machine, NvlinkInterface
from tests.api.conftest import BASE, ORG, error, instance_body
from tests.support import factories as f
from tests.support.auth import bearer
from tests.support.fake_kube import valid_label
from tests.support.placement import realise

EXPORT = f"{BASE}/nvlink-topology/export"
KUEUE_SCHEMA = Path(__file__).resolve().parents[1] / "support" / "schemas" / "kueue_topology_v1alpha1.json"


def items(partition: uuid.UUID, *indexes: int) -> list[dict[str, Any]]:
    return [{"nvLinkLogicalPartitionId": str(partition), "deviceInstance": i} for i in indexes]


async def placed(
    client: httpx.AsyncClient, headers: dict[str, str], world: f.NvlinkSite, session: AsyncSession
) -> tuple[uuid.UUID, list[dict[str, Any]]]:
    partition = await f.logical_partition(session, world.tenant, world.site)
    await session.commit()
    out = []
    for n in range(3):
        body = instance_body(world, name=f"node-{n}", nvLinkInterfaces=items(partition.id, 0, 1, 2, 3))
        response = await client.post(f"{BASE}/instance", json=body, headers=headers)
        assert response.status_code == 201, response.text
        out.append(response.json())
    return partition.id, out


async def get(
    client: httpx.AsyncClient, headers: dict[str, str], fmt: str, *, url: str = EXPORT, **params: str
) -> httpx.Response:
    response = await client.get(url, params={"format": fmt, **params}, headers=headers)
    assert response.status_code == 200, response.text
    return response


async def test_clique_id_appears_when_ready(
    client: httpx.AsyncClient, headers: dict[str, str], world: f.NvlinkSite, session: AsyncSession
) -> None:
    partition, instances = await placed(client, headers, world, session)
    first = uuid.UUID(instances[0]["id"])
    before = (await client.get(f"{BASE}/instance/{first}", headers=headers)).json()
    assert before["nvLinkCliqueId"] is None
    assert {i["nvLinkCliqueId"] for i in before["nvLinkInterfaces"]} == {None}
    clique = await realise(session, first, partition, 7)
    await session.commit()
    after = (await client.get(f"{BASE}/instance/{first}", headers=headers)).json()
    domain = after["nvLinkInterfaces"][0]["nvLinkDomainId"]
    assert after["nvLinkCliqueId"] == clique == f"{domain}.7"
    assert {i["nvLinkCliqueId"] for i in after["nvLinkInterfaces"]} == {clique}
    listed = (
        await client.get(f"{BASE}/nvlink-interface", params={"instanceId": str(first)}, headers=headers)
    ).json()
    assert {i["nvLinkCliqueId"] for i in listed} == {clique}
    other = (await client.get(f"{BASE}/instance/{instances[1]['id']}", headers=headers)).json()
    assert other["nvLinkCliqueId"] is None


async def test_slurm_exports(
    client: httpx.AsyncClient, headers: dict[str, str], world: f.NvlinkSite, session: AsyncSession
) -> None:
    partition, instances = await placed(client, headers, world, session)
    await realise(session, uuid.UUID(instances[0]["id"]), partition, 3)
    await session.commit()
    conf = (await get(client, headers, "slurm-topology-conf")).text
    lines = [line for line in conf.splitlines() if not line.startswith("#")]
    leaves = dict(re.fullmatch(r"SwitchName=(\S+) Nodes=(\S+)", line).groups() for line in lines[:-1])  # type: ignore[union-attr]
    root = re.fullmatch(r"SwitchName=nvlink-root Switches=(\S+)", lines[-1])
    assert root is not None and set(root[1].split(",")) == set(leaves)
    assert sorted(n for nodes in leaves.values() for n in nodes.split(",")) == ["node-0", "node-1", "node-2"]
    assert all(name.startswith("nvl-") for name in leaves)

    document = yaml.safe_load((await get(client, headers, "slurm-topology-yaml")).text)
    (topology,) = document
    assert topology["topology"] == "nvlink" and topology["cluster_default"] is True
    blocks = {b["block"]: b["nodes"] for b in topology["block"]["blocks"]}
    assert blocks == leaves

    templated = (await get(client, headers, "slurm-topology-conf", nodeName="gb-{instance}")).text
    assert "gb-node-0" in templated
    bad = await client.get(
        EXPORT, params={"format": "slurm-topology-conf", "nodeName": "{nope}"}, headers=headers
    )
    assert bad.status_code == 400


async def test_kubernetes_exports_validate(
    client: httpx.AsyncClient, headers: dict[str, str], world: f.NvlinkSite, session: AsyncSession
) -> None:
    partition, instances = await placed(client, headers, world, session)
    clique = await realise(session, uuid.UUID(instances[0]["id"]), partition, 12)
    await session.commit()
    nodes = json.loads((await get(client, headers, "kubernetes-labels")).text)
    assert nodes["kind"] == "List" and len(nodes["items"]) == 3
    for node in nodes["items"]:
        kubernetes_validate.validate(node, "1.30", strict=True)
        for key, value in node["metadata"]["labels"].items():
            assert valid_label(key, value), (key, value)
    by_name = {n["metadata"]["name"]: n["metadata"]["labels"] for n in nodes["items"]}
    assert by_name["node-0"]["nvidia.com/gpu.clique"] == clique
    assert by_name["node-0"]["nvlink.nico.io/partition"] == str(partition)
    assert "nvidia.com/gpu.clique" not in by_name["node-1"]
    assert by_name["node-0"]["nvlink.nico.io/domain"] == clique.split(".")[0]

    lines = (await get(client, headers, "kubectl-labels")).text.splitlines()
    assert len(lines) == 3
    assert any(
        line.startswith("kubectl label node node-0 --overwrite ")
        and f"nvidia.com/gpu.clique={clique}" in line
        for line in lines
    )
    assert any(
        line.startswith("kubectl label node node-1 ") and "nvidia.com/gpu.clique-" in line.split()
        for line in lines
    )

    kueue = json.loads((await get(client, headers, "kueue-topology")).text)
    jsonschema.validate(kueue, json.loads(KUEUE_SCHEMA.read_text()))
    assert kueue["apiVersion"] == "kueue.x-k8s.io/v1alpha1" and kueue["kind"] == "Topology"
    levels = [level["nodeLabel"] for level in kueue["spec"]["levels"]]
    assert levels == ["nvlink.nico.io/domain", "nvidia.com/gpu.clique", "kubernetes.io/hostname"]
    assert len(set(levels)) == len(levels) and levels[-1] == "kubernetes.io/hostname"
    # Every level but the node's own is a label the export writes.
    assert set(levels[:-1]) <= set(by_name["node-0"])


async def test_scoping(
    client: httpx.AsyncClient,
    headers: dict[str, str],
    world: f.NvlinkSite,
    session: AsyncSession,
    settings: Settings,
) -> None:
    await placed(client, headers, world, session)
    other = await f.tenant(session, "other-org")
    await f.allocation(session, other, world.site, world.instance_type, 1)
    await session.commit()
    theirs = bearer(settings, "other-org")
    conf = (await client.get(EXPORT, params={"format": "slurm-topology-conf"}, headers=theirs)).text
    assert "node-0" not in conf and "SwitchName" not in conf
    provider = bearer(settings, "provider-org", "PROVIDER_VIEWER")
    provider_export = "/v2/org/provider-org/nico/nvlink-topology/export"
    whole = await client.get(
        provider_export, params={"format": "slurm-topology-conf", "scope": "provider"}, headers=provider
    )
    assert whole.status_code == 200 and "node-2" in whole.text, whole.text
    assert (
        error(await client.get(provider_export, params={"format": "slurm-topology-conf"}, headers=provider))[
            0
        ]
        == 403
    )
    denied = await client.get(
        EXPORT, params={"format": "kueue-topology", "scope": "provider"}, headers=headers
    )
    assert denied.status_code == 403
    bogus = await client.get(EXPORT, params={"format": "bogus"}, headers=headers)
    assert error(bogus) == (400, bogus.json()["message"]) and "bogus" in bogus.json()["message"]
    assert ORG == "tenant-org"


@pytest.mark.parametrize("fmt", ["slurm-topology-conf", "kubernetes-labels"])
async def test_empty_site_exports(
    client: httpx.AsyncClient, headers: dict[str, str], world: f.NvlinkSite, fmt: str
) -> None:
    response = await get(client, headers, fmt)
    assert "node-" not in response.text


async def test_a_tray_with_gpus_in_two_partitions_gets_no_clique_label(
    client: httpx.AsyncClient, headers: dict[str, str], world: f.NvlinkSite, session: AsyncSession
) -> None:
    # 2 of the tray's 4 GPUs in the partition, the other 2 in the default partition: the node exposes
    # all 4, so no clique holds for it; nico's per-GPU labels say where each one is.
    partition = await f.logical_partition(session, world.tenant, world.site)
    await session.commit()
    body = instance_body(world, name="half", nvLinkInterfaces=items(partition.id, 0, 1))
    created = await client.post(f"{BASE}/instance", json=body, headers=headers)
    assert created.status_code == 201, created.text
    clique = await realise(session, uuid.UUID(created.json()["id"]), partition.id, 5)
    await session.commit()
    instance = (await client.get(f"{BASE}/instance/{created.json()['id']}", headers=headers)).json()
    assert {i["nvLinkCliqueId"] for i in instance["nvLinkInterfaces"]} == {clique}  # both Ready

    (node,) = json.loads((await get(client, headers, "kubernetes-labels")).text)["items"]
    kubernetes_validate.validate(node, "1.37.0", strict=True)
    labels = node["metadata"]["labels"]
    assert all(valid_label(k, v) for k, v in labels.items()), labels
    assert "nvidia.com/gpu.clique" not in labels and "nvlink.nico.io/partition" not in labels
    assert {k: v for k, v in labels.items() if k.startswith("nvlink.nico.io/gpu-")} == {
        "nvlink.nico.io/gpu-0.partition": str(partition.id),
        "nvlink.nico.io/gpu-0.clique": clique,
        "nvlink.nico.io/gpu-1.partition": str(partition.id),
        "nvlink.nico.io/gpu-1.clique": clique,
        "nvlink.nico.io/gpu-2.partition": "none",
        "nvlink.nico.io/gpu-3.partition": "none",
    }
    (line,) = (await get(client, headers, "kubectl-labels")).text.splitlines()
    removed = {arg for arg in line.split() if arg.endswith("-")}
    assert removed == {
        "nvidia.com/gpu.clique-",
        "nvlink.nico.io/partition-",
        "nvlink.nico.io/gpu-2.clique-",
        "nvlink.nico.io/gpu-3.clique-",
    }


async def test_a_whole_tray_gets_the_clique_only_once_every_gpu_is_ready(
    client: httpx.AsyncClient, headers: dict[str, str], world: f.NvlinkSite, session: AsyncSession
) -> None:
    partition, (first, *_) = await placed(client, headers, world, session)
    nodes = json.loads((await get(client, headers, "kubernetes-labels")).text)["items"]
    pending = next(n for n in nodes if n["metadata"]["name"] == "node-0")["metadata"]["labels"]
    assert "nvidia.com/gpu.clique" not in pending  # bound, not realised
    assert pending["nvlink.nico.io/partition"] == str(partition)
    assert not any(k.endswith(".clique") for k in pending)
    clique = await realise(session, uuid.UUID(first["id"]), partition, 9)
    await session.commit()
    nodes = json.loads((await get(client, headers, "kubernetes-labels")).text)["items"]
    ready = next(n for n in nodes if n["metadata"]["name"] == "node-0")["metadata"]["labels"]
    assert ready["nvidia.com/gpu.clique"] == clique
    assert {ready[f"nvlink.nico.io/gpu-{d}.clique"] for d in range(4)} == {clique}


async def test_the_clique_key_is_a_setting_and_a_query_parameter(
    client: httpx.AsyncClient,
    headers: dict[str, str],
    world: f.NvlinkSite,
    session: AsyncSession,
    settings: Settings,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    partition, (first, *_) = await placed(client, headers, world, session)
    clique = await realise(session, uuid.UUID(first["id"]), partition, 4)
    await session.commit()
    own = {"cliqueLabel": "nvlink.nico.io/clique"}
    nodes = json.loads((await get(client, headers, "kubernetes-labels", **own)).text)["items"]
    labels = next(n for n in nodes if n["metadata"]["name"] == "node-0")["metadata"]["labels"]
    assert labels["nvlink.nico.io/clique"] == clique and "nvidia.com/gpu.clique" not in labels
    # Beside GPU Feature Discovery nico never removes the key it was not given.
    lines = (await get(client, headers, "kubectl-labels", **own)).text
    assert "nvidia.com/gpu.clique" not in lines and "nvlink.nico.io/clique-" in lines
    kueue = json.loads((await get(client, headers, "kueue-topology", **own)).text)
    assert [level["nodeLabel"] for level in kueue["spec"]["levels"]][1] == "nvlink.nico.io/clique"

    monkeypatch.setattr(settings.export, "clique_label", "nvlink.nico.io/clique")
    nodes = json.loads((await get(client, headers, "kubernetes-labels")).text)["items"]
    labels = next(n for n in nodes if n["metadata"]["name"] == "node-0")["metadata"]["labels"]
    assert labels["nvlink.nico.io/clique"] == clique and "nvidia.com/gpu.clique" not in labels
    gfd = {"cliqueLabel": "nvidia.com/gpu.clique"}
    nodes = json.loads((await get(client, headers, "kubernetes-labels", **gfd)).text)["items"]
    labels = next(n for n in nodes if n["metadata"]["name"] == "node-0")["metadata"]["labels"]
    assert labels["nvidia.com/gpu.clique"] == clique and "nvlink.nico.io/clique" not in labels

    bad = await client.get(
        EXPORT, params={"format": "kubernetes-labels", "cliqueLabel": "example.com/x"}, headers=headers
    )
    assert error(bad)[0] == 400 and "cliqueLabel" in bad.json()["message"]


async def test_node_exports_come_in_pages_that_add_up_to_the_whole_document(
    client: httpx.AsyncClient, headers: dict[str, str], world: f.NvlinkSite, session: AsyncSession
) -> None:
    partition, instances = await placed(client, headers, world, session)
    await realise(session, uuid.UUID(instances[1]["id"]), partition, 5)
    await session.commit()
    whole = json.loads((await get(client, headers, "kubernetes-labels")).text)["items"]
    pages, totals = [], set()
    for number in (1, 2):
        response = await get(client, headers, "kubernetes-labels", pageNumber=str(number), pageSize="2")
        header = json.loads(response.headers["X-Pagination"])
        assert (header["pageNumber"], header["pageSize"], header["orderBy"]) == (number, 2, None)
        totals.add(header["total"])
        pages += json.loads(response.text)["items"]
    assert totals == {3}
    assert pages == whole  # same nodes, same labels, same order: the clique of the realised one included
    past = await get(client, headers, "kubernetes-labels", pageNumber="9", pageSize="2")
    assert json.loads(past.text)["items"] == [] and json.loads(past.headers["X-Pagination"])["total"] == 3
    lines = (await get(client, headers, "kubectl-labels", pageSize="1")).text.splitlines()
    assert lines == (await get(client, headers, "kubectl-labels")).text.splitlines()[:1]
    assert "X-Pagination" not in (await get(client, headers, "kubectl-labels")).headers


@pytest.mark.parametrize("fmt", ["slurm-topology-conf", "slurm-topology-yaml", "kueue-topology"])
async def test_a_document_format_refuses_a_page(
    client: httpx.AsyncClient, headers: dict[str, str], world: f.NvlinkSite, session: AsyncSession, fmt: str
) -> None:
    await placed(client, headers, world, session)
    response = await client.get(EXPORT, params={"format": fmt, "pageSize": "2"}, headers=headers)
    assert error(response) == (
        400,
        "pageNumber and pageSize apply to the formats kubernetes-labels and kubectl-labels only",
    )
    bad = await client.get(EXPORT, params={"format": "kubectl-labels", "pageSize": "101"}, headers=headers)
    assert error(bad) == (400, "Failed to validate pagination request data")


async def test_node_pages_of_every_scope_add_up_to_that_scopes_document(
    client: httpx.AsyncClient,
    headers: dict[str, str],
    world: f.NvlinkSite,
    session: AsyncSession,
    settings: Settings,
) -> None:
    """Each scope (the tenant's or the provider's sites, either narrowed to one site) pages its nodes with
    a statement of its own: every one adds up to its whole document, a node in a domain only by its
    realised interfaces (its machine gone) included, and another site's nodes in none of the site's."""
    partition, instances = await placed(client, headers, world, session)
    elsewhere = await f.site(session, world.provider, name="site-2")
    await f.allocation(session, world.tenant, elsewhere, world.instance_type, 1)
    await realise(session, uuid.UUID(instances[1]["id"]), partition, 5)
    last = uuid.UUID(instances[2]["id"])
    domain = await session.scalar(select(Machine.domain_uuid).where(Machine.instance_id == last))
    await session.execute(
        update(NvlinkInterface).where(NvlinkInterface.instance_id == last).values(domain_uuid=domain)
    )
    await session.execute(update(Machine).where(Machine.instance_id == last).values(instance_id=None))
    await session.commit()
    provider = bearer(settings, "provider-org", "PROVIDER_VIEWER")
    provider_export = "/v2/org/provider-org/nico/nvlink-topology/export"
    for url, who, params in (
        (EXPORT, headers, {}),
        (EXPORT, headers, {"siteId": str(world.site.id)}),
        (provider_export, provider, {"scope": "provider"}),
        (provider_export, provider, {"scope": "provider", "siteId": str(world.site.id)}),
        (provider_export, provider, {"scope": "provider", "siteId": str(elsewhere.id)}),
    ):
        whole = json.loads((await get(client, who, "kubernetes-labels", url=url, **params)).text)["items"]
        expected = 0 if params.get("siteId") == str(elsewhere.id) else 3
        assert [n["metadata"]["name"] for n in whole] == [f"node-{n}" for n in range(expected)], params
        pages = []
        for number in (1, 2, 3):
            page = {**params, "pageNumber": str(number), "pageSize": "2"}
            response = await get(client, who, "kubernetes-labels", url=url, **page)
            assert json.loads(response.headers["X-Pagination"])["total"] == expected, params
            pages += json.loads(response.text)["items"]
        assert pages == whole, params

"""``nico label-sync`` against nico's API and a recording Kubernetes API server on loopback
(tests/support/fake_kube.py: every patch checked against the real Node schema): the patches it sends
when an instance joins, moves and leaves; labels it did not set are never removed, even across a
concurrent writer's change; the recorded patches replay to the same Nodes; and after a restart it
resumes the event stream from the cursor stored in its ConfigMap."""

from __future__ import annotations

import asyncio
import contextlib
import copy
import os
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy.ext.asyncio import AsyncSession

from nico.cli.label_sync import run
from nico.config import Settings
from nico.label_sync import kube as kube_module
from nico.label_sync.kube import KubeApi, KubeConfig
from nico.label_sync.plan import OWNED_ANNOTATION
from nico.label_sync.sync import CursorStore, LabelSync
from nico.reconciler.lifecycle import finish_instance_termination
from tests.api.conftest import BASE, ORG, make_instances
from tests.support import factories as f
from tests.support.fake_kube import MERGE_PATCH, TOKEN, FakeKube, node, replay, serve
from tests.support.placement import realise
from tests.support.replica import replica
from tests.support.waiting import wait_for

NICO_CLIQUE = "nvlink.nico.io/clique"
GFD_CLIQUE = "nvidia.com/gpu.clique"
GFD_VALUE = "3c0a5b0e-1111-4222-8333-944455556666.1"  # what GPU Feature Discovery wrote
FOREIGN = {"example.com/team": "ml", "node-role.kubernetes.io/gpu": ""}
NAMESPACE, CONFIGMAP = "nico", "nico-label-sync"
DEADLINE = 20.0


def owned(fake: FakeKube, name: str) -> set[str]:
    annotations = fake.nodes[name]["metadata"].get("annotations") or {}
    return {k for k in annotations.get(OWNED_ANNOTATION, "").split(",") if k}


def nico_labels(fake: FakeKube, name: str) -> dict[str, str]:
    return {k: v for k, v in fake.labels(name).items() if k.startswith("nvlink.nico.io/")}


@contextlib.asynccontextmanager
async def kube(tmp_path: Path, fake: FakeKube) -> Any:
    token = tmp_path / "token"
    token.write_text(TOKEN + "\n")
    async with serve(fake):
        config = KubeConfig(fake.url, token_path=token, namespace=NAMESPACE)
        async with config.client() as http:
            yield KubeApi(config, http)


def cluster() -> FakeKube:
    fake = FakeKube()
    fake.add_node(node("node-0", {GFD_CLIQUE: GFD_VALUE, **FOREIGN}))
    fake.add_node(node("node-1", FOREIGN, {"example.com/owner": "team-ml"}))
    fake.add_node(node("cpu-0", FOREIGN))
    fake.add_configmap(NAMESPACE, CONFIGMAP)
    return fake


def label_sync(kube_api: KubeApi, api: httpx.AsyncClient, clique_label: str = NICO_CLIQUE) -> LabelSync:
    params = {"scope": "tenant", "nodeName": "{instance}", "cliqueLabel": clique_label}
    store = CursorStore(kube_api, NAMESPACE, CONFIGMAP)
    return LabelSync(kube_api, api, f"{BASE}/nvlink-topology/export", params, store=store)


async def test_join_move_and_leave_patch_only_nicos_labels(
    client: httpx.AsyncClient,
    headers: dict[str, str],
    world: f.NvlinkSite,
    session: AsyncSession,
    tmp_path: Path,
) -> None:
    a = await f.logical_partition(session, world.tenant, world.site, name="lp-a")
    b = await f.logical_partition(session, world.tenant, world.site, name="lp-b")
    await session.commit()
    first, second = await make_instances(client, headers, world, a.id, 2)
    clique_a = await realise(session, first, a.id, 7)
    await session.commit()
    client.headers.update(headers)
    fake = cluster()
    before = copy.deepcopy(fake.nodes)
    async with kube(tmp_path, fake) as kube_api:
        sync = label_sync(kube_api, client)

        # Join: both nodes get nico's labels and the list of keys nico owns; GFD's key is left alone.
        joined = await sync.sync_once()
        assert sorted(joined.patched) == ["node-0", "node-1"] and joined.absent == []
        (patch,) = fake.patches("node-0")
        gpu_labels = {f"nvlink.nico.io/gpu-{d}.{k}": v for d in range(4) for k, v in
                      (("partition", str(a.id)), ("clique", clique_a))}  # fmt: skip
        expected = {
            "nvlink.nico.io/domain": clique_a.split(".")[0],
            "nvlink.nico.io/site": str(world.site.id),
            "nvlink.nico.io/partition": str(a.id),
            NICO_CLIQUE: clique_a,
            **gpu_labels,
        }
        assert patch == {
            "metadata": {
                "labels": expected,
                "annotations": {OWNED_ANNOTATION: ",".join(sorted(expected))},
                "resourceVersion": "1",
            }
        }
        assert fake.labels("node-0") == before["node-0"]["metadata"]["labels"] | expected
        assert fake.labels("node-0")[GFD_CLIQUE] == GFD_VALUE
        assert NICO_CLIQUE not in fake.labels("node-1")  # bound, not Ready: no clique yet
        assert fake.patches("cpu-0") == [] and fake.nodes["cpu-0"] == before["cpu-0"]
        joined_1 = nico_labels(fake, "node-1")
        assert owned(fake, "node-1") == set(joined_1)
        assert (await sync.sync_once()).patched == []  # nothing changed, nothing sent

        # Move: node-0's GPUs 0 and 1 go to partition b, 2 and 3 back to the default partition.
        items = [{"nvLinkLogicalPartitionId": str(b.id), "deviceInstance": i} for i in (0, 1)]
        moved = await client.patch(f"{BASE}/instance/{first}", json={"nvLinkInterfaces": items})
        assert moved.status_code == 200, moved.text
        clique_b = await realise(session, first, b.id, 8)
        await session.commit()
        assert (await sync.sync_once()).patched == ["node-0"]
        move = fake.patches("node-0")[-1]["metadata"]
        assert move["labels"] == {
            "nvlink.nico.io/gpu-0.partition": str(b.id),
            "nvlink.nico.io/gpu-0.clique": clique_b,
            "nvlink.nico.io/gpu-1.partition": str(b.id),
            "nvlink.nico.io/gpu-1.clique": clique_b,
            "nvlink.nico.io/gpu-2.partition": "none",
            "nvlink.nico.io/gpu-3.partition": "none",
            NICO_CLIQUE: None,
            "nvlink.nico.io/gpu-2.clique": None,
            "nvlink.nico.io/gpu-3.clique": None,
            "nvlink.nico.io/partition": None,
        }
        assert move["resourceVersion"] == "2"
        assert NICO_CLIQUE not in fake.labels("node-0") and fake.labels("node-0")[GFD_CLIQUE] == GFD_VALUE
        assert owned(fake, "node-0") == set(nico_labels(fake, "node-0"))

        # Leave: node-1's instance is gone; exactly the keys nico owned go, with the annotation.
        assert (await client.delete(f"{BASE}/instance/{second}")).status_code == 202
        assert await finish_instance_termination(session, second)
        await session.commit()
        assert (await sync.sync_once()).patched == ["node-1"]
        leave = fake.patches("node-1")[-1]["metadata"]
        assert set(leave["labels"]) == set(joined_1)
        assert set(leave["labels"].values()) == {None}
        assert leave["annotations"] == {OWNED_ANNOTATION: None}
        assert fake.nodes["node-1"]["metadata"] == before["node-1"]["metadata"] | {"resourceVersion": "3"}

    assert fake.invalid == []
    patches = [r for r in fake.requests if r.method == "PATCH"]
    assert {(r.content_type, r.authorization) for r in patches} == {(MERGE_PATCH, f"Bearer {TOKEN}")}
    stripped = {n: strip_version(d) for n, d in fake.nodes.items()}
    assert replay(before, fake.requests) == stripped


def strip_version(document: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(document)
    out["metadata"].pop("resourceVersion", None)
    return out


async def test_a_concurrent_writer_is_not_overwritten(
    client: httpx.AsyncClient,
    headers: dict[str, str],
    world: f.NvlinkSite,
    session: AsyncSession,
    tmp_path: Path,
) -> None:
    partition = await f.logical_partition(session, world.tenant, world.site)
    await session.commit()
    (instance,) = await make_instances(client, headers, world, partition.id, 1)
    clique = await realise(session, instance, partition.id, 3)
    await session.commit()
    client.headers.update(headers)
    fake = cluster()

    def writer(name: str) -> None:  # another controller labels node-0 after the sync read it
        metadata = fake.nodes[name]["metadata"]
        if name == "node-0" and "example.com/late" not in metadata["labels"]:
            metadata["labels"]["example.com/late"] = "yes"
            metadata["resourceVersion"] = str(int(metadata["resourceVersion"]) + 1)

    fake.before_patch = writer
    async with kube(tmp_path, fake) as kube_api:
        assert sorted((await label_sync(kube_api, client).sync_once()).patched) == ["node-0"]
    statuses = [r.status for r in fake.requests if r.method == "PATCH" and r.path.endswith("/node-0")]
    assert statuses == [409, 200]  # refused on the stale version, recomputed from the Node read again
    (_, retried) = fake.patches("node-0")
    assert retried["metadata"]["resourceVersion"] == "2"
    labels = fake.labels("node-0")
    assert labels[NICO_CLIQUE] == clique and labels["example.com/late"] == "yes"
    assert labels[GFD_CLIQUE] == GFD_VALUE and FOREIGN.items() <= labels.items()
    assert fake.invalid == []


async def test_resumes_from_the_stored_cursor_after_a_restart(
    client: httpx.AsyncClient,
    headers: dict[str, str],
    world: f.NvlinkSite,
    session: AsyncSession,
    settings: Settings,
    database_url: str,
    tmp_path: Path,
) -> None:
    partition = await f.logical_partition(session, world.tenant, world.site)
    await session.commit()
    first, second = await make_instances(client, headers, world, partition.id, 2)
    fake = cluster()
    sent: list[str | None] = []

    async def note(request: httpx.Request) -> None:
        if request.url.path.endswith("/nvlink-topology/events"):
            sent.append(request.headers.get("Last-Event-ID"))

    def cursor() -> str | None:
        return fake.configmaps[(NAMESPACE, CONFIGMAP)]["data"].get("lastEventId")

    async with replica(settings, database_url) as url, kube(tmp_path, fake) as kube_api:
        base = f"{url}{BASE}"

        async def start() -> asyncio.Task[None]:
            api = httpx.AsyncClient(headers=headers, base_url=url, event_hooks={"request": [note]})
            sync = label_sync(kube_api, api)
            return asyncio.create_task(run(api, base, {"scope": "tenant"}, sync, resync_seconds=None))

        running = await start()
        await wait_for(lambda: cursor() is not None, within=DEADLINE, what="a cursor stored")
        clique = await realise(session, first, partition.id, 11)
        await session.commit()
        await wait_for(
            lambda: fake.labels("node-0").get(NICO_CLIQUE) == clique, within=DEADLINE, what="node-0's clique"
        )
        await wait_for(lambda: cursor() != sent[0], within=DEADLINE, what="the cursor past the Ready events")
        running.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await running
        stored = cursor()
        assert sent == [None]  # the first start had nothing to resume

        # While it is down, node-1 becomes Ready; the restarted sync resumes from the stored cursor.
        clique = await realise(session, second, partition.id, 11)
        await session.commit()
        running = await start()
        await wait_for(
            lambda: fake.labels("node-1").get(NICO_CLIQUE) == clique, within=DEADLINE, what="node-1's clique"
        )
        await wait_for(lambda: len(sent) == 2, within=DEADLINE, what="the stream reopened")
        assert sent[1] == stored
        await wait_for(lambda: cursor() != stored, within=DEADLINE, what="the cursor past node-1's events")
        assert tuple(map(int, cursor().split("-"))) > tuple(map(int, stored.split("-")))  # type: ignore[union-attr]
        running.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await running
    assert fake.invalid == []
    assert FOREIGN.items() <= fake.labels("node-1").items()


@pytest.mark.parametrize("missing", [True, False])
async def test_the_cursor_store_needs_its_configmap(tmp_path: Path, missing: bool) -> None:
    fake = FakeKube()
    if not missing:
        fake.add_configmap(NAMESPACE, CONFIGMAP, {"lastEventId": "12-3"})
    async with kube(tmp_path, fake) as kube_api:
        store = CursorStore(kube_api, NAMESPACE, CONFIGMAP)
        if missing:
            with pytest.raises(Exception, match="not found"):
                await store.load()
        else:
            assert await store.load() == "12-3"
            await store.save("13-4")
            assert fake.configmaps[(NAMESPACE, CONFIGMAP)]["data"] == {"lastEventId": "13-4"}


async def test_the_command_labels_nodes_once_through_kubectl_proxy(
    client: httpx.AsyncClient,
    headers: dict[str, str],
    world: f.NvlinkSite,
    session: AsyncSession,
    settings: Settings,
    database_url: str,
) -> None:
    partition = await f.logical_partition(session, world.tenant, world.site)
    await session.commit()
    (instance,) = await make_instances(client, headers, world, partition.id, 1)
    clique = await realise(session, instance, partition.id, 6)
    await session.commit()
    fake = cluster()
    fake.token = None  # kubectl proxy holds the credentials
    async with replica(settings, database_url) as url, serve(fake):
        env = os.environ | {
            "NICO_URL": url,
            "NICO_TOKEN": headers["Authorization"].removeprefix("Bearer "),
            "NICO_EXPORT__CLIQUE_LABEL": NICO_CLIQUE,  # the setting's environment twin
        }
        args = ["label-sync", "--org", ORG, "--kube-url", fake.url, "--once"]
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "nico.cli", *args, env=env, stderr=asyncio.subprocess.PIPE
        )
        async with asyncio.timeout(DEADLINE):
            _, stderr = await process.communicate()
        assert process.returncode == 0, stderr.decode()
    assert fake.labels("node-0")[NICO_CLIQUE] == clique
    assert fake.labels("node-0")[GFD_CLIQUE] == GFD_VALUE
    assert [r.authorization for r in fake.requests] == [None] * len(fake.requests)
    assert fake.invalid == []


async def test_in_cluster_config_and_a_rotated_token(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    account = tmp_path / "serviceaccount"
    account.mkdir()
    (account / "token").write_text(TOKEN)
    (account / "namespace").write_text("gpu-ops\n")
    (account / "ca.crt").write_text("")
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "fd00::1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    config = KubeConfig.in_cluster(account)
    assert (config.url, config.namespace) == ("https://[fd00::1]:443", "gpu-ops")
    assert config.token_path == account / "token" and config.ca_path == account / "ca.crt"
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST")
    with pytest.raises(Exception, match="--kube-url"):
        KubeConfig.in_cluster(account)

    fake = cluster()
    async with serve(fake):
        local = KubeConfig(fake.url, token_path=account / "token")
        async with local.client() as http:
            kube_api = KubeApi(local, http)
            monkeypatch.setattr(kube_module, "LIST_PAGE", 2)  # two pages: limit, then continue
            assert [n["metadata"]["name"] for n in await kube_api.list_nodes()] == [
                "cpu-0",
                "node-0",
                "node-1",
            ]
            # kubelet rotates the bound token in place: the next request carries the new one
            (account / "token").write_text("rotated")
            fake.token = "rotated"
            assert (await kube_api.get_node("node-0")) is not None
    assert [r.authorization for r in fake.requests] == [f"Bearer {TOKEN}"] * 2 + ["Bearer rotated"]

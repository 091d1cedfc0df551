"""``nico label-sync``: Kubernetes Node labels kept equal to nico's placement, through the Kubernetes
API (the Deployment, ServiceAccount and RBAC are in ``deploy/kubernetes/label-sync.yaml``).

It syncs every Node once at start, then after every burst of placement events (the stream resumed
from the cursor stored in its ConfigMap) and every ``--resync-seconds`` (labels edited by hand or a
Node registered again are put back). It removes only labels it set itself (nico/label_sync/plan.py).
"""

from __future__ import annotations

import asyncio
from typing import Annotated

import httpx
import typer

from nico.cli.api_access import tenant_base, token_or_exit
from nico.cli.bootstrap import settings_or_exit, setup_logging
from nico.cli.export import CliqueLabel, SseReader, clique_label_or_default, err, watch
from nico.cli.options import DEFAULT_URL, ApiToken, ApiUrl, org_option
from nico.label_sync.kube import KubeApi, KubeConfig, KubeError
from nico.label_sync.sync import CursorStore, ExportError, LabelSync
from nico.services.feed_export import DEFAULT_NODE_NAME

DEFAULT_CONFIGMAP = "nico-label-sync"


async def run(
    api: httpx.AsyncClient,
    base: str,
    scope_params: dict[str, str],
    sync: LabelSync,
    *,
    resync_seconds: float | None,
    once: bool = False,
) -> None:
    """Sync now, then follow the event stream from the stored cursor (``once``: one pass, whose
    failure is the caller's, and no cursor)."""
    if once:
        await sync.sync_once()
        return
    reader = SseReader(last_event_id=await sync.store.load() if sync.store is not None else None)
    sync.saved = reader.last_event_id
    sync.cursor = lambda: reader.last_event_id
    await sync.publish()
    await watch(api, base, scope_params, sync.publish, reader, resync_seconds)


def label_sync(
    org: Annotated[str, org_option("Org (tenant, or provider with --scope provider).")],
    url: ApiUrl = DEFAULT_URL,
    token: ApiToken = None,
    scope: Annotated[str, typer.Option(help="tenant, or provider (every instance at its sites).")] = "tenant",
    site_id: Annotated[str | None, typer.Option(help="Only this site.")] = None,
    node_name: Annotated[
        str,
        typer.Option(help="Node name template: {instance} {instance_id} {machine} {hostname} {site}."),
    ] = DEFAULT_NODE_NAME,
    clique_label: CliqueLabel = None,
    kube_url: Annotated[
        str | None,
        typer.Option(help="Kubernetes API URL needing no credentials (kubectl proxy); default: in-cluster."),
    ] = None,
    state_namespace: Annotated[
        str | None, typer.Option(help="Namespace of the cursor's ConfigMap (default: the pod's).")
    ] = None,
    state_configmap: Annotated[
        str, typer.Option(help="ConfigMap holding the stream cursor; empty: keep none.")
    ] = DEFAULT_CONFIGMAP,
    resync_seconds: Annotated[
        float, typer.Option(min=1.0, help="Sync at least this often without events.")
    ] = 300.0,
    once: Annotated[bool, typer.Option("--once", help="Sync once and exit.")] = False,
) -> None:
    """Keep Kubernetes Node labels equal to NVLink placement (patches Nodes through the Kubernetes API)."""
    settings = settings_or_exit()
    setup_logging(settings)
    key = clique_label_or_default(clique_label)
    token = token_or_exit(token, org, ["PROVIDER_VIEWER"] if scope == "provider" else ["TENANT_ADMIN"])
    scope_params = {"scope": scope} | ({"siteId": site_id} if site_id else {})
    params = scope_params | {"nodeName": node_name, "cliqueLabel": key}
    base = tenant_base(url, org)
    try:
        config = KubeConfig(kube_url) if kube_url else KubeConfig.in_cluster()
    except KubeError as exc:
        err.print(f"[bold red]error:[/] {exc}")
        raise typer.Exit(2) from None

    async def main() -> None:
        headers = {"Authorization": f"Bearer {token}"}
        async with httpx.AsyncClient(headers=headers, timeout=30.0) as api, config.client() as client:
            kube = KubeApi(config, client)
            namespace = state_namespace or config.namespace
            store = CursorStore(kube, namespace, state_configmap) if state_configmap else None
            sync = LabelSync(kube, api, f"{base}/nvlink-topology/export", params, store=store)
            await run(api, base, scope_params, sync, resync_seconds=resync_seconds, once=once)

    try:
        asyncio.run(main())
    except KeyboardInterrupt:
        pass
    except (KubeError, ExportError) as exc:
        err.print(f"[bold red]error:[/] {exc}")
        raise typer.Exit(1) from None

"""One pass of the label sync, and the stream cursor it has synced to.

A pass reads nico's ``kubernetes-labels`` export, lists the Nodes, and sends each Node that differs its
merge patch (plan). A patch refused for a stale ``resourceVersion`` (409) is recomputed from the Node
read again. The cursor (the event stream's ``Last-Event-ID``) is noted before the export is read, so the
export covers every event up to it, and stored only once the pass has patched every Node: after a
restart the stream resumes from there, and a pass that died half-way is redone.

The cursor lives in one ConfigMap (key ``lastEventId``) that the deployment creates: a namespaced
object the sync's Role may read and patch by name, and nothing else of the namespace; a Node
annotation would put a cluster-wide value on an object of no particular node.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx

from nico.label_sync.kube import KubeApi, KubeError
from nico.label_sync.plan import node_patch, plan

log = logging.getLogger(__name__)

CURSOR_KEY = "lastEventId"
CONFLICT_RETRIES = 5
RETRY_FIRST, RETRY_LAST = 1.0, 30.0


class ExportError(Exception):
    """nico's API did not answer the export."""


class CursorStore:
    """The cursor in ConfigMap ``namespace/name``, data key ``lastEventId``."""

    def __init__(self, kube: KubeApi, namespace: str, name: str) -> None:
        self.kube, self.namespace, self.name = kube, namespace, name

    async def load(self) -> str | None:
        configmap = await self.kube.get_configmap(self.namespace, self.name)
        if configmap is None:
            raise KubeError(
                404, f"ConfigMap {self.namespace}/{self.name} not found (the deployment creates it)"
            )
        value = (configmap.get("data") or {}).get(CURSOR_KEY)
        return str(value) if value else None

    async def save(self, cursor: str) -> None:
        await self.kube.patch_configmap(self.namespace, self.name, {"data": {CURSOR_KEY: cursor}})


@dataclass
class PassResult:
    patched: list[str] = field(default_factory=list)
    absent: list[str] = field(default_factory=list)  # exported Nodes the cluster does not have


class LabelSync:
    def __init__(
        self,
        kube: KubeApi,
        api: httpx.AsyncClient,
        export_url: str,
        params: dict[str, str],
        *,
        store: CursorStore | None = None,
        cursor: Callable[[], str | None] = lambda: None,
    ) -> None:
        self.kube, self.api, self.export_url, self.store, self.cursor = kube, api, export_url, store, cursor
        self.params = params | {"format": "kubernetes-labels"}
        self.saved: str | None = None
        self.passes = 0

    async def desired(self) -> dict[str, dict[str, str]]:
        """Node name -> nico's labels for it, from the export."""
        try:
            response = await self.api.get(self.export_url, params=self.params)
        except httpx.HTTPError as exc:
            raise ExportError(f"export: {exc}") from exc
        if response.status_code != 200:
            raise ExportError(f"export: {response.status_code} {response.text[:300]}")
        items: list[dict[str, Any]] = response.json()["items"]
        return {item["metadata"]["name"]: dict(item["metadata"].get("labels") or {}) for item in items}

    async def sync_once(self) -> PassResult:
        mark = self.cursor()
        desired = await self.desired()
        todo = plan(await self.kube.list_nodes(), desired)
        result = PassResult(absent=todo.absent)
        for name, patch in todo.patches.items():
            if await self._apply(name, patch, desired.get(name)):
                result.patched.append(name)
        if self.store is not None and mark is not None and mark != self.saved:
            await self.store.save(mark)
            self.saved = mark
        self.passes += 1
        return result

    async def _apply(self, name: str, patch: dict[str, Any] | None, desired: dict[str, str] | None) -> bool:
        """Send ``patch``; on a conflict, read the Node again and send what it needs then."""
        for _ in range(CONFLICT_RETRIES):
            if patch is None:
                return False
            try:
                return await self.kube.patch_node(name, patch) is not None
            except KubeError as exc:
                if exc.status != 409:
                    raise
            node = await self.kube.get_node(name)
            patch = None if node is None else node_patch(node, desired)
        raise KubeError(409, f"Node {name}: still conflicting after {CONFLICT_RETRIES} attempts")

    async def publish(self) -> None:
        """A pass, retried (waiting longer each time) until one succeeds."""
        delay = RETRY_FIRST
        while True:
            try:
                result = await self.sync_once()
            except (KubeError, ExportError) as exc:
                log.warning("label sync failed, retrying in %.0f s: %s", delay, exc)
                await asyncio.sleep(delay)
                delay = min(delay * 2, RETRY_LAST)
                continue
            if result.patched:
                log.info("labels patched on %d node(s): %s", len(result.patched), ", ".join(result.patched))
            if result.absent:
                log.info(
                    "%d exported node(s) not in the cluster: %s", len(result.absent), ", ".join(result.absent)
                )
            return

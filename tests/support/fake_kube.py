"""A Kubernetes API server stand-in on loopback for the label sync: the Node and ConfigMap calls it
makes, served by uvicorn, every request recorded. Nothing is taken on trust: a PATCH must be a JSON
merge patch whose body, as a partial Node (deletions aside), passes the real Node schema
(kubernetes-validate, strict), with label keys and values that apimachinery would accept; the Node it
produces must pass the schema too. A ``metadata.resourceVersion`` in a patch is a precondition (409
when stale), as on a real API server; ``limit``/``continue`` page the Node list.

The recorded requests can be replayed onto the Nodes as they were before (:func:`replay`), which must
give the same Nodes: the patches carry everything they mean, nothing of this server's state."""

from __future__ import annotations

import asyncio
import contextlib
import copy
import json
import re
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import kubernetes_validate
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from nico.serving import EmbeddedServer
from tests.support.net import free_port
from tests.support.waiting import wait_for

KUBERNETES_VERSION = "1.37.0"
MERGE_PATCH = "application/merge-patch+json"
TOKEN = "fake-service-account-token"
# Kubernetes label syntax (apimachinery validation): optional DNS-subdomain prefix, 63-char name.
_NAME = r"([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)"
_PREFIX = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"


def valid_label(key: str, value: str) -> bool:
    prefix, _, name = key.rpartition("/")
    if prefix and (len(prefix) > 253 or not re.fullmatch(_PREFIX, prefix)):
        return False
    if not (0 < len(name) <= 63 and re.fullmatch(_NAME, name)):
        return False
    return value == "" or (len(value) <= 63 and re.fullmatch(_NAME, value) is not None)


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge_patch(out.get(key), value)
    return out


def without_deletions(patch: Any) -> Any:
    if not isinstance(patch, dict):
        return patch
    return {k: without_deletions(v) for k, v in patch.items() if v is not None}


def node(
    name: str, labels: Mapping[str, str] | None = None, annotations: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """A Node as a kubelet registers it (the parts the schema and the sync care about)."""
    metadata: dict[str, Any] = {
        "name": name,
        "uid": f"uid-{name}",
        "resourceVersion": "1",
        "labels": {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", **(labels or {})},
    }
    if annotations:
        metadata["annotations"] = dict(annotations)
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": metadata,
        "spec": {"podCIDR": "10.244.0.0/24"},
        "status": {"conditions": [{"type": "Ready", "status": "True"}], "capacity": {"nvidia.com/gpu": "4"}},
    }


def check_node(document: Mapping[str, Any]) -> None:
    kubernetes_validate.validate(dict(document), KUBERNETES_VERSION, strict=True)
    labels = document.get("metadata", {}).get("labels") or {}
    bad = {k: v for k, v in labels.items() if not valid_label(k, v)}
    assert not bad, f"invalid labels: {bad}"


@dataclass
class Recorded:
    method: str
    path: str
    content_type: str | None
    authorization: str | None
    body: Any
    status: int = 0


@dataclass
class FakeKube:
    nodes: dict[str, dict[str, Any]] = field(default_factory=dict)
    configmaps: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    requests: list[Recorded] = field(default_factory=list)
    invalid: list[str] = field(default_factory=list)  # why a request was refused as malformed
    # The bearer token every request must carry; None: none (``kubectl proxy`` adds the credentials).
    token: str | None = TOKEN
    # Called with the Node's name as a PATCH arrives, before it is checked: another writer's turn.
    before_patch: Callable[[str], None] | None = None
    url: str = ""

    def add_node(self, document: dict[str, Any]) -> None:
        check_node(document)
        self.nodes[document["metadata"]["name"]] = copy.deepcopy(document)

    def add_configmap(self, namespace: str, name: str, data: dict[str, str] | None = None) -> None:
        configmap = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": namespace, "resourceVersion": "1"},
            "data": dict(data or {}),
        }
        kubernetes_validate.validate(configmap, KUBERNETES_VERSION, strict=True)
        self.configmaps[(namespace, name)] = configmap

    def patches(self, name: str | None = None) -> list[Any]:
        return [
            r.body
            for r in self.requests
            if r.method == "PATCH" and "/nodes/" in r.path and (name is None or r.path.endswith(f"/{name}"))
        ]

    def labels(self, name: str) -> dict[str, str]:
        return dict(self.nodes[name]["metadata"].get("labels") or {})

    # ---- the API ---------------------------------------------------------------------------------

    async def _record(self, request: Request) -> Recorded:
        raw = await request.body()
        recorded = Recorded(
            request.method,
            request.url.path,
            request.headers.get("content-type"),
            request.headers.get("authorization"),
            json.loads(raw) if raw else None,
        )
        self.requests.append(recorded)
        return recorded

    def _refuse(self, status: int, reason: str, message: str) -> JSONResponse:
        if status in (400, 415, 422):
            self.invalid.append(message)
        body = {
            "kind": "Status",
            "apiVersion": "v1",
            "status": "Failure",
            "reason": reason,
            "message": message,
        }
        return JSONResponse(body, status_code=status)

    async def list_nodes(self, request: Request) -> Response:
        recorded = await self._record(request)
        if self.token is not None and recorded.authorization != f"Bearer {self.token}":
            return self._refuse(401, "Unauthorized", "Unauthorized")
        names = sorted(self.nodes)
        limit = int(request.query_params.get("limit", "0") or 0) or len(names) or 1
        start = int(request.query_params.get("continue", "0") or 0)
        page = names[start : start + limit]
        metadata = {"resourceVersion": "99"}
        if start + limit < len(names):
            metadata["continue"] = str(start + limit)
        items = [self.nodes[n] for n in page]
        return JSONResponse({"apiVersion": "v1", "kind": "NodeList", "metadata": metadata, "items": items})

    async def one_node(self, request: Request) -> Response:
        recorded = await self._record(request)
        if self.token is not None and recorded.authorization != f"Bearer {self.token}":
            return self._refuse(401, "Unauthorized", "Unauthorized")
        name = request.path_params["name"]
        if name not in self.nodes:
            return self._refuse(404, "NotFound", f'nodes "{name}" not found')
        if request.method == "GET":
            return JSONResponse(self.nodes[name])
        if self.before_patch is not None:
            self.before_patch(name)
        response = self._patch(name, recorded)
        recorded.status = response.status_code
        return response

    def _patch(self, name: str, recorded: Recorded) -> Response:
        if recorded.content_type != MERGE_PATCH:
            return self._refuse(415, "UnsupportedMediaType", f"content type {recorded.content_type}")
        patch = recorded.body
        partial = {"apiVersion": "v1", "kind": "Node", **without_deletions(patch)}
        try:
            check_node(partial)
        except (kubernetes_validate.ValidationError, AssertionError) as exc:
            return self._refuse(422, "Invalid", f"patch is not a valid partial Node: {exc}")
        current = self.nodes[name]
        wanted = (patch.get("metadata") or {}).get("resourceVersion")
        if wanted is not None and wanted != current["metadata"]["resourceVersion"]:
            return self._refuse(409, "Conflict", "the object has been modified")
        result = merge_patch(current, patch)
        try:
            check_node(result)
        except (kubernetes_validate.ValidationError, AssertionError) as exc:
            return self._refuse(422, "Invalid", f"patched Node is invalid: {exc}")
        result["metadata"]["resourceVersion"] = str(int(current["metadata"]["resourceVersion"]) + 1)
        self.nodes[name] = result
        return JSONResponse(result)

    async def configmap(self, request: Request) -> Response:
        recorded = await self._record(request)
        if self.token is not None and recorded.authorization != f"Bearer {self.token}":
            return self._refuse(401, "Unauthorized", "Unauthorized")
        key = (request.path_params["namespace"], request.path_params["name"])
        if key not in self.configmaps:
            return self._refuse(404, "NotFound", f'configmaps "{key[1]}" not found')
        if request.method == "GET":
            return JSONResponse(self.configmaps[key])
        if recorded.content_type != MERGE_PATCH:
            return self._refuse(415, "UnsupportedMediaType", f"content type {recorded.content_type}")
        result = merge_patch(self.configmaps[key], recorded.body)
        kubernetes_validate.validate(result, KUBERNETES_VERSION, strict=True)
        self.configmaps[key] = result
        return JSONResponse(result)

    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/api/v1/nodes", self.list_nodes, methods=["GET"]),
                Route("/api/v1/nodes/{name}", self.one_node, methods=["GET", "PATCH"]),
                Route(
                    "/api/v1/namespaces/{namespace}/configmaps/{name}",
                    self.configmap,
                    methods=["GET", "PATCH"],
                ),
            ]
        )


def replay(before: Mapping[str, dict[str, Any]], requests: list[Recorded]) -> dict[str, dict[str, Any]]:
    """The Nodes ``before`` with the recorded Node patches the server accepted applied in order, each
    result checked against the schema (resourceVersions dropped: they are the server's)."""
    nodes = copy.deepcopy(dict(before))
    for document in nodes.values():
        document["metadata"].pop("resourceVersion", None)
    for recorded in requests:
        if recorded.method != "PATCH" or "/nodes/" not in recorded.path or recorded.status != 200:
            continue
        name = recorded.path.rsplit("/", 1)[-1]
        merged = merge_patch(nodes[name], recorded.body)
        merged["metadata"].pop("resourceVersion", None)  # the precondition, not a change
        check_node(merged)
        nodes[name] = merged
    return nodes


@contextlib.asynccontextmanager
async def serve(fake: FakeKube) -> AsyncIterator[FakeKube]:
    port = free_port()
    config = uvicorn.Config(fake.app(), host="127.0.0.1", port=port, log_level="warning")
    server = EmbeddedServer(config)
    task = asyncio.create_task(server.serve())
    try:
        await wait_for(lambda: server.started or task.done(), within=20.0, what="fake Kubernetes API started")
        if task.done():
            task.result()
        fake.url = f"http://127.0.0.1:{port}"
        yield fake
    finally:
        server.should_exit = True
        await task

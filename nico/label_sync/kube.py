"""The Kubernetes API calls the label sync makes, over httpx: list, get and merge-patch Nodes, read and
merge-patch one ConfigMap. In a pod it uses the service account (token re-read on every request, since
bound tokens rotate; the cluster's CA); elsewhere any URL that needs no credentials (``kubectl proxy``).

Four calls do not justify a generated client (the ``kubernetes`` package is synchronous and large;
kr8s brings a dozen dependencies): httpx is already nico's HTTP client.
"""

from __future__ import annotations

import os
import ssl
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx

SERVICE_ACCOUNT = Path("/var/run/secrets/kubernetes.io/serviceaccount")
MERGE_PATCH = "application/merge-patch+json"
LIST_PAGE = 500


class KubeError(Exception):
    """The API server refused a request (or could not be reached: status 0)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"{status}: {message}" if status else message)
        self.status = status


@dataclass(frozen=True)
class KubeConfig:
    url: str
    token_path: Path | None = None
    ca_path: Path | None = None
    namespace: str = "default"

    @classmethod
    def in_cluster(cls, service_account: Path = SERVICE_ACCOUNT) -> KubeConfig:
        """The pod's own API server and service account (what client-go's in-cluster config reads)."""
        host, port = os.environ.get("KUBERNETES_SERVICE_HOST"), os.environ.get("KUBERNETES_SERVICE_PORT")
        if not host or not port:
            raise KubeError(0, "not in a pod (KUBERNETES_SERVICE_HOST unset): pass --kube-url")
        host = f"[{host}]" if ":" in host else host
        namespace_file = service_account / "namespace"
        namespace = namespace_file.read_text().strip() if namespace_file.exists() else "default"
        return cls(f"https://{host}:{port}", service_account / "token", service_account / "ca.crt", namespace)

    def client(self, timeout: float = 30.0) -> httpx.AsyncClient:
        verify: ssl.SSLContext | bool = True
        if self.ca_path is not None:
            verify = ssl.create_default_context(cafile=str(self.ca_path))
        return httpx.AsyncClient(base_url=self.url, verify=verify, timeout=timeout)


class KubeApi:
    def __init__(self, config: KubeConfig, client: httpx.AsyncClient) -> None:
        self.config, self.client = config, client

    def _headers(self, content_type: str | None = None) -> dict[str, str]:
        headers = {"Accept": "application/json"}
        if self.config.token_path is not None:
            headers["Authorization"] = f"Bearer {self.config.token_path.read_text().strip()}"
        if content_type is not None:
            headers["Content-Type"] = content_type
        return headers

    async def _call(
        self,
        method: str,
        path: str,
        *,
        body: dict[str, Any] | None = None,
        params: dict[str, Any] | None = None,
    ) -> dict[str, Any] | None:
        """The response's object; None for 404."""
        try:
            response = await self.client.request(
                method,
                path,
                params=params,
                json=body,
                headers=self._headers(MERGE_PATCH if method == "PATCH" else None),
            )
        except httpx.HTTPError as exc:
            raise KubeError(0, f"{method} {path}: {exc}") from exc
        if response.status_code == 404:
            return None
        if response.status_code >= 300:
            try:
                message = response.json().get("message", response.text)
            except ValueError:
                message = response.text
            raise KubeError(response.status_code, f"{method} {path}: {str(message)[:300]}")
        document: dict[str, Any] = response.json()
        return document

    async def list_nodes(self) -> list[dict[str, Any]]:
        nodes: list[dict[str, Any]] = []
        params: dict[str, Any] = {"limit": LIST_PAGE}
        while True:
            page = await self._call("GET", "/api/v1/nodes", params=params)
            if page is None:
                raise KubeError(404, "GET /api/v1/nodes: not found")
            nodes += page.get("items") or []
            token = (page.get("metadata") or {}).get("continue")
            if not token:
                return nodes
            params = {"limit": LIST_PAGE, "continue": token}

    async def get_node(self, name: str) -> dict[str, Any] | None:
        return await self._call("GET", f"/api/v1/nodes/{quote(name, safe='')}")

    async def patch_node(self, name: str, patch: dict[str, Any]) -> dict[str, Any] | None:
        """JSON merge patch (RFC 7386); a ``metadata.resourceVersion`` in it makes it conditional (409)."""
        return await self._call("PATCH", f"/api/v1/nodes/{quote(name, safe='')}", body=patch)

    def _configmap(self, namespace: str, name: str) -> str:
        return f"/api/v1/namespaces/{quote(namespace, safe='')}/configmaps/{quote(name, safe='')}"

    async def get_configmap(self, namespace: str, name: str) -> dict[str, Any] | None:
        return await self._call("GET", self._configmap(namespace, name))

    async def patch_configmap(
        self, namespace: str, name: str, patch: dict[str, Any]
    ) -> dict[str, Any] | None:
        return await self._call("PATCH", self._configmap(namespace, name), body=patch)

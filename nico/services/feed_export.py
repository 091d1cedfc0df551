"""The scheduler feed's exports: NVLink placement as schedulers read it, as Slurm topology files,
Kubernetes node labels and a Kueue ``Topology`` (nico extension, ``GET /nvlink-topology/export``).

Each instance is one scheduler node. Its NVLink domain is one Slurm leaf switch (``topology/tree``) or
block (``topology/block``); its clique id is what the GPU driver will report as
``nvidia.com/gpu.clique`` once its NVLink interfaces are Ready. nico writes these from what it
decided, before any node agent has seen the partition; node_labels says which labels a node gets.
"""

from __future__ import annotations

import asyncio
import json
import re
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import yaml
from psycopg.rows import dict_row
from psycopg.types.string import TextLoader
from sqlalchemy.ext.asyncio import AsyncSession

from nico.db.models import Site
from nico.db.queries import feed as q
from nico.db.raw import driver_connection
from nico.services import orgs
from nico.services.access import tenant_uses_site
from nico.services.errors import bad_request, forbidden, not_found
from nico.services.node_labels import (
    CLIQUE_LABELS,
    DOMAIN_LABEL,
    GFD_CLIQUE_LABEL,
    GpuPlace,
    gpu_places,
    node_labels,
    removable,
)

FORMATS = (
    "slurm-topology-conf",
    "slurm-topology-yaml",
    "kubernetes-labels",
    "kubectl-labels",
    "kueue-topology",
)
MEDIA_TYPES = {
    "slurm-topology-conf": "text/plain; charset=utf-8",
    "slurm-topology-yaml": "application/yaml",
    "kubernetes-labels": "application/json",
    "kubectl-labels": "text/plain; charset=utf-8",
    "kueue-topology": "application/json",
}
DEFAULT_NODE_NAME = "{instance}"
NODE_NAME_FIELDS = frozenset({"instance", "instance_id", "machine", "hostname", "site"})
# A node-name template: text, ``{{``/``}}`` for braces, and known fields without conversion or format
# spec (``{instance:d}`` would fail at render). The export's OpenAPI pattern; check_node_name holds it.
NODE_NAME_PATTERN = "^([^{}]|\\{\\{|\\}\\}|\\{(" + "|".join(sorted(NODE_NAME_FIELDS)) + ")\\})+$"
_NODE_NAME = re.compile(NODE_NAME_PATTERN)

HOSTNAME_LABEL = "kubernetes.io/hostname"
KUEUE_TOPOLOGY_NAME = "nico-nvlink"
ROOT_SWITCH = "nvlink-root"

_SLURM_BAD = re.compile(r"[^A-Za-z0-9._-]+")
_K8S_BAD = re.compile(r"[^a-z0-9.-]+")


@dataclass(frozen=True)
class Scope:
    """Whose instances: one tenant's, or every instance at a provider's sites; optionally one site."""

    tenant_id: uuid.UUID | None = None
    provider_id: uuid.UUID | None = None
    site_id: uuid.UUID | None = None

    def params(self) -> dict[str, Any]:
        return {"tenant": self.tenant_id, "provider": self.provider_id, "site": self.site_id}

    @property
    def by_provider(self) -> bool:
        return self.tenant_id is None

    @property
    def one_site(self) -> bool:
        return self.site_id is not None


@dataclass(frozen=True)
class Node:
    instance_id: uuid.UUID
    instance_name: str
    site_id: uuid.UUID
    site_name: str
    machine_id: str | None
    hostname: str | None
    domain_uuid: uuid.UUID
    interfaces: tuple[dict[str, Any], ...]
    # deviceInstance of every GPU of the instance's machine (the GPUs its node exposes); empty when
    # the machine's GPUs are not known
    tray_devices: tuple[int, ...] = ()

    @property
    def gpus(self) -> list[GpuPlace]:
        """Where each GPU the node exposes is (node_labels: the clique rule reads these)."""
        return gpu_places(self.interfaces, self.tray_devices)

    def name(self, template: str) -> str:
        return template.format(
            instance=self.instance_name,
            instance_id=self.instance_id,
            machine=self.machine_id or self.instance_name,
            hostname=self.hostname or self.machine_id or self.instance_name,
            site=self.site_name,
        )


def check_node_name(template: str) -> str:
    """A node-name template of :data:`NODE_NAME_PATTERN`; returns it, or raises 400."""
    if _NODE_NAME.match(template) is None:
        known = ", ".join("{" + f + "}" for f in sorted(NODE_NAME_FIELDS))
        raise bad_request(f"Invalid nodeName template: {template[:256]!r} (fields: {known})")
    return template


BAD_FORMAT = "Invalid format value: {value} in query (one of " + ", ".join(FORMATS) + ")"
BAD_SITE = "Invalid Site ID: {value} specified in query"


def check_format(value: str) -> str:
    if value not in FORMATS:
        raise bad_request(BAD_FORMAT.format(value=value))
    return value


# The formats whose items are nodes, which a page can hold (a Slurm file or a Kueue Topology is one
# document: half of one is no file at all).
PAGED_FORMATS = ("kubernetes-labels", "kubectl-labels")
BAD_PAGED_FORMAT = "pageNumber and pageSize apply to the formats " + " and ".join(PAGED_FORMATS) + " only"
# What each format reads: the Slurm files need names and domains, a Kueue Topology nothing.
_READS = {
    "slurm-topology-conf": q.PLACEMENT_NAMES,
    "slurm-topology-yaml": q.PLACEMENT_NAMES,
    "kubernetes-labels": q.PLACEMENT,
    "kubectl-labels": q.PLACEMENT,
}


@dataclass(frozen=True)
class Slice:
    """One page of the nodes: ``limit`` of them after the first ``offset`` (by name)."""

    offset: int
    limit: int


async def placement(session: AsyncSession, scope: Scope, sql: str = q.PLACEMENT) -> list[Node]:
    """Every instance in ``scope`` with an NVLink domain, by name (``sql``: what of it to read)."""
    return (await _nodes(session, sql, scope.params()))[0]


async def placement_page(session: AsyncSession, scope: Scope, wanted: Slice) -> tuple[list[Node], int]:
    """One page of :func:`placement`, and how many nodes there are in all."""
    params = {**scope.params(), "offset": wanted.offset, "limit": wanted.limit}
    nodes, total = await _nodes(session, q.placement_page(scope.by_provider, scope.one_site), params)
    if not nodes and wanted.offset:  # past the end: the count still counts
        total = await _count(session, scope)
    return nodes, total


async def _count(session: AsyncSession, scope: Scope) -> int:
    driver = await driver_connection(session)
    async with driver.cursor() as cursor:
        await cursor.execute(q.placement_count(scope.by_provider, scope.one_site), scope.params())
        row = await cursor.fetchone()
    return int(row[0]) if row else 0


async def _nodes(session: AsyncSession, sql: str, params: dict[str, Any]) -> tuple[list[Node], int]:
    driver = await driver_connection(session)
    async with driver.cursor(row_factory=dict_row) as cursor:
        # the interfaces' JSON as text, parsed with the nodes in a thread: 50,000 nodes take ~1.5 s
        cursor.adapters.register_loader("json", TextLoader)
        await cursor.execute(sql, params)
        rows = await cursor.fetchall()
    nodes = await asyncio.to_thread(_made, rows)
    return nodes, int(rows[0]["total"]) if rows and "total" in rows[0] else len(nodes)


def _made(rows: list[dict[str, Any]]) -> list[Node]:
    return [
        Node(
            instance_id=row["instance_id"],
            instance_name=row["instance_name"],
            site_id=row["site_id"],
            site_name=row["site_name"],
            machine_id=row["machine_id"],
            hostname=row["hostname"],
            domain_uuid=row["domain_uuid"],
            interfaces=tuple(json.loads(row["interfaces"])) if "interfaces" in row else (),
            tray_devices=tuple(row.get("tray_devices", ())),
        )
        for row in rows
    ]


BAD_CLIQUE_LABEL = "Invalid cliqueLabel value: {value} in query (one of " + ", ".join(CLIQUE_LABELS) + ")"


def check_clique_label(value: str) -> str:
    if value not in CLIQUE_LABELS:
        raise bad_request(BAD_CLIQUE_LABEL.format(value=value))
    return value


async def export(
    session: AsyncSession,
    scope: Scope,
    fmt: str,
    node_name: str = DEFAULT_NODE_NAME,
    clique_label: str = GFD_CLIQUE_LABEL,
) -> str:
    """The placement of ``scope`` rendered as ``fmt`` (one of :data:`FORMATS`); ``clique_label`` is
    the key a node's clique goes under (Kubernetes and Kueue formats)."""
    check_format(fmt)
    check_node_name(node_name)
    check_clique_label(clique_label)
    nodes = await placement(session, scope, _READS[fmt]) if fmt in _READS else []
    # A whole site's document takes seconds to write at 10,000 racks (50,000 nodes: ~2 s); in a thread
    # the event loop keeps its turns (the GIL's switch interval) and the replica's other requests move.
    return await asyncio.to_thread(render, nodes, fmt, node_name, clique_label)


async def export_page(
    session: AsyncSession,
    scope: Scope,
    fmt: str,
    wanted: Slice,
    node_name: str = DEFAULT_NODE_NAME,
    clique_label: str = GFD_CLIQUE_LABEL,
) -> tuple[str, int]:
    """One page of the nodes of ``scope`` rendered as ``fmt`` (one of :data:`PAGED_FORMATS`), and how
    many nodes there are in all; 400 for a format that is one document."""
    check_format(fmt)
    if fmt not in PAGED_FORMATS:
        raise bad_request(BAD_PAGED_FORMAT)
    check_node_name(node_name)
    check_clique_label(clique_label)
    nodes, total = await placement_page(session, scope, wanted)
    return render(nodes, fmt, node_name, clique_label), total


def render(
    nodes: Sequence[Node], fmt: str, node_name: str = DEFAULT_NODE_NAME, clique_label: str = GFD_CLIQUE_LABEL
) -> str:
    if fmt == "slurm-topology-conf":
        return slurm_topology_conf(nodes, node_name)
    if fmt == "slurm-topology-yaml":
        return slurm_topology_yaml(nodes, node_name)
    if fmt == "kubernetes-labels":
        return json.dumps(kubernetes_nodes(nodes, node_name, clique_label), indent=2) + "\n"
    if fmt == "kubectl-labels":
        return "".join(line + "\n" for line in kubectl_lines(nodes, node_name, clique_label))
    if fmt == "kueue-topology":
        return json.dumps(kueue_topology(clique_label), indent=2) + "\n"
    raise bad_request(f"Invalid format value: {fmt} in query")


def slurm_name(value: str) -> str:
    return _SLURM_BAD.sub("-", value).strip("-") or "node"


def switch_name(domain: uuid.UUID) -> str:
    return f"nvl-{domain}"


def by_domain(nodes: Sequence[Node], node_name: str) -> dict[uuid.UUID, list[str]]:
    out: dict[uuid.UUID, list[str]] = {}
    for node in sorted(nodes, key=lambda n: (str(n.domain_uuid), n.name(node_name))):
        out.setdefault(node.domain_uuid, []).append(slurm_name(node.name(node_name)))
    return out


def slurm_topology_conf(nodes: Sequence[Node], node_name: str = DEFAULT_NODE_NAME) -> str:
    """Slurm ``topology/tree``: one leaf switch per NVLink domain under one root switch."""
    lines = ["# Slurm topology.conf (topology/tree) written by nico: one leaf switch per NVLink domain"]
    domains = by_domain(nodes, node_name)
    for domain, names in domains.items():
        lines.append(f"SwitchName={switch_name(domain)} Nodes={','.join(names)}")
    if domains:
        lines.append(f"SwitchName={ROOT_SWITCH} Switches={','.join(switch_name(d) for d in domains)}")
    return "\n".join(lines) + "\n"


def slurm_topology_yaml(nodes: Sequence[Node], node_name: str = DEFAULT_NODE_NAME) -> str:
    """Slurm ``topology/block`` (``topology.yaml``, Slurm 24.05+): one block per NVLink domain."""
    blocks = [
        {"block": switch_name(domain), "nodes": ",".join(names)}
        for domain, names in by_domain(nodes, node_name).items()
    ]
    document = [{"topology": "nvlink", "cluster_default": True, "block": {"blocks": blocks}}]
    header = "# Slurm topology.yaml (topology/block) written by nico: one block per NVLink domain\n"
    return header + yaml.safe_dump(document, sort_keys=False)


def kubernetes_name(value: str) -> str:
    return _K8S_BAD.sub("-", value.lower()).strip("-.")[:253] or "node"


def labels_of(node: Node, clique_label: str = GFD_CLIQUE_LABEL) -> dict[str, str]:
    """nico's labels for a node (node_labels): every value is a valid label value."""
    return node_labels(
        node.gpus, domain=str(node.domain_uuid), site=str(node.site_id), clique_label=clique_label
    )


def kubernetes_nodes(
    nodes: Sequence[Node], node_name: str = DEFAULT_NODE_NAME, clique_label: str = GFD_CLIQUE_LABEL
) -> dict[str, Any]:
    """A ``v1`` ``List`` of partial ``Node`` objects carrying only nico's labels (merge-patchable)."""
    return {
        "apiVersion": "v1",
        "kind": "List",
        "items": [
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {
                    "name": kubernetes_name(node.name(node_name)),
                    "labels": labels_of(node, clique_label),
                },
            }
            for node in nodes
        ],
    }


def kubectl_lines(
    nodes: Sequence[Node], node_name: str = DEFAULT_NODE_NAME, clique_label: str = GFD_CLIQUE_LABEL
) -> list[str]:
    """One ``kubectl label`` per node: set nico's labels, remove those of nico's that no longer apply
    (never the clique key nico was not given)."""
    lines = []
    for node in nodes:
        labels = labels_of(node, clique_label)
        args = [f"{k}={v}" for k, v in labels.items()]
        args += [f"{k}-" for k in removable(node.gpus, clique_label, labels)]
        lines.append(
            f"kubectl label node {kubernetes_name(node.name(node_name))} --overwrite {' '.join(args)}"
        )
    return lines


def kueue_topology(clique_label: str = GFD_CLIQUE_LABEL) -> dict[str, Any]:
    """A Kueue ``Topology`` whose levels are nico's labels, coarsest first (the NVLink domain, the
    clique inside it), the node last."""
    return {
        "apiVersion": "kueue.x-k8s.io/v1alpha1",
        "kind": "Topology",
        "metadata": {"name": KUEUE_TOPOLOGY_NAME},
        "spec": {"levels": [{"nodeLabel": label} for label in (DOMAIN_LABEL, clique_label, HOSTNAME_LABEL)]},
    }


async def resolve_scope(
    session: AsyncSession, org: str, *, provider_side: bool, site_id: uuid.UUID | None
) -> Scope:
    """The caller's scope: its tenant's instances, or (``provider_side``) every instance at its
    provider's sites; ``site_id`` narrows either to one site the caller may see."""
    if provider_side:
        owner = await orgs.provider_of(session, org)
        if owner is None:
            raise forbidden("Org does not have an Infrastructure Provider")
        if site_id is not None:
            site = await session.get(Site, site_id)
            if site is None or site.infrastructure_provider_id != owner.id:
                raise not_found(f"Could not find Site with ID: {site_id}")
        return Scope(provider_id=owner.id, site_id=site_id)
    tenant = await orgs.require_tenant(session, org, status=403)
    if site_id is not None and not await tenant_uses_site(session, tenant.id, site_id):
        raise forbidden(
            f"Site: {site_id} specified in query doesn't exist or Tenant doesn't have access to it"
        )
    return Scope(tenant_id=tenant.id, site_id=site_id)


def parse_site_id(value: str | None) -> uuid.UUID | None:
    if value is None or value == "":
        return None
    try:
        return uuid.UUID(value)
    except ValueError:
        raise bad_request(BAD_SITE.format(value=value)) from None

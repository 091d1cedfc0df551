"""The scheduler feed's Kubernetes node labels: their keys, and the rule that gives a node a clique label
only where it is true.

A Kubernetes node is one instance, and it exposes every GPU of its machine (its compute tray), not
only the ones the tenant put in a logical partition. Pods that take ``nvidia.com/gpu.clique`` as their
affinity ``topologyKey`` expect all of the node's GPUs to share memory with the other nodes of that
clique, so a node carries the clique label only when every GPU of its tray is Ready in that one clique
(GPU Feature Discovery applies the same rule to what the driver reports: one ClusterUUID and one
CliqueId over all fabric-attached GPUs, else no label). Where that is not so, nico's per-GPU labels
say which GPU is where: ``nvlink.nico.io/gpu-<deviceInstance>.partition`` (the logical partition, or
``none``: the GPU is in its tray's or the domain's default partition) and
``nvlink.nico.io/gpu-<deviceInstance>.clique`` (its clique, once Ready).

Every key and value is a valid label: keys are ``<prefix>/<name>`` with a name of at most 63
characters of ``[A-Za-z0-9._-]`` beginning and ending alphanumeric; values are UUIDs, clique ids
(``<uuid>.<u32>``, at most 47 characters) and ``none``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from nico.db.enums import NvLinkInterfaceStatus

GFD_CLIQUE_LABEL = "nvidia.com/gpu.clique"
NICO_CLIQUE_LABEL = "nvlink.nico.io/clique"
CLIQUE_LABELS = (GFD_CLIQUE_LABEL, NICO_CLIQUE_LABEL)
DOMAIN_LABEL = "nvlink.nico.io/domain"
PARTITION_LABEL = "nvlink.nico.io/partition"
SITE_LABEL = "nvlink.nico.io/site"
NO_PARTITION = "none"


def gpu_partition_label(device_instance: int) -> str:
    return f"nvlink.nico.io/gpu-{device_instance}.partition"


def gpu_clique_label(device_instance: int) -> str:
    return f"nvlink.nico.io/gpu-{device_instance}.clique"


@dataclass(frozen=True)
class GpuPlace:
    """Where one GPU a node exposes is: its logical partition (None: in none) and its clique (None:
    not Ready in one)."""

    device_instance: int
    partition: str | None
    clique: str | None


def gpu_places(interfaces: Iterable[Mapping[str, Any]], tray_devices: Sequence[int]) -> list[GpuPlace]:
    """Each GPU the node exposes (its tray's; the interfaces' own when the tray's GPUs are not
    known), with the interfaces that bind it (``device_instance``, ``status``,
    ``logical_partition_id``, ``clique_id``)."""
    bound: dict[int, list[Mapping[str, Any]]] = {}
    for interface in interfaces:
        bound.setdefault(int(interface["device_instance"]), []).append(interface)
    exposed = sorted(set(tray_devices)) if tray_devices else sorted(bound)
    places = []
    for device in exposed:
        mine = bound.get(device, [])
        partitions = {str(i["logical_partition_id"]) for i in mine}
        cliques = {i["clique_id"] for i in mine}
        ready = bool(mine) and all(i["status"] == NvLinkInterfaceStatus.READY for i in mine)
        places.append(
            GpuPlace(
                device_instance=device,
                partition=partitions.pop() if len(partitions) == 1 else None,
                clique=cliques.pop() if ready and len(cliques) == 1 else None,
            )
        )
    return places


def node_clique(places: Sequence[GpuPlace]) -> str | None:
    """The node's clique: every GPU it exposes Ready in that one clique, else None."""
    cliques = {p.clique for p in places}
    return cliques.pop() if len(cliques) == 1 and places and places[0].clique is not None else None


def node_partition(places: Sequence[GpuPlace]) -> str | None:
    """The node's logical partition: every GPU it exposes bound to that one partition, else None."""
    partitions = {p.partition for p in places}
    return partitions.pop() if len(partitions) == 1 and places and places[0].partition is not None else None


def node_labels(
    places: Sequence[GpuPlace], *, domain: str, site: str, clique_label: str = GFD_CLIQUE_LABEL
) -> dict[str, str]:
    """A node's labels, sorted by key; ``clique_label`` (one of :data:`CLIQUE_LABELS`) is the key its
    clique goes under."""
    labels = {DOMAIN_LABEL: domain, SITE_LABEL: site}
    if (partition := node_partition(places)) is not None:
        labels[PARTITION_LABEL] = partition
    if (clique := node_clique(places)) is not None:
        labels[clique_label] = clique
    for place in places:
        labels[gpu_partition_label(place.device_instance)] = place.partition or NO_PARTITION
        if place.clique is not None:
            labels[gpu_clique_label(place.device_instance)] = place.clique
    return dict(sorted(labels.items()))


def removable(places: Sequence[GpuPlace], clique_label: str, labels: Mapping[str, str]) -> list[str]:
    """The keys nico writes on such a node that ``labels`` lacks: to remove (``kubectl label k-``).
    Never the clique key nico does not own."""
    keys = [PARTITION_LABEL, clique_label]
    keys += [gpu_clique_label(p.device_instance) for p in places]
    return [k for k in keys if k not in labels]

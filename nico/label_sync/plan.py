"""What the label sync sends: for each Node, the JSON merge patch that makes its labels what nico's
export says, from what the Node carries now. Pure (no I/O).

Ownership: the annotation ``nvlink.nico.io/owned-labels`` lists (comma-separated, sorted) the label
keys nico set on the Node. A key is removed only when it is in that list and nico no longer wants it;
a key nico never set is never removed, whoever wrote it. A Node nico no longer exports (its instance
left) loses exactly its owned keys and the annotation. Every patch carries the Node's
``resourceVersion`` it was computed from, so a concurrent writer makes it fail (409) instead of being
overwritten from a stale read.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

OWNED_ANNOTATION = "nvlink.nico.io/owned-labels"


def owned_keys(node: Mapping[str, Any]) -> set[str]:
    annotations = (node.get("metadata") or {}).get("annotations") or {}
    return {k for k in str(annotations.get(OWNED_ANNOTATION, "")).split(",") if k}


def node_patch(node: Mapping[str, Any], desired: Mapping[str, str] | None) -> dict[str, Any] | None:
    """The merge patch for ``node`` (a Node object as the API returns it) to carry ``desired`` (None:
    nico exports nothing for it), or None when it already does."""
    metadata = node.get("metadata") or {}
    current: Mapping[str, str] = metadata.get("labels") or {}
    wanted = dict(desired or {})
    owned = owned_keys(node)
    labels: dict[str, str | None] = {k: v for k, v in wanted.items() if current.get(k) != v}
    labels |= {k: None for k in sorted(owned - wanted.keys()) if k in current}
    changes: dict[str, Any] = {}
    if labels:
        changes["labels"] = labels
    if owned != wanted.keys():
        changes["annotations"] = {OWNED_ANNOTATION: ",".join(sorted(wanted)) or None}
    if not changes:
        return None
    if metadata.get("resourceVersion"):
        changes["resourceVersion"] = metadata["resourceVersion"]
    return {"metadata": changes}


@dataclass
class Plan:
    patches: dict[str, dict[str, Any]] = field(default_factory=dict)  # Node name -> merge patch
    absent: list[str] = field(default_factory=list)  # exported, but no such Node in the cluster


def plan(nodes: Sequence[Mapping[str, Any]], desired: Mapping[str, Mapping[str, str]]) -> Plan:
    """Patches for every Node whose labels differ from ``desired`` (Node name -> labels), and for every
    Node nico labelled that it no longer exports."""
    out = Plan()
    present = set()
    for node in nodes:
        name = str((node.get("metadata") or {}).get("name"))
        present.add(name)
        if name not in desired and not owned_keys(node):
            continue
        patch = node_patch(node, desired.get(name))
        if patch is not None:
            out.patches[name] = patch
    out.absent = sorted(set(desired) - present)
    return out

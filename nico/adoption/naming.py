"""Pure: which logical partition a partition's name on the fabric speaks for.

nico names its partitions ``nico-<LP>`` (:func:`nico.reconciler.planner.partition_name`); NVIDIA Infra
Controller names its NMX-C partitions ``<LP><first GPU's guid in decimal>`` (the LP's uuid, then the
GUID, nothing between; the name it gives NMX may list every GUID, ``<LP><guid,guid,...>``). Any other
name (Base Command Manager's, an operator's) names no logical partition: adopting it needs the id from
the operator or a new one.
"""

from __future__ import annotations

import uuid

NICO_PREFIX = "nico-"
_UUID_TEXT = 36  # 8-4-4-4-12 with dashes


def lp_of_fabric_name(name: str) -> uuid.UUID | None:
    """The logical partition ``name`` was made for, by nico's naming or NICo's, else None."""
    if name.startswith(NICO_PREFIX):
        return _uuid(name[len(NICO_PREFIX) :])
    head, tail = name[:_UUID_TEXT], name[_UUID_TEXT:]
    if not tail or not all(guid.isascii() and guid.isdigit() for guid in tail.split(",")):
        return None
    return _uuid(head)


def nico_partition_name(lp: uuid.UUID, gpu_uids: frozenset[int]) -> str:
    """The name NICo gives ``lp``'s partition holding ``gpu_uids`` (the first GUID in numeric order)."""
    return f"{lp}{min(gpu_uids)}"


def _uuid(text: str) -> uuid.UUID | None:
    if len(text) != _UUID_TEXT:
        return None
    try:
        return uuid.UUID(text)
    except ValueError:
        return None

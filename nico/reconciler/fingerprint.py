"""A stable digest of what a domain's fabric holds, to tell a quiet domain from a changed one.

Pure and deterministic across processes (several reconcilers compare digests stored in the
database): partitions in id order, each by id, name and an order-free summary of its members
(count, sum and xor of their 64-bit GUIDs).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from functools import reduce
from operator import xor

from nico.fabric.backend import FabricPartition

U64 = 2**64


def fabric_digest(partitions: Iterable[FabricPartition]) -> str:
    h = hashlib.blake2b(digest_size=16)
    for p in sorted(partitions, key=lambda p: p.partition_id):
        members = p.gpu_uids
        summary = f"{len(members)}|{sum(members) % U64}|{reduce(xor, members, 0)}"
        h.update(f"{p.partition_id}|{p.name}|{summary};".encode())
    return h.hexdigest()

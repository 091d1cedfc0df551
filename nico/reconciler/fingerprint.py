"""A stable digest of what a domain's fabric holds, to tell a quiet domain from a changed one.

Pure and deterministic across processes (several reconcilers compare digests stored in the
database): partitions in id order, each by id, name and an order-free summary of its members
(count, sum and xor of their 64-bit GUIDs). The default partition mode is part of it (tray mode only,
so digests recorded by earlier releases stay valid): a domain settled in one mode is not quiet in the
other, and a switch of mode converges on the next full pass.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from functools import reduce
from operator import xor

from nico.fabric.backend import FabricPartition

U64 = 2**64


def fabric_digest(partitions: Iterable[FabricPartition], mode: str = "domain") -> str:
    h = hashlib.blake2b(digest_size=16)
    if mode != "domain":
        h.update(f"mode={mode};".encode())
    for p in sorted(partitions, key=lambda p: p.nmx_partition_id):
        members = p.gpu_uids
        summary = f"{len(members)}|{sum(members) % U64}|{reduce(xor, members, 0)}"
        h.update(f"{p.nmx_partition_id}|{p.name}|{summary};".encode())
    return h.hexdigest()

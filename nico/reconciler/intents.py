"""Intents: what a pass is about to ask of the fabric, written and committed before any call is made,
so that a pass that dies halfway leaves a record the next pass adopts (:mod:`nico.reconciler.writeback`
closes them)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection

from nico.db.queries import reconciler as queries
from nico.reconciler.operations import CreatePartition, Operation, metric_operation, op_gpus


async def record_intents(
    conn: AsyncConnection, domain: uuid.UUID, operations: Sequence[Operation]
) -> dict[int, uuid.UUID]:
    """Write what is about to be asked of the fabric and commit it (before any call is made), in one
    round trip. Returns intent ids by position in ``operations``."""
    ids, rows = intent_rows(domain, operations)
    await queries.insert_intents(conn, rows, commit=True)
    await conn.commit()  # SQLAlchemy's own: the transaction is committed already, nothing is sent
    return ids


def intent_rows(
    domain: uuid.UUID, operations: Sequence[Operation]
) -> tuple[dict[int, uuid.UUID], list[dict[str, Any]]]:
    """The intent rows of a domain's operations (:func:`queries.insert_intents`), and their ids by
    position in ``operations``."""
    ids: dict[int, uuid.UUID] = {}
    rows = []
    for index, op in enumerate(operations):
        intent_id = uuid.uuid4()
        ids[index] = intent_id
        name = op.name if isinstance(op, CreatePartition) else op.partition.name
        rows.append(
            {
                "id": intent_id,
                "domain": domain,
                "lp": op.lp,
                "operation": metric_operation(op),
                "name": name,
                "ref": None if isinstance(op, CreatePartition) else op.partition.ref,
                "gpus": [str(g) for g in sorted(op_gpus(op))],
            }
        )
    return ids, rows

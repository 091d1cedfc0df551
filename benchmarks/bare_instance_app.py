"""The baseline for ``GET /instance/{id}``: a bare FastAPI app running nico's SQL on nico's pool.

One route, the same statement (``queries.instance.instance_document_for_caller``) on the same raw
psycopg pool of the same size, the same tenant check, the row returned as JSON with the standard
library. What nico spends beyond this is its framework (auth, routing, dependencies, pydantic):
issue 15 asks for nico at 0.9x of this app or better. Started by ``benchmarks/api_bench.py``:

    NICO_DATABASE_URL=... uvicorn --app-dir benchmarks bare_instance_app:app
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI
from fastapi.responses import Response

from nico.db.queries.instance import instance_document_for_caller
from nico.db.raw import RawPool

pool = RawPool(os.environ["NICO_DATABASE_URL"], int(os.environ.get("NICO_DB_POOL_SIZE", "16")))


@asynccontextmanager
async def lifespan(_: FastAPI) -> AsyncIterator[None]:
    yield
    await pool.close()


app = FastAPI(lifespan=lifespan)


@app.get("/v2/org/{org}/nico/instance/{instance_id}")
async def get_instance(org: str, instance_id: str) -> Response:
    async with pool.connection() as conn:
        row: dict[str, Any] = await instance_document_for_caller(conn, org, uuid.UUID(instance_id), 20)
    if row["caller_tenant_id"] is None or row["id"] is None or row["tenant_id"] != row["caller_tenant_id"]:
        return Response(status_code=404)
    return Response(json.dumps(row, default=str), media_type="application/json")

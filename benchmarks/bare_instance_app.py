"""The baseline for ``GET /instance/{id}``: a bare FastAPI app running nico's SQL on nico's pool.

What "the same SQL" includes, so that the comparison measures nico's framework and nothing else:

* the same statement, nico's own (``nico.instance.document.instance_document``: the caller's
  tenant, the instance's tenant and the response body PostgreSQL writes), on the same raw psycopg
  pool (``RawPool``) of the same size;
* the work any correct server of this endpoint must do besides: check the bearer token (a verified
  token is cached by its text until it expires, as nico does; a miss verifies it with PyJWT against
  the same secret, issuer and audience), check the caller's role in the org, check the instance
  belongs to the org's tenant, and answer the body as it came from PostgreSQL.

What it leaves out is what nico adds as a framework: routers, dependencies, the error envelope, the
request guards (body limit, NUL characters), the OpenAPI declarations. It answers errors as bare
status codes. Like nico's app it moves what it loaded at start out of the garbage collector's
generations (``gc.freeze``). Issue 15 asks for nico at 0.9x of this app or better. Started by
``benchmarks/api_bench.py`` with nico's environment (``NICO_DATABASE_URL``, ``NICO_AUTH__*``):

    uvicorn --app-dir benchmarks bare_instance_app:app
"""

from __future__ import annotations

import gc
import os
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import jwt
from fastapi import FastAPI, Request
from fastapi.responses import Response

from nico.config import load_settings
from nico.db.raw import RawPool
from nico.instance.document import instance_document

settings = load_settings()
auth = settings.auth
SECRET = auth.hs256_secret or ""
pool = RawPool(os.environ["NICO_DATABASE_URL"], int(os.environ.get("NICO_DB_POOL_SIZE", "16")))
tokens: dict[str, tuple[dict[str, Any], float]] = {}  # token -> (claims, expiry)


def claims_of(authorization: str | None) -> dict[str, Any] | None:
    if not authorization or not authorization.startswith("Bearer "):
        return None
    token = authorization[7:]
    cached = tokens.get(token)
    if cached is not None and cached[1] > time.time():
        return cached[0]
    try:
        claims = jwt.decode(token, SECRET, algorithms=["HS256"], audience=auth.audience, issuer=auth.issuer)
    except jwt.PyJWTError:
        return None
    if len(tokens) > 4096:
        tokens.clear()
    tokens[token] = (claims, float(claims["exp"]))
    return claims


@asynccontextmanager
async def lifespan(_: FastAPI) -> AsyncIterator[None]:
    # As nico's app does at start: what is loaded lives as long as the process, out of the collector's
    # way (the baseline must not lose to nico on garbage collection).
    gc.collect()
    gc.freeze()
    yield
    await pool.close()


app = FastAPI(lifespan=lifespan)


@app.get("/v2/org/{org}/nico/instance/{instance_id}")
async def get_instance(org: str, instance_id: str, request: Request) -> Response:
    claims = claims_of(request.headers.get("authorization"))
    if claims is None:
        return Response(status_code=401)
    if claims.get(auth.org_claim) != org or "TENANT_ADMIN" not in claims.get(auth.roles_claim, ()):
        return Response(status_code=403)
    async with pool.connection() as conn:
        found = await instance_document(
            conn,
            org,
            uuid.UUID(instance_id),
            20,
            deprecated_partition_key=settings.api.emit_deprecated_partition_key,
        )
    if found.caller_tenant_id is None or found.tenant_id != found.caller_tenant_id:
        return Response(status_code=404)
    return Response(found.document, media_type="application/json")

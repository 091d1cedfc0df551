"""Process health, readiness (database reachable and schema at head) and Prometheus metrics."""

from __future__ import annotations

import logging

from fastapi import APIRouter
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from sqlalchemy import text
from starlette.responses import JSONResponse, Response

from nico.api.deps import CtxDep
from nico.api.errors import error_response
from nico.db.migrate import schema_problem

log = logging.getLogger(__name__)
router = APIRouter(tags=["health"])


@router.get("/healthz", summary="The process is up")
async def healthz() -> JSONResponse:
    return JSONResponse({"status": "ok"})


@router.get("/readyz", summary="Database reachable and schema at head")
async def readyz(ctx: CtxDep) -> Response:
    try:
        async with ctx.engine.connect() as conn:
            await conn.execute(text("SELECT 1"))
            problem = await schema_problem(conn)
    except Exception as exc:
        # The exception text names sockets, hosts and users: it goes to the log, not to the caller.
        log.warning("not ready, database unreachable: %s: %s", type(exc).__name__, str(exc).strip())
        problem = "database unreachable"
    if problem:
        return error_response(ctx.settings.api.name, 503, problem)
    return JSONResponse({"status": "ready"})


@router.get("/metrics", summary="Prometheus metrics")
async def metrics(ctx: CtxDep) -> Response:
    return Response(generate_latest(ctx.registry), media_type=CONTENT_TYPE_LATEST)

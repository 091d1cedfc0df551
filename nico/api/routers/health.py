"""Process health, readiness (database reachable and schema at head) and Prometheus metrics."""

from __future__ import annotations

from fastapi import APIRouter
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.responses import JSONResponse, Response

from nico.api.deps import CtxDep
from nico.api.errors import error_response

router = APIRouter(tags=["health"])


@router.get("/healthz", summary="The process is up")
async def healthz() -> JSONResponse:
    return JSONResponse({"status": "ok"})


@router.get("/readyz", summary="Database reachable and schema at head")
async def readyz(ctx: CtxDep) -> Response:
    problem = await ctx.readiness_problem()
    if problem:
        return error_response(ctx.settings.api.name, 503, problem)
    return JSONResponse({"status": "ready"})


@router.get(
    "/metrics",
    summary="Prometheus metrics",
    response_class=Response,
    responses={200: {"content": {CONTENT_TYPE_LATEST.split(";")[0]: {"schema": {"type": "string"}}}}},
)
async def metrics(ctx: CtxDep) -> Response:
    return Response(generate_latest(ctx.registry), media_type=CONTENT_TYPE_LATEST)

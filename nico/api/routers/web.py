"""The topology page: ``/`` and its static files from :mod:`nico.web` (no build step). The page reads
the tenant API, so ``index.html`` is given the API's path prefix when served."""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter
from starlette.responses import FileResponse, HTMLResponse, Response

from nico.api.deps import CtxDep
from nico.api.errors import error_response

router = APIRouter(include_in_schema=False)
STATIC = Path(__file__).resolve().parents[2] / "web" / "static"
ASSETS = {"app.js": "text/javascript", "style.css": "text/css"}
NO_CACHE = {"Cache-Control": "no-cache"}


@router.get("/")
async def index(ctx: CtxDep) -> Response:
    api = ctx.settings.api
    page = (STATIC / "index.html").read_text(encoding="utf-8")
    prefix = f"/{api.route_version}/org/{{org}}/{api.name}"
    return HTMLResponse(page.replace("{{API_PREFIX}}", prefix), headers=NO_CACHE)


@router.get("/static/{name}")
async def asset(name: str, ctx: CtxDep) -> Response:
    if name not in ASSETS:
        return error_response(ctx.settings.api.name, 404, "Not Found")
    return FileResponse(STATIC / name, media_type=ASSETS[name], headers=NO_CACHE)

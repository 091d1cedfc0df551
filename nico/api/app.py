"""The app factory: routers, error envelope, the front (request checks, hot routes), lifespan of background
work."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
from collections.abc import AsyncIterator, Callable, Coroutine, Sequence
from importlib.resources import files
from typing import Any

from fastapi import FastAPI, Request
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.staticfiles import StaticFiles
from prometheus_client import CollectorRegistry
from starlette.responses import HTMLResponse

import nico
from nico.api.auth import TokenVerifier
from nico.api.context import AppContext
from nico.api.errors import error_response, install_error_handlers
from nico.api.front import Front
from nico.api.openapi import build_openapi
from nico.api.routers import health, hot_routes, tenant_routers, web
from nico.api.schemas.nvlink_interface import WireKeys
from nico.config import Settings
from nico.db.engine import make_engine, make_session_factory, resolve_database_url

log = logging.getLogger(__name__)

Background = Callable[[AppContext], Coroutine[Any, Any, None]]


def _report_crash(task: asyncio.Task[None]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.error(
            "background task %s stopped: %r", task.get_name(), task.exception(), exc_info=task.exception()
        )


def install_docs(app: FastAPI) -> None:
    """Swagger UI at ``/docs`` with its script and style from the ``fastapi-offline`` package."""
    assets = "/docs/assets"
    app.mount(assets, StaticFiles(directory=str(files("fastapi_offline") / "static")), name="docs-assets")

    @app.get("/docs", include_in_schema=False)
    async def swagger_ui(request: Request) -> HTMLResponse:
        root = request.scope.get("root_path", "")
        return get_swagger_ui_html(
            openapi_url=f"{root}{app.openapi_url}",
            title=f"{app.title} - Swagger UI",
            swagger_js_url=f"{root}{assets}/swagger-ui-bundle.js",
            swagger_css_url=f"{root}{assets}/swagger-ui.css",
            swagger_favicon_url=f"{root}{assets}/favicon.png",
        )


def build_context(settings: Settings, database_url: str | None = None) -> AppContext:
    url = database_url or resolve_database_url(settings)
    engine = make_engine(url, pool_size=settings.db_pool_size)
    return AppContext(
        settings=settings,
        engine=engine,
        sessions=make_session_factory(engine),
        verifier=TokenVerifier(settings),
        registry=CollectorRegistry(),
    )


def create_app(
    settings: Settings,
    *,
    context: AppContext | None = None,
    background: Sequence[Background] = (),
    owns_context: bool | None = None,
) -> FastAPI:
    """Build the API. ``context`` is built from ``settings`` when not given, and then owned (disposed
    with the app), as is a given one with ``owns_context``; ``background`` coroutines run for the
    app's lifetime (the reconciler, for example)."""
    owns_context = context is None if owns_context is None else owns_context
    ctx = context or build_context(settings)
    source = settings.api.name
    app = FastAPI(
        title="nico",
        version=nico.__version__,
        description=describe(settings),
        lifespan=lifespan(ctx, background, owns_context),
        docs_url=None,  # served by install_docs from packaged assets: no CDN, works offline
        redoc_url=None,
        openapi_url="/openapi.json",
    )
    app.state.ctx = ctx
    WireKeys.emit_deprecated_partition_key = settings.api.emit_deprecated_partition_key
    install_error_handlers(app, source)
    app.add_middleware(
        Front,
        source=source,
        limit=settings.api.max_body_bytes,
        bulk_limit=settings.api.max_registration_body_bytes,
        hot=hot_routes(tenant_prefix(settings)),
        handlers=app.exception_handlers,
    )
    install_docs(app)
    include_routers(app, settings)
    app.openapi = lambda: build_openapi(app)  # type: ignore[method-assign]
    return app


def describe(settings: Settings) -> str:
    """The OpenAPI document's description of the API."""
    return (
        "Control plane for NVLink partitions on rack-scale GPU systems. The tenant API under "
        f"`/{settings.api.route_version}/org/{{org}}/{settings.api.name}` is wire-compatible with NVIDIA "
        "Infra Controller (NICo). Bodies are read like Go's `encoding/json`: keys match case-insensitively, "
        "unknown keys are ignored, and a field declared `integer` takes a JSON integer (`2`, not `2.0`)."
    )


def lifespan(
    ctx: AppContext, background: Sequence[Background], owns_context: bool
) -> Callable[[FastAPI], contextlib.AbstractAsyncContextManager[None]]:
    """Runs ``background`` for the app's lifetime; disposes of ``ctx`` at the end when the app owns it."""

    @contextlib.asynccontextmanager
    async def running(_: FastAPI) -> AsyncIterator[None]:
        tasks = [
            asyncio.create_task(job(ctx), name=getattr(job, "__name__", "background")) for job in background
        ]
        for task in tasks:
            task.add_done_callback(_report_crash)
        # Everything built so far (modules, app, metadata) lives as long as the process: moving it out
        # of the collector's generations spares every later full collection from scanning it (a
        # measurable share of the CPU of a request that allocates a lot, such as a batch create).
        gc.collect()
        gc.freeze()
        try:
            yield
        finally:
            for task in tasks:
                task.cancel()
            for task in tasks:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
            if owns_context:
                await ctx.close()

    return running


def tenant_prefix(settings: Settings) -> str:
    """Where the tenant routers are mounted: ``/{version}/org/{org}/{name}``."""
    return f"/{settings.api.route_version}/org/{{org}}/{settings.api.name}"


def include_routers(app: FastAPI, settings: Settings) -> None:
    """Health and the web page at the root; every tenant router (``routers.TENANT_ROUTER_MODULES``, in
    that order) under :func:`tenant_prefix` (their hottest routes are the front's, too)."""
    source = settings.api.name
    app.include_router(health.router)
    app.include_router(web.router)
    prefix = tenant_prefix(settings)
    app.state.tenant_prefix = prefix
    for router in tenant_routers():
        app.include_router(router, prefix=prefix)

    @app.api_route(
        f"/{settings.api.route_version}/org//{{rest:path}}",
        methods=["GET", "POST", "PATCH", "PUT", "DELETE"],
        include_in_schema=False,
    )
    async def missing_org(rest: str) -> Any:
        return error_response(source, 400, "Organization name is required in request path")

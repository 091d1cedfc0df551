"""The root ``nico`` app: the server, the reconciler, the schema and tokens, with every other group
(``admin``, ``demo``, ``sim``) and command (``export``, ``wait-ready``) joined to it."""

from __future__ import annotations

import asyncio
import contextlib
import sys
from typing import Annotated

import typer

from nico.cli.admin import app as admin_app
from nico.cli.bootstrap import database_url_or_exit, migrate_or_exit, settings_or_exit, setup_logging
from nico.cli.demo import app as demo_app
from nico.cli.export import export
from nico.cli.label_sync import label_sync
from nico.cli.options import org_option
from nico.cli.output import console, fail
from nico.cli.sim import app as sim_app
from nico.cli.tenant import wait_ready
from nico.config import ConfigError

app = typer.Typer(
    name="nico",
    help="nico: a control plane for NVLink partitions on rack-scale GPU systems.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)


def _print_version(asked: bool) -> None:
    if asked:
        import nico

        print(f"nico {nico.__version__}")
        raise typer.Exit()


@app.callback()
def root(
    version: Annotated[
        bool,
        typer.Option("--version", callback=_print_version, is_eager=True, help="Print the version and exit."),
    ] = False,
) -> None:
    """nico: a control plane for NVLink partitions on rack-scale GPU systems."""


app.add_typer(sim_app, name="sim")
app.add_typer(demo_app, name="demo")
Verbose = Annotated[
    bool, typer.Option("--verbose", "-v", help="Log everything, the embedded PostgreSQL's lines too.")
]


@app.command()
def migrate(verbose: Verbose = False) -> None:
    """Upgrade the database schema to the latest revision (Alembic head)."""
    from nico.db import migrate as migrations

    settings = settings_or_exit()
    setup_logging(settings, verbose=verbose)
    url = database_url_or_exit(settings)
    migrate_or_exit(url)
    console.print(f"database schema at revision {migrations.head_revision()}")


@app.command()
def serve(
    host: Annotated[str | None, typer.Option(help="Address to listen on (default: api.host).")] = None,
    port: Annotated[int | None, typer.Option(help="Port to listen on (default: api.port).")] = None,
    no_reconciler: Annotated[
        bool, typer.Option("--no-reconciler", help="API only (for replicas beside `nico reconcile`).")
    ] = False,
    workers: Annotated[
        int, typer.Option(min=1, help="API worker processes (the reconciler stays one, in this process).")
    ] = 1,
    metrics_port: Annotated[
        int, typer.Option(help="With --workers > 1: the reconciler's /metrics port (0: none).")
    ] = 9101,
    verbose: Verbose = False,
) -> None:
    """Run the API and, unless told otherwise, the NVLink reconciler (migrating the database first)."""
    import uvicorn

    from nico.api.access_log import logging_config
    from nico.api.app import Background, build_context, create_app
    from nico.api.context import AppContext
    from nico.api.http_limits import limited_protocol
    from nico.db.engine import name_connections
    from nico.reconciler.runtime import run_reconciler
    from nico.serving import (
        collect_less,
        event_loop,
        hold_stop_signals,
        serve_until_stopped,
        stop_like_ctrl_c,
    )

    stop_like_ctrl_c()
    collect_less()
    settings = settings_or_exit()
    if host is not None:
        settings.api.host = host
    if port is not None:
        settings.api.port = port
    setup_logging(settings, verbose=verbose)
    name_connections("nico serve")
    url = database_url_or_exit(settings)
    migrate_or_exit(url)
    if workers > 1:
        from nico.serving import serve_workers

        reconciling = settings.nvlink_config.enabled and not no_reconciler
        with contextlib.suppress(KeyboardInterrupt):  # uvicorn raises the stop signal again once done
            serve_workers(settings, url, workers, reconciler=reconciling, metrics_port=metrics_port)
        return
    context = build_context(settings, url)
    background: list[Background] = []
    if settings.nvlink_config.enabled and not no_reconciler:

        async def reconciler(ctx: AppContext) -> None:
            await run_reconciler(ctx.settings, ctx.engine, ctx.registry)

        background.append(reconciler)
    api = create_app(settings, context=context, background=background, owns_context=True)
    config = uvicorn.Config(
        api,
        host=settings.api.host,
        port=settings.api.port,
        log_level=settings.log_level.lower(),
        log_config=logging_config(),
        http=limited_protocol(settings),
    )
    hold_stop_signals()  # a stop now waits for the loop's handlers (no half-built loop)
    # (KeyboardInterrupt: Ctrl-C before the event loop took it over.) The loop uvicorn runs for
    # --workers too.
    with contextlib.suppress(KeyboardInterrupt), asyncio.Runner(loop_factory=event_loop()) as runner:
        runner.run(serve_until_stopped(config))


@app.command()
def token(
    org: Annotated[str, org_option("Organisation the token is for.")],
    role: Annotated[
        list[str] | None,
        typer.Option(help="Role (repeatable): TENANT_ADMIN, PROVIDER_ADMIN, PROVIDER_VIEWER."),
    ] = None,
    subject: Annotated[str, typer.Option(help="Token subject (the user).")] = "dev-user",
    ttl: Annotated[int, typer.Option(help="Lifetime in seconds.")] = 7 * 24 * 3600,
) -> None:
    """Print a development token signed with this data directory's key (HS256)."""
    from nico.api.auth import DEV_SECRET_FILE, KNOWN_ROLES, issue_dev_token, normalize_role

    settings = settings_or_exit()
    key = settings.data_dir / DEV_SECRET_FILE
    new_key = not settings.auth.hs256_secret and not key.exists()
    roles = role or ["TENANT_ADMIN"]
    for name in roles:
        if normalize_role(name, settings.auth.legacy_role_prefixes) not in KNOWN_ROLES:
            console.print(
                f"[bold red]unknown role:[/] {name} (expected one of {', '.join(sorted(KNOWN_ROLES))})"
            )
            raise typer.Exit(2)
    try:
        value = issue_dev_token(settings, org=org, roles=roles, subject=subject, ttl_seconds=ttl)
    except ValueError as exc:
        console.print(f"[bold red]error:[/] {exc}")
        raise typer.Exit(2) from None
    if new_key:
        console.print(
            f"[yellow]created a new signing key[/] {key}: only a server on this data directory "
            "(NICO_DATA_DIR) accepts the token",
            highlight=False,
            soft_wrap=True,
        )
    print(value)


@app.command()
def openapi(
    output: Annotated[str, typer.Option(help="File to write, or - for standard output.")] = "openapi.yaml",
) -> None:
    """Write the API's OpenAPI document (YAML), as committed in openapi.yaml."""
    from nico.api.openapi_yaml import render_yaml

    text = render_yaml()
    if output == "-":
        sys.stdout.write(text)
    else:
        with open(output, "w", encoding="utf-8") as fh:
            fh.write(text)
        console.print(f"wrote {output}")


@app.command()
def reconcile(
    metrics_port: Annotated[int, typer.Option(help="Port for /metrics (0: no metrics server).")] = 9101,
    metrics_host: Annotated[str, typer.Option(help="Address for /metrics.")] = "127.0.0.1",
    verbose: Verbose = False,
) -> None:
    """Run the NVLink reconciler alone (run several to share the domains)."""
    from prometheus_client import CollectorRegistry, start_http_server

    from nico.db.engine import name_connections
    from nico.serving import (
        collect_less,
        event_loop,
        hold_stop_signals,
        reconcile_forever,
        run_until,
        stop_like_ctrl_c,
        stop_requested,
    )

    stop_like_ctrl_c()
    collect_less()
    settings = settings_or_exit()
    setup_logging(settings, verbose=verbose)
    name_connections("nico reconcile")
    url = database_url_or_exit(settings)
    migrate_or_exit(url)
    hold_stop_signals()  # from here on a stop waits for the loop's handlers (no half-built loop)
    registry = CollectorRegistry()
    if metrics_port:
        try:
            start_http_server(metrics_port, addr=metrics_host, registry=registry)
        except OSError as exc:
            raise fail(f"cannot listen on {metrics_host}:{metrics_port} ({exc.strerror})") from None
        console.print(f"metrics at http://{metrics_host}:{metrics_port}/metrics")

    async def until_stopped() -> None:
        # SIGTERM (Kubernetes stopping the pod) as well as Ctrl-C: passes in flight finish, exit 0.
        with stop_requested() as stop:
            await run_until(reconcile_forever(settings, url, registry), stop)

    try:
        with asyncio.Runner(loop_factory=event_loop()) as runner:  # the loop nico serve runs
            runner.run(until_stopped())
    except KeyboardInterrupt:
        pass
    except ConfigError as exc:
        raise fail(str(exc), 2, "configuration error") from None


app.add_typer(admin_app, name="admin")
app.command("wait-ready")(wait_ready)
app.command("export")(export)
app.command("label-sync")(label_sync)

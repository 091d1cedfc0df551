"""``nico demo``: the whole system on one laptop; ``nico demo seed``: the same provider data for a
site whose fabric managers run elsewhere (the docker-compose stack's simulators)."""

from __future__ import annotations

import asyncio
import time
from enum import StrEnum
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn

from nico.cli.options import org_option

if TYPE_CHECKING:
    from nico.config import Settings
    from nico.demo.seeding import SeededSite

app = typer.Typer(
    help="A simulated GB200 / GB300 site with the API and the reconciler: nico working in a minute.",
    invoke_without_command=True,
    add_completion=False,
)
out = Console()
err = Console(stderr=True)
RETRY_SECONDS = 0.5


class FabricKind(StrEnum):
    nmxc = "nmxc"
    nmxm = "nmxm"


class ShapeKind(StrEnum):
    nvl72 = "nvl72"
    nvl36x2 = "nvl36x2"
    minipod = "minipod"


class GpuKind(StrEnum):
    gb200 = "gb200"
    gb300 = "gb300"


@app.callback()
def demo(
    ctx: typer.Context,
    racks: Annotated[
        int,
        typer.Option(
            min=1, max=64, help="Simulated racks of the shape (NVL72 racks, NVL36x2 pairs, minipods)."
        ),
    ] = 4,
    shape: Annotated[
        ShapeKind,
        typer.Option(
            help="Rack shape: nvl72 (one domain per rack), nvl36x2 (one domain over two racks) or minipod "
            "(several NMX-C domains behind one rack, one endpoint each)."
        ),
    ] = ShapeKind.nvl72,
    gpu: Annotated[
        GpuKind, typer.Option(help="Tray generation the fabric reports: gb200 or gb300.")
    ] = GpuKind.gb200,
    port: Annotated[
        int, typer.Option(min=1, max=65535, help="Port of the API and the topology page.")
    ] = 8080,
    backend: Annotated[
        FabricKind, typer.Option(help="Fabric manager to simulate: nmxc (per rack, gRPC) or nmxm (REST).")
    ] = FabricKind.nmxc,
    org: Annotated[str, org_option("Tenant org that gets the site's free machines.")] = "demo",
    verbose: Annotated[
        bool, typer.Option("--verbose", "-v", help="Log everything, the embedded PostgreSQL's lines too.")
    ] = False,
) -> None:
    """Embedded PostgreSQL, simulated NMX-C or NMX-M on loopback, provider data seeded, the API and
    the reconciler; prints the URL, a tenant token and what to try next. Ctrl-C stops it; the next
    run reuses the state (data directory: NICO_DATA_DIR)."""
    if ctx.invoked_subcommand is not None:
        return
    from nico.cli.bootstrap import settings_or_exit, setup_logging
    from nico.db.oneshot import DatabaseError, one_line
    from nico.demo.runner import DemoError, DemoOptions, run_demo
    from nico.fabric.backend import FabricError
    from nico.services.errors import ServiceError

    settings = settings_or_exit()
    if "log_level" not in settings.model_fields_set:
        settings.log_level = "WARNING"  # the progress lines and the banner, not every request
    setup_logging(settings, verbose=verbose)
    options = DemoOptions(
        racks=racks,
        port=port,
        backend="nmxm" if backend is FabricKind.nmxm else "nmxc",
        org=org,
        shape=shape.value,
        gpu=gpu.value,
    )
    try:
        asyncio.run(run_demo(settings, options, out, err))
    except (DemoError, ServiceError, FabricError) as exc:
        err.print(f"[bold red]demo:[/] {getattr(exc, 'message', exc)}", highlight=False, soft_wrap=True)
        raise typer.Exit(1) from None
    except (OSError, DatabaseError) as exc:  # the database went away, the disk is full, ...
        err.print(f"[bold red]demo:[/] {one_line(exc)}", highlight=False, soft_wrap=True)
        raise typer.Exit(1) from None


@app.command()
def seed(
    org: Annotated[str, org_option("Tenant org that gets the site's free machines.")] = "demo",
    nmxc_endpoint: Annotated[
        list[str] | None,
        typer.Option(help="NMX-C endpoint URL to discover (repeat for each; with backend nmxc)."),
    ] = None,
    wait: Annotated[
        float, typer.Option(min=0.0, help="Seconds to keep retrying while the fabric managers start.")
    ] = 60.0,
) -> None:
    """Seed the demo's provider data from running fabric managers: the site, the instance type, the
    machines each NMX-C endpoint (or NMX-M, per nvlink_config) reports, the endpoint rows and the
    tenant org's allocation. Idempotent."""
    from nico.cli.bootstrap import database_url_or_exit, migrate_or_exit, settings_or_exit, setup_logging

    settings = settings_or_exit()
    setup_logging(settings)
    endpoints = sorted(set(nmxc_endpoint or []))
    if settings.nvlink_config.backend == "nmxc" and not endpoints:
        err.print("[bold red]error:[/] backend nmxc: give the simulators with --nmxc-endpoint URL")
        raise typer.Exit(2)
    from nico.config import ConfigError
    from nico.fabric.backend import FabricError
    from nico.services.errors import ServiceError

    url = database_url_or_exit(settings)
    migrate_or_exit(url)  # as serve and reconcile do: a no-op after `nico migrate`
    try:
        seeded = asyncio.run(_seed(settings, url, org, endpoints, wait))
    except (ServiceError, FabricError, ConfigError) as exc:
        err.print(f"[bold red]seed failed:[/] {getattr(exc, 'message', exc)}", highlight=False)
        raise typer.Exit(1) from None
    out.print(
        f"seeded site {seeded.site_id}: {seeded.domains} NVLink domains, {seeded.machines} machines "
        f"({len(seeded.registration.created)} new), instance type {seeded.instance_type_id}, "
        f"{seeded.reserved} machines for tenant org {org}",
        soft_wrap=True,
        highlight=False,
    )


async def _seed(settings: Settings, url: str, org: str, endpoints: list[str], wait: float) -> SeededSite:
    """Discover (retrying while the fabric managers start), then seed in one transaction."""
    from nico.db.engine import make_engine, make_session_factory, transaction
    from nico.demo import seeding
    from nico.fabric.backend import FabricError
    from nico.reconciler.runtime import open_backend

    engine = make_engine(url, pool_size=2)
    try:
        backend = await open_backend(settings, engine)
        try:
            deadline = time.monotonic() + wait
            with Progress(
                SpinnerColumn(),
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                console=err,
            ) as progress:
                task = progress.add_task("asking the fabric managers for machines", total=len(endpoints) or 1)
                while True:
                    progress.reset(task)
                    try:
                        discovery = await seeding.discover(
                            backend, endpoints, discovered=lambda _where, _n: progress.advance(task)
                        )
                        break
                    except FabricError as exc:
                        if time.monotonic() >= deadline:
                            raise
                        progress.update(task, description=f"waiting for the fabric: {exc.message[:60]}")
                        await asyncio.sleep(RETRY_SECONDS)
                progress.update(task, description=f"registering {len(discovery.machines)} machines")
                async with transaction(make_session_factory(engine)) as session:
                    return await seeding.seed(session, tenant_org=org, discovery=discovery)
        finally:
            await backend.close()
    finally:
        await engine.dispose()

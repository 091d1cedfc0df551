"""Start-up and shutdown of ``nico demo``: embedded PostgreSQL, simulated fabric managers on loopback,
the provider data, then the API and the reconciler in this process, until Ctrl-C or SIGTERM.

Start-up shows its steps with rich. Shutdown runs in reverse: the API and the reconciler stop, the
simulators stop and the fabric is saved to ``<data_dir>/demo-fabric-<backend>.json``, the database
connections close (the embedded PostgreSQL stops as the process exits). The next run loads that
file, so it finds the fabric as it left it, with the database it left beside it.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import logging
import os
import shlex
import socket
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import uvicorn
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)

from nico.api.app import Background, build_context, create_app
from nico.api.auth import issue_dev_token
from nico.api.context import AppContext
from nico.api.http_limits import limited_protocol
from nico.config import Settings
from nico.db import migrate as migrations
from nico.db.engine import make_session_factory, resolve_database_url, transaction
from nico.db.oneshot import one_line
from nico.demo import seeding
from nico.fabric.backend import FabricBackend
from nico.reconciler.runtime import open_backend, run_reconciler
from nico.services import fabric_registry
from nico.serving import EmbeddedServer, stop_requested
from nico.sim.fabric import SimFabric
from nico.sim.nmxc_server import NmxcSimulator
from nico.sim.nmxm_app import NmxmSimulator

log = logging.getLogger(__name__)

Backend = Literal["nmxc", "nmxm"]
Shape = Literal["nvl72", "nvl36x2", "minipod"]
GpuModel = Literal["gb200", "gb300"]
# What one unit of --racks is, per shape (the banner's words).
SHAPE_UNITS = {"nvl72": "NVL72 racks", "nvl36x2": "NVL36x2 pairs", "minipod": "minipod racks"}
FABRIC_SEED = 72  # same seed on every run: same domain uuids, chassis serials and GPU GUIDs
NMXM_USER = "admin"
NMXM_PASSWORD = "admin"  # the simulator's; loopback only
STARTED_POLL = 0.01


class DemoError(Exception):
    """Start-up cannot go on; the message tells the user what to do."""


@dataclass(frozen=True)
class DemoOptions:
    racks: int = 4  # units of the shape: NVL72 racks, NVL36x2 pairs or minipod racks
    port: int = 8080
    backend: Backend = "nmxc"
    org: str = "demo"
    host: str = "127.0.0.1"
    shape: Shape = "nvl72"
    gpu: GpuModel = "gb200"


def snapshot_path(settings: Settings, backend: Backend) -> Path:
    return settings.data_dir / f"demo-fabric-{backend}.json"


def demo_fabric(racks: int, shape: Shape = "nvl72", gpu: GpuModel = "gb200") -> SimFabric:
    """A fresh demo site: ``racks`` units of ``shape`` with ``gpu`` trays."""
    return SimFabric(
        racks if shape == "nvl72" else 0,
        nvl36x2=racks if shape == "nvl36x2" else 0,
        minipods=racks if shape == "minipod" else 0,
        gpu=gpu,
        seed=FABRIC_SEED,
    )


def load_fabric(
    path: Path, racks: int, console: Console, *, shape: Shape = "nvl72", gpu: GpuModel = "gb200"
) -> SimFabric:
    """The fabric as the last clean shutdown left it (grown when more racks are asked for), or a
    fresh one. Fewer racks than recorded, or another shape or tray generation, is refused: the
    database holds the machines of the recorded ones."""
    fabric = demo_fabric(racks, shape, gpu)
    if not path.exists():
        return fabric
    try:
        recorded = SimFabric.from_json(path.read_text())
    except (OSError, ValueError) as exc:
        console.print(f"[yellow]ignoring {path}:[/] {exc}; the reconciler rebuilds the partitions")
        return fabric
    if recorded.seed != FABRIC_SEED or recorded.shape == "mixed":
        console.print(f"[yellow]ignoring {path}:[/] not a demo fabric")
        return fabric
    if (recorded.shape, recorded.gpu_model) != (shape, gpu):
        raise DemoError(
            f"the demo in {path.parent} has {recorded.shape} {recorded.gpu_model} trays: run with --shape "
            f"{recorded.shape} --gpu {recorded.gpu_model}, or start over with another data directory "
            "(NICO_DATA_DIR)"
        )
    units = {"nvl72": recorded.racks, "nvl36x2": recorded.nvl36x2, "minipod": recorded.minipods}[shape]
    if units > racks:
        raise DemoError(
            f"the demo in {path.parent} has {units} {SHAPE_UNITS[shape]}: run with --racks {units} "
            "or more, or start over with another data directory (NICO_DATA_DIR)"
        )
    fabric.restore(path.read_text())
    return fabric


def save_fabric(path: Path, fabric: SimFabric) -> None:
    """Write the snapshot whole or not at all (a crash mid-write must not leave half a file)."""
    partial = path.with_suffix(".json.partial")
    partial.write_text(fabric.to_json())
    os.replace(partial, path)


LOCK_FILE = "demo.lock"


@contextlib.contextmanager
def hold_data_dir(data_dir: Path) -> Iterator[None]:
    """This demo's claim on its data directory: a second ``nico demo`` on it is refused, naming the
    process that holds it (the lock goes with the process, however it ends)."""
    data_dir.mkdir(parents=True, exist_ok=True)
    path = data_dir / LOCK_FILE
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 200, 0).decode(errors="replace").strip() or "another process"
            raise DemoError(
                f"data directory {data_dir} is in use by {holder}: stop it, or give this demo another "
                "data directory (NICO_DATA_DIR=/some/dir nico demo)"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"nico demo (pid {os.getpid()})\n".encode(), 0)
        yield
    finally:
        os.close(fd)


def bind(host: str, port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise DemoError(f"cannot listen on {host}:{port} ({exc.strerror}); pass another --port") from None
    return sock


class Steps:
    """Start-up steps as rich progress lines (stderr); a step with a total shows a bar."""

    def __init__(self, console: Console) -> None:
        self.progress = Progress(
            SpinnerColumn(finished_text="[green]✓[/]"),
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=console,
            transient=False,
        )

    @contextlib.contextmanager
    def step(self, description: str, total: int = 1) -> Iterator[TaskID]:
        task = self.progress.add_task(description, total=total)
        yield task
        self.progress.update(task, completed=total)
        self.progress.stop_task(task)


@dataclass
class RunningDemo:
    settings: Settings
    options: DemoOptions
    seeded: seeding.SeededSite
    server: EmbeddedServer
    serving: asyncio.Task[None]

    @property
    def url(self) -> str:
        return f"http://{self.options.host}:{self.options.port}"


async def start(
    settings: Settings, options: DemoOptions, stack: contextlib.AsyncExitStack, steps: Steps
) -> RunningDemo:
    """Start everything, registering each part's shutdown on ``stack`` as soon as it runs."""
    stack.enter_context(hold_data_dir(settings.data_dir))
    sock = bind(options.host, options.port)
    stack.callback(sock.close)
    with steps.step("PostgreSQL" + ("" if settings.database_url else " (embedded)")):
        try:
            url = await asyncio.to_thread(resolve_database_url, settings)
        except Exception as exc:
            raise DemoError(f"cannot start PostgreSQL: {one_line(exc)}") from None
    with steps.step("database schema at the latest revision"):
        await asyncio.to_thread(migrations.upgrade, url)
    path = snapshot_path(settings, options.backend)
    fabric = load_fabric(path, options.racks, steps.progress.console, shape=options.shape, gpu=options.gpu)
    nmxc: NmxcSimulator | None = None
    kind = "NMX-C" if options.backend == "nmxc" else "NMX-M"
    units = f"{options.racks} {SHAPE_UNITS[options.shape]} of {options.gpu.upper()} trays"
    with steps.step(f"{kind} simulator: {units} on loopback"):
        if options.backend == "nmxc":
            nmxc = await NmxcSimulator(fabric).start()
            simulator: NmxcSimulator | NmxmSimulator = nmxc
            # Every domain's endpoint is found by its Hello (a minipod rack has one per domain); the
            # per-chassis rows seeded below are the fallback.
            config = settings.nvlink_config.model_copy(
                update={"nmxc_endpoints": sorted(nmxc.domain_endpoints.values())}
            )
            settings = settings.model_copy(update={"nvlink_config": config})
        else:
            nmxm = await NmxmSimulator(fabric, username=NMXM_USER, password=NMXM_PASSWORD).start()
            simulator = nmxm
            config = settings.nvlink_config.model_copy(update={"backend": "nmxm", "nmx_m_endpoint": nmxm.url})
            settings = settings.model_copy(update={"nvlink_config": config})

    async def stop_simulator() -> None:
        await simulator.stop()
        save_fabric(path, fabric)

    stack.push_async_callback(stop_simulator)
    context = build_context(settings, url)
    stack.push_async_callback(context.close)
    sessions = make_session_factory(context.engine)
    if options.backend == "nmxm":
        async with transaction(sessions) as session:
            await fabric_registry.set_nmxm_credentials(session, NMXM_USER, NMXM_PASSWORD)
    endpoints = sorted(nmxc.domain_endpoints.values()) if nmxc is not None else []
    backend: FabricBackend = await open_backend(settings, context.engine)
    try:
        with steps.step("fabric managers asked for their machines", total=len(endpoints) or 1) as task:
            discovery = await seeding.discover(
                backend, endpoints, discovered=lambda _where, _count: steps.progress.advance(task)
            )
    finally:
        await backend.close()
    with steps.step(f"provider data: site, instance type, {len(discovery.machines)} machines, allocation"):
        async with transaction(sessions) as session:
            seeded = await seeding.seed(session, tenant_org=options.org, discovery=discovery)
    with steps.step(f"API and reconciler on {options.host}:{options.port}"):
        server, serving = await serve(settings, context, sock)
        stack.push_async_callback(stop_serving, server, serving)
    return RunningDemo(settings, options, seeded, server, serving)


async def serve(
    settings: Settings, context: AppContext, sock: socket.socket
) -> tuple[EmbeddedServer, asyncio.Task[None]]:
    """uvicorn in this event loop with the reconciler beside the API, as ``nico serve`` runs them."""

    async def reconciler(ctx: AppContext) -> None:
        await run_reconciler(ctx.settings, ctx.engine, ctx.registry)

    background: list[Background] = [reconciler] if settings.nvlink_config.enabled else []
    api = create_app(settings, context=context, background=background)
    server = EmbeddedServer(
        uvicorn.Config(
            api,
            log_level="warning",
            access_log=False,
            timeout_graceful_shutdown=5,
            http=limited_protocol(settings),
        )
    )
    serving = asyncio.create_task(server.serve(sockets=[sock]), name="demo-api")
    while not server.started:
        if serving.done():
            serving.result()
            raise DemoError("the API stopped while starting")
        await asyncio.sleep(STARTED_POLL)
    return server, serving


async def stop_serving(server: EmbeddedServer, serving: asyncio.Task[None]) -> None:
    server.should_exit = True
    with contextlib.suppress(asyncio.CancelledError):
        await serving


def nico_command() -> str:
    """``nico`` as this process was started (its absolute path: a fresh shell may not have it on PATH)."""
    started = started_as()
    return shlex.quote(str(started)) if started is not None else "nico"


def started_as() -> Path | None:
    """The ``nico`` executable this process was started as (absolute), or None (``python -m``, say)."""
    started = Path(sys.argv[0])
    return started.absolute() if started.name == "nico" and started.exists() else None


def path_line() -> list[str]:
    """``export PATH=...`` putting the directory of the ``nico`` that runs the demo first, so the
    walkthrough's ``nico`` commands work in a shell without the virtualenv; none when not started so."""
    started = started_as()
    if started is None:
        return []
    return [f'  export PATH={shlex.quote(str(started.parent))}:"$PATH"']


def shape_line(options: DemoOptions, domains: int) -> str:
    """The banner's words for the site: "4 NVL72 racks", "2 NVL36x2 pairs (2 NVLink domains)",
    "1 minipod racks (2 NVLink domains)"."""
    if options.shape == "nvl72":
        return f"{domains} NVL72 racks"
    return f"{options.racks} {SHAPE_UNITS[options.shape]} ({domains} NVLink domains)"


def banner(demo: RunningDemo, out: Console) -> None:
    """The URL, the topology page, a tenant token and the next commands (stdout, never wrapped)."""
    org = demo.options.org
    try:
        token: str | None = issue_dev_token(demo.settings, org=org, roles=["TENANT_ADMIN"])
    except ValueError:
        token = None  # auth is not HS256: tokens come from the identity provider
    seeded = demo.seeded
    lines = [
        "",
        f"[bold green]nico demo is running[/]: {shape_line(demo.options, seeded.domains)}, "
        f"{seeded.machines} machines ({demo.options.gpu.upper()} trays), "
        f"tenant org [bold]{org}[/] may use {seeded.reserved}",
        f"  API        {demo.url}   (Swagger UI {demo.url}/docs, metrics {demo.url}/metrics)",
    ]
    if token:
        lines += [
            f"  topology   {demo.url}/#org={org}&token={token}",
            f"  token      {token}",
        ]
    lines += [
        "",
        "[bold]Next[/], in another terminal (README.md has the whole walkthrough):",
        f"  export NICO_DATA_DIR={shlex.quote(str(demo.settings.data_dir))} NICO_URL={demo.url} "
        f"NICO_ORG={shlex.quote(org)}",
    ]
    if token:
        lines.append(f"  export NICO_TOKEN={token}")
    lines += path_line()
    lines += [
        f'  curl -s -H "Authorization: Bearer $NICO_TOKEN" $NICO_URL/v2/org/{org}/nico/site',
        f"  {nico_command()} wait-ready --org {shlex.quote(org)}",
        "",
        "Ctrl-C stops the demo; the next run picks up where this one left off.",
    ]
    out.print("\n".join(lines), soft_wrap=True, highlight=False)


async def run_demo(settings: Settings, options: DemoOptions, out: Console, err: Console) -> None:
    """Run the demo until Ctrl-C or SIGTERM (also during start-up), then stop everything."""
    with stop_requested() as stop:
        stopping = asyncio.create_task(stop.wait())
        try:
            async with contextlib.AsyncExitStack() as stack:
                steps = Steps(err)
                with steps.progress:
                    starting = asyncio.create_task(start(settings, options, stack, steps))
                    await asyncio.wait({starting, stopping}, return_when=asyncio.FIRST_COMPLETED)
                if not starting.done():
                    starting.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await starting
                    err.print("stopping: interrupted during start-up")
                    return
                demo = starting.result()
                banner(demo, out)
                await asyncio.wait({demo.serving, stopping}, return_when=asyncio.FIRST_COMPLETED)
                if not stopping.done():
                    demo.serving.result()
                    raise DemoError("the API stopped unexpectedly")
                err.print("stopping: API, reconciler, simulators (saving the fabric), database connections")
        finally:
            stopping.cancel()
    err.print(f"stopped; the state is kept in {settings.data_dir}")

"""``nico sim nmxc|nmxm``: run one simulated fabric manager alone until Ctrl-C.

The simulators (grpc, FastAPI, uvicorn) are imported when a command runs, so that registering this
group does not slow down every other ``nico`` command.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Coroutine
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console

if TYPE_CHECKING:
    from nico.sim.control import Endpoints
    from nico.sim.fabric import SimFabric

app = typer.Typer(
    help="Simulated NVLink fabric managers over an in-memory site of GB200 or GB300 racks.",
    no_args_is_help=True,
)
err = Console(stderr=True)

Racks = Annotated[int, typer.Option(min=0, help="NVL72 racks (one domain and chassis serial each).")]
Nvl36x2 = Annotated[int, typer.Option(min=0, help="NVL36x2 pairs (one domain, two chassis serials).")]
Minipods = Annotated[
    int, typer.Option(min=0, help="Minipod racks (one chassis serial, several domains, one endpoint each).")
]
MinipodDomains = Annotated[
    int, typer.Option(min=2, max=18, help="NMX-C domains per minipod rack (divides its 18 trays).")
]
Gpu = Annotated[str, typer.Option(help="Tray generation the GPUs report: gb200 or gb300.")]
Seed = Annotated[int, typer.Option(help="Seed of the uuids, serials and GUIDs (same seed, same site).")]
MaxPartitions = Annotated[
    int | None,
    typer.Option(
        min=1,
        max=32765,
        help="Partitions a domain may hold, the default one included (unset: the simulator's cap).",
    ),
]
Latency = Annotated[float, typer.Option(min=0.0, help="Seconds added to every answer.")]
ControlPort = Annotated[
    int | None,
    typer.Option(
        min=0,
        max=65535,
        help="Serve the control API (faults, tray swaps; docs/runbook.md) on 127.0.0.1 at this port.",
    ),
]
Host = Annotated[str, typer.Option(help="Address to listen on (0.0.0.0 in a container reached by others).")]
ErrorRate = Annotated[
    float, typer.Option(min=0.0, max=1.0, help="Fraction of calls answered with NMX_ST_NOT_READY.")
]
GpuHealth = Annotated[
    list[str] | None,
    typer.Option(help="GUID=STATE: start with that GPU's health (NO_NVLINK, DEGRADED, ...); repeatable."),
]
NodeHealth = Annotated[
    list[str] | None,
    typer.Option(help="SERIAL:TRAY=STATE: a compute tray's health (DEGRADED, UNHEALTHY); repeatable."),
]
SwitchHealth = Annotated[
    list[str] | None,
    typer.Option(
        help="SERIAL:TRAY=STATE: a switch tray's (0..8) health (MISSING_NVLINK, UNHEALTHY); repeatable."
    ),
]


def _apply_health(fabric: SimFabric, gpus: list[str], nodes: list[str], switches: list[str]) -> None:
    """Set the health knobs given on the command line; a malformed one is a usage error."""
    try:
        for item in gpus:
            uid, state = item.split("=", 1)
            fabric.set_gpu_health(int(uid, 0), state.strip().upper())
        for item, setter in [(n, fabric.set_node_health) for n in nodes] + [
            (n, fabric.set_switch_node_health) for n in switches
        ]:
            where, state = item.split("=", 1)
            serial, tray = where.rsplit(":", 1)
            setter(serial, serial, int(tray), state.strip().upper())
    except (ValueError, KeyError) as exc:
        err.print(f"[bold red]error:[/] bad health setting: {exc}")
        raise typer.Exit(2) from None


def _site(
    racks: int,
    nvl36x2: int,
    seed: int,
    max_partitions: int | None,
    latency: float,
    error_rate: float,
    *,
    minipods: int = 0,
    minipod_domains: int = 2,
    gpu: str = "gb200",
) -> SimFabric:
    from nico.sim.fabric import DEFAULT_MAX_PARTITIONS, GPU_DESCRIPTIONS, NVL72_TRAYS, SimFabric

    if racks + nvl36x2 + minipods == 0:
        err.print("[bold red]error:[/] a site needs at least one rack (--racks, --nvl36x2 or --minipods)")
        raise typer.Exit(2)
    if gpu not in GPU_DESCRIPTIONS:
        err.print(f"[bold red]error:[/] --gpu must be one of {', '.join(sorted(GPU_DESCRIPTIONS))}")
        raise typer.Exit(2)
    if NVL72_TRAYS % minipod_domains:
        err.print(f"[bold red]error:[/] --minipod-domains must divide {NVL72_TRAYS}")
        raise typer.Exit(2)
    fabric = SimFabric(
        racks,
        nvl36x2=nvl36x2,
        minipods=minipods,
        minipod_domains=minipod_domains,
        gpu=gpu,
        seed=seed,
        max_partitions=max_partitions if max_partitions is not None else DEFAULT_MAX_PARTITIONS,
    )
    for domain in fabric.domains:
        fabric.set_faults(domain, latency=latency, error_rate=error_rate)
    fabric.set_site_faults(latency=latency, error_rate=error_rate)
    return fabric


@contextlib.asynccontextmanager
async def _control(fabric: SimFabric, endpoints: Endpoints, port: int | None) -> AsyncIterator[None]:
    """The control API on ``port`` while the simulator serves (nothing when ``port`` is None)."""
    from nico.sim.control import ControlServer

    if port is None:
        yield
        return
    async with ControlServer(fabric, endpoints, port) as control:
        print(f"control -> {control.url}/control", flush=True)
        yield


def _run_serving(serve: Callable[[], Coroutine[None, None, None]]) -> None:
    """Run a simulator until stopped; a port it cannot listen on is one line, exit 1."""
    try:
        asyncio.run(serve())
    except OSError as exc:
        err.print(f"[bold red]error:[/] {exc}")
        raise typer.Exit(1) from None


@app.command()
def nmxc(
    racks: Racks = 1,
    port: Annotated[
        int,
        typer.Option(min=0, max=65535, help="Port of the first domain, the next ones upward; 0: free ports."),
    ] = 9601,
    nvl36x2: Nvl36x2 = 0,
    minipods: Minipods = 0,
    minipod_domains: MinipodDomains = 2,
    gpu: Gpu = "gb200",
    seed: Seed = 0,
    max_partitions: MaxPartitions = None,
    latency: Latency = 0.0,
    error_rate: ErrorRate = 0.0,
    tls_cert: Annotated[Path | None, typer.Option(help="Server certificate chain (PEM): serve TLS.")] = None,
    tls_key: Annotated[Path | None, typer.Option(help="Server private key (PEM).")] = None,
    tls_client_ca: Annotated[
        Path | None, typer.Option(help="CA (PEM) that must sign client certificates: mTLS.")
    ] = None,
    host: Host = "127.0.0.1",
    gpu_health: GpuHealth = None,
    node_health: NodeHealth = None,
    switch_health: SwitchHealth = None,
    control_port: ControlPort = None,
) -> None:
    """Serve each domain's NMX-C on its own port (a real NMX-C is one domain per endpoint) and print
    one line per chassis serial and domain: SERIAL -> URL (a minipod's serial has one line per
    domain). Health knobs set what GetGpuInfoList, GetComputeNodeInfoList and GetSwitchNodeInfoList
    report (and what partitions derive from it)."""
    from nico.serving import stop_requested
    from nico.sim.control import Endpoints
    from nico.sim.nmxc_server import NmxcSimulator, ServerTls

    fabric = _site(
        racks,
        nvl36x2,
        seed,
        max_partitions,
        latency,
        error_rate,
        minipods=minipods,
        minipod_domains=minipod_domains,
        gpu=gpu,
    )
    _apply_health(fabric, gpu_health or [], node_health or [], switch_health or [])
    if port and port + len(fabric.domains) - 1 > 65535:
        err.print(f"[bold red]error:[/] {len(fabric.domains)} ports from {port} exceed 65535")
        raise typer.Exit(2)
    if (tls_cert is None) != (tls_key is None) or (tls_client_ca is not None and tls_cert is None):
        err.print("[bold red]error:[/] --tls-cert and --tls-key go together (and --tls-client-ca needs them)")
        raise typer.Exit(2)
    tls = None
    if tls_cert is not None and tls_key is not None:
        tls = ServerTls(
            certificate_chain=tls_cert.read_bytes(),
            private_key=tls_key.read_bytes(),
            client_ca=tls_client_ca.read_bytes() if tls_client_ca else None,
        )

    async def serve() -> None:
        with stop_requested() as stop:
            async with NmxcSimulator(fabric, base_port=port, tls=tls, host=host) as sim:
                for domain, url in sim.domain_endpoints.items():
                    for serial in fabric.domain(domain).chassis_serials:
                        print(f"{serial} -> {url}  (domain {domain})", flush=True)
                endpoints = Endpoints("nmxc", stop=sim.stop_domain, start=sim.start_domain)
                async with _control(fabric, endpoints, control_port):
                    err.print(f"NMX-C simulator: {len(fabric.domains)} domain(s); Ctrl-C stops")
                    await stop.wait()

    _run_serving(serve)


@app.command()
def nmxm(
    racks: Racks = 1,
    port: Annotated[int, typer.Option(min=0, max=65535, help="Port to listen on; 0: a free port.")] = 9700,
    nvl36x2: Nvl36x2 = 0,
    minipods: Minipods = 0,
    minipod_domains: MinipodDomains = 2,
    gpu: Gpu = "gb200",
    seed: Seed = 0,
    max_partitions: MaxPartitions = None,
    latency: Latency = 0.0,
    error_rate: ErrorRate = 0.0,
    username: Annotated[str, typer.Option(help="Basic-auth user name.")] = "admin",
    password: Annotated[str, typer.Option(help="Basic-auth password.")] = "admin",
    operation_delay: Annotated[
        float, typer.Option(min=0.0, help="Seconds before a create/update/delete operation completes.")
    ] = 0.0,
    host: Host = "127.0.0.1",
    control_port: ControlPort = None,
) -> None:
    """Serve the whole site's NMX-M REST API and print its base URL."""
    from nico.serving import stop_requested
    from nico.sim.control import Endpoints
    from nico.sim.nmxm_app import NmxmSimulator

    fabric = _site(
        racks,
        nvl36x2,
        seed,
        max_partitions,
        latency,
        error_rate,
        minipods=minipods,
        minipod_domains=minipod_domains,
        gpu=gpu,
    )

    async def serve() -> None:
        sim = NmxmSimulator(
            fabric,
            port=port,
            username=username,
            password=password,
            operation_delay=operation_delay,
            host=host,
        )
        with stop_requested() as stop:
            async with sim, _control(fabric, Endpoints("nmxm"), control_port):
                print(sim.url, flush=True)
                err.print(f"NMX-M simulator: {len(fabric.domains)} domain(s), basic auth; Ctrl-C stops")
                await stop.wait()

    _run_serving(serve)

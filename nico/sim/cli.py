"""``nico sim nmxc|nmxm``: run one simulated fabric manager alone until Ctrl-C.

The simulators (grpc, FastAPI, uvicorn) are imported when a command runs, so that registering this
group does not slow down every other ``nico`` command.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console

if TYPE_CHECKING:
    from nico.sim.fabric import SimFabric

app = typer.Typer(
    help="Simulated NVLink fabric managers over an in-memory site of GB200 racks.",
    no_args_is_help=True,
)
err = Console(stderr=True)

Racks = Annotated[int, typer.Option(min=0, help="NVL72 racks (one domain and chassis serial each).")]
Nvl36x2 = Annotated[int, typer.Option(min=0, help="NVL36x2 pairs (one domain, two chassis serials).")]
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
    racks: int, nvl36x2: int, seed: int, max_partitions: int | None, latency: float, error_rate: float
) -> SimFabric:
    from nico.sim.fabric import SimFabric

    if racks + nvl36x2 == 0:
        err.print("[bold red]error:[/] a site needs at least one rack (--racks or --nvl36x2)")
        raise typer.Exit(2)
    sized = {"max_partitions": max_partitions} if max_partitions is not None else {}
    fabric = SimFabric(racks, nvl36x2=nvl36x2, seed=seed, **sized)
    for domain in fabric.domains:
        fabric.set_faults(domain, latency=latency, error_rate=error_rate)
    fabric.set_site_faults(latency=latency, error_rate=error_rate)
    return fabric


@contextlib.contextmanager
def stop_requested() -> Iterator[asyncio.Event]:
    """An event set by Ctrl-C or SIGTERM, installed before the servers start so that a signal
    arriving during start-up still ends in a clean stop."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        yield stop
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)


@app.command()
def nmxc(
    racks: Racks = 1,
    port: Annotated[
        int,
        typer.Option(min=0, max=65535, help="Port of the first domain, the next ones upward; 0: free ports."),
    ] = 9601,
    nvl36x2: Nvl36x2 = 0,
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
) -> None:
    """Serve each domain's NMX-C on its own port (a real NMX-C is one domain per endpoint) and print
    one line per chassis serial: SERIAL -> URL. Health knobs set what GetGpuInfoList,
    GetComputeNodeInfoList and GetSwitchNodeInfoList report (and what partitions derive from it)."""
    from nico.sim.nmxc_server import NmxcSimulator, ServerTls

    fabric = _site(racks, nvl36x2, seed, max_partitions, latency, error_rate)
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
                for serial, url in sim.endpoints.items():
                    print(f"{serial} -> {url}  (domain {fabric.chassis_serials[serial]})", flush=True)
                err.print(f"NMX-C simulator: {len(fabric.domains)} domain(s); Ctrl-C stops")
                await stop.wait()

    asyncio.run(serve())


@app.command()
def nmxm(
    racks: Racks = 1,
    port: Annotated[int, typer.Option(min=0, max=65535, help="Port to listen on; 0: a free port.")] = 9700,
    nvl36x2: Nvl36x2 = 0,
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
) -> None:
    """Serve the whole site's NMX-M REST API and print its base URL."""
    from nico.sim.nmxm_app import NmxmSimulator

    fabric = _site(racks, nvl36x2, seed, max_partitions, latency, error_rate)

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
            async with sim:
                print(sim.url, flush=True)
                err.print(f"NMX-M simulator: {len(fabric.domains)} domain(s), basic auth; Ctrl-C stops")
                await stop.wait()

    asyncio.run(serve())

"""``nico export``: NVLink placement for schedulers, from a running API, once or live.

``nico export --format slurm-topology-conf -o /etc/slurm/topology.conf`` writes Slurm's topology;
with ``--watch`` it follows ``/nvlink-topology/events`` (Server-Sent Events, resumed with
``Last-Event-ID`` after a dropped connection) and rewrites the file whenever placement changes.
``nico export --format kubectl-labels --watch | sh`` is a node labeller: it prints every node's
``kubectl label`` line once, then the lines of the nodes whose labels changed.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import httpx
import typer
from rich.console import Console

from nico.cli.api_access import refusal, server_message, tenant_base, token_or_exit, unreachable
from nico.cli.bootstrap import settings_or_exit
from nico.cli.options import DEFAULT_URL, ApiToken, ApiUrl, org_option
from nico.services.feed_export import DEFAULT_NODE_NAME, FORMATS
from nico.services.node_labels import CLIQUE_LABELS

err = Console(stderr=True)
CliqueLabel = Annotated[
    str | None,
    typer.Option(
        help=f"Label key of a node's clique: {' or '.join(CLIQUE_LABELS)} "
        "(default: the setting export.clique_label)."
    ),
]


def clique_label_or_default(value: str | None) -> str:
    """``--clique-label``, else this process's ``[export] clique_label`` setting."""
    if value is None:
        return settings_or_exit().export.clique_label
    if value not in CLIQUE_LABELS:
        raise typer.BadParameter(f"--clique-label must be one of {', '.join(CLIQUE_LABELS)}")
    return value


DEBOUNCE_SECONDS = 0.1
RECONNECT_SECONDS = 1.0


@dataclass
class Event:
    event: str = "message"
    data: str = ""
    id: str | None = None


@dataclass
class SseReader:
    """A minimal ``text/event-stream`` parser (the WHATWG rules nico's stream needs)."""

    last_event_id: str | None = None
    retry_seconds: float = RECONNECT_SECONDS

    async def events(self, response: httpx.Response) -> AsyncIterator[Event]:
        current = Event()
        data: list[str] = []
        async for line in response.aiter_lines():
            if line == "":
                if data or current.event != "message":
                    current.data = "\n".join(data)
                    if current.id is not None:
                        self.last_event_id = current.id
                    yield current
                current, data = Event(), []
                continue
            if line.startswith(":"):
                continue
            name, _, value = line.partition(":")
            value = value.removeprefix(" ")
            if name == "event":
                current.event = value
            elif name == "data":
                data.append(value)
            elif name == "id":
                current.id = value
            elif name == "retry" and value.isdigit():
                self.retry_seconds = int(value) / 1000


def write_atomically(path: Path, text: str) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


class Exporter:
    def __init__(self, client: httpx.AsyncClient, base: str, params: dict[str, str], output: str) -> None:
        self.client, self.base, self.params, self.output = client, base, params, output
        self.previous: str | None = None

    async def fetch(self) -> str:
        response = await self.client.get(f"{self.base}/nvlink-topology/export", params=self.params)
        if response.status_code != 200:
            raise refusal(response)
        return response.text

    async def publish(self) -> None:
        text = await self.fetch()
        if text == self.previous:
            return
        if self.output == "-":
            if self.params["format"] == "kubectl-labels" and self.previous is not None:
                before = set(self.previous.splitlines())
                changed = [line for line in text.splitlines() if line not in before]
                sys.stdout.write("".join(line + "\n" for line in changed))
            else:
                sys.stdout.write(text)
            sys.stdout.flush()
        else:
            write_atomically(Path(self.output), text)
            err.print(f"wrote {self.output}")
        self.previous = text


FATAL_STATUSES = frozenset({400, 401, 403, 404})  # reconnecting cannot change these answers


async def watch(
    client: httpx.AsyncClient,
    base: str,
    scope_params: dict[str, str],
    publish: Callable[[], Awaitable[None]],
    reader: SseReader | None = None,
    resync_seconds: float | None = None,
) -> None:
    """Call ``publish`` on every burst of placement events (and, with ``resync_seconds``, after that
    long without any); reconnect (resuming from ``reader``'s cursor) when the stream drops; stop
    (exit 1, the server's message) when the server refuses the stream."""
    reader = reader or SseReader()
    wake: asyncio.Queue[str | typer.Exit] = asyncio.Queue()

    async def follow() -> None:
        while True:
            headers = {"Accept": "text/event-stream"}
            if reader.last_event_id is not None:
                headers["Last-Event-ID"] = reader.last_event_id
            try:
                async with client.stream(
                    "GET",
                    f"{base}/nvlink-topology/events",
                    params=scope_params,
                    headers=headers,
                    timeout=httpx.Timeout(10.0, read=None),
                ) as response:
                    if response.status_code in FATAL_STATUSES:
                        await response.aread()
                        await wake.put(refusal(response))
                        return
                    if response.status_code != 200:
                        await response.aread()
                        err.print(f"[yellow]events: {response.status_code} {server_message(response)}")
                    else:
                        async for event in reader.events(response):
                            await wake.put(event.event)
            except httpx.HTTPError as exc:
                err.print(f"[yellow]events from {base}: {exc}; reconnecting", highlight=False)
            await asyncio.sleep(reader.retry_seconds)

    follower = asyncio.create_task(follow())
    try:
        while True:
            # hello (start), reset (resume too old: re-read everything), placement, or a resync's time
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(resync_seconds):
                    stop(await wake.get())
            with contextlib.suppress(TimeoutError):
                while True:  # asyncio.timeout: wait_for on 3.11 can lose a Ctrl-C's cancellation
                    async with asyncio.timeout(DEBOUNCE_SECONDS):
                        stop(await wake.get())
            await publish()
    finally:
        follower.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await follower


def stop(woken_by: str | typer.Exit) -> None:
    """Raise the refusal the event follower handed over (an event's name is no reason to stop)."""
    if isinstance(woken_by, typer.Exit):
        raise woken_by


def export(
    org: Annotated[str, org_option("Org (tenant, or provider with --scope provider).")],
    format: Annotated[str, typer.Option("--format", "-f", help=f"One of: {', '.join(FORMATS)}.")],
    url: ApiUrl = DEFAULT_URL,
    token: ApiToken = None,
    scope: Annotated[str, typer.Option(help="tenant, or provider (every instance at its sites).")] = "tenant",
    site_id: Annotated[str | None, typer.Option(help="Only this site.")] = None,
    node_name: Annotated[
        str, typer.Option(help="Node name template: {instance} {instance_id} {machine} {hostname} {site}.")
    ] = DEFAULT_NODE_NAME,
    output: Annotated[str, typer.Option("--output", "-o", help="File to write, or - for stdout.")] = "-",
    watch_changes: Annotated[
        bool, typer.Option("--watch", help="Follow placement events and re-export on every change.")
    ] = False,
    clique_label: CliqueLabel = None,
) -> None:
    """Export NVLink placement for Slurm, Kubernetes or Kueue (from a running API)."""
    if format not in FORMATS:
        raise typer.BadParameter(f"--format must be one of {', '.join(FORMATS)}")
    token = token_or_exit(token, org, ["PROVIDER_VIEWER"] if scope == "provider" else ["TENANT_ADMIN"])
    scope_params = {"scope": scope} | ({"siteId": site_id} if site_id else {})
    params = scope_params | {
        "format": format,
        "nodeName": node_name,
        "cliqueLabel": clique_label_or_default(clique_label),
    }
    base = tenant_base(url, org)

    async def main() -> None:
        headers = {"Authorization": f"Bearer {token}"}
        async with httpx.AsyncClient(headers=headers, timeout=30.0) as client:
            exporter = Exporter(client, base, params, output)
            if watch_changes:
                await watch(client, base, scope_params, exporter.publish)
            else:
                await exporter.publish()

    try:
        asyncio.run(main())
    except KeyboardInterrupt:
        pass
    except httpx.HTTPError as exc:
        raise unreachable(exc, base) from None

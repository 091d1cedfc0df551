"""Tenant-side commands that talk to a running API over HTTP, as a tenant's scripts would:
``nico wait-ready`` polls the tenant's instances until every one is Ready."""

from __future__ import annotations

import json
import time
from collections import Counter
from dataclasses import dataclass
from typing import Annotated, Any

import httpx
import typer
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
)

from nico.cli.api_access import server_message, tenant_base, token_or_exit
from nico.cli.options import DEFAULT_URL, ApiToken, ApiUrl, org_option

PAGE_SIZE = 100
POLL_SECONDS = 0.5
READY = "Ready"
TERMINATING = "Terminating"
err = Console(stderr=True)


@dataclass(frozen=True)
class Census:
    """The tenant's instances (Terminating ones left out) counted by status."""

    statuses: Counter[str]

    @property
    def total(self) -> int:
        return sum(self.statuses.values())

    @property
    def ready(self) -> int:
        return self.statuses[READY]

    def describe(self) -> str:
        waiting = ", ".join(f"{n} {status}" for status, n in sorted(self.statuses.items()) if status != READY)
        return f"instances Ready ({waiting})" if waiting else "instances Ready"


FATAL_STATUSES = frozenset({400, 401, 403, 404})  # waiting longer cannot change these answers


class ApiError(Exception):
    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status

    @property
    def fatal(self) -> bool:
        return self.status in FATAL_STATUSES


def census(client: httpx.Client, base: str, vpc_id: str | None) -> Census:
    """Every page of ``GET /instance`` (optionally of one VPC)."""
    statuses: Counter[str] = Counter()
    page = 1
    while True:
        params: dict[str, Any] = {"pageNumber": page, "pageSize": PAGE_SIZE}
        if vpc_id:
            params["vpcId"] = vpc_id
        response = client.get(f"{base}/instance", params=params)
        if response.status_code != 200:
            message = server_message(response)
            raise ApiError(f"GET {base}/instance: {response.status_code} {message}", response.status_code)
        items = response.json()
        statuses.update(item["status"] for item in items if item["status"] != TERMINATING)
        total = json.loads(response.headers.get("X-Pagination", "{}")).get("total", 0)
        if not items or page * PAGE_SIZE >= total:
            return Census(statuses)
        page += 1


def wait_ready(
    org: Annotated[str, org_option("Tenant org.")],
    url: ApiUrl = DEFAULT_URL,
    token: ApiToken = None,
    vpc_id: Annotated[str | None, typer.Option(help="Only the instances of this VPC.")] = None,
    minimum: Annotated[int, typer.Option("--min", min=1, help="Wait until at least this many exist.")] = 1,
    timeout: Annotated[float, typer.Option(min=0.0, help="Give up after this many seconds.")] = 300.0,
) -> None:
    """Wait until every instance of the tenant (at least --min of them) is Ready: exit 0, or 1 at the
    timeout (or at once when the server refuses the request or cannot be reached). Shows Ready /
    total and what the others are doing."""
    token = token_or_exit(token, org, ["TENANT_ADMIN"])
    base = tenant_base(url, org)
    deadline = time.monotonic() + timeout
    latest = Census(Counter())
    with (
        httpx.Client(headers={"Authorization": f"Bearer {token}"}, timeout=10.0) as client,
        Progress(
            SpinnerColumn(),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.description}"),
            TimeElapsedColumn(),
            console=err,
        ) as progress,
    ):
        task = progress.add_task("instances Ready", total=None)
        while True:
            try:
                latest = census(client, base, vpc_id)
            except httpx.ConnectError as exc:
                progress.stop()
                err.print(f"[bold red]error:[/] cannot reach {url}: {exc}", highlight=False, soft_wrap=True)
                raise typer.Exit(1) from None
            except ApiError as exc:
                if exc.fatal:
                    progress.stop()
                    err.print(f"[bold red]error:[/] {exc}", highlight=False, soft_wrap=True)
                    raise typer.Exit(1) from None
                progress.update(task, description=f"[yellow]{exc}")
            except httpx.HTTPError as exc:
                progress.update(task, description=f"[yellow]{exc}")
            else:
                progress.update(
                    task,
                    total=max(latest.total, minimum),
                    completed=latest.ready,
                    description=latest.describe(),
                )
                if latest.total >= minimum and latest.ready == latest.total:
                    break
            if time.monotonic() >= deadline:
                progress.stop()
                if latest.total < minimum:
                    err.print(
                        f"[bold red]timeout:[/] {latest.total} instances exist, fewer than --min {minimum} "
                        f"({latest.ready} Ready)",
                        highlight=False,
                    )
                else:
                    err.print(f"[bold red]timeout:[/] {latest.ready}/{latest.total} {latest.describe()}")
                raise typer.Exit(1)
            time.sleep(POLL_SECONDS)
    print(f"{latest.ready}/{latest.total} instances Ready")

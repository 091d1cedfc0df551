"""What the commands that talk to a running API share (``wait-ready``, ``export``): its URL, the
bearer token, and a development token for the org when none is given."""

from __future__ import annotations

from typing import Annotated

import typer

from nico.cli.bootstrap import settings_or_exit
from nico.cli.output import console

ApiUrl = Annotated[str, typer.Option(envvar="NICO_URL", help="API base URL.")]
ApiToken = Annotated[
    str | None,
    typer.Option(envvar="NICO_TOKEN", help="Bearer token (default: a development token for the org)."),
]
DEFAULT_URL = "http://127.0.0.1:8080"


def token_or_exit(token: str | None, org: str, roles: list[str]) -> str:
    """``token``, else a development token for ``org`` signed with this data directory's key; a
    token that cannot be made is one line, exit 2."""
    if token is not None:
        return token
    from nico.api.auth import issue_dev_token

    try:
        return issue_dev_token(settings_or_exit(), org=org, roles=roles)
    except ValueError as exc:
        console.print(f"[bold red]error:[/] {exc}; pass --token or set NICO_TOKEN")
        raise typer.Exit(2) from None


def tenant_base(url: str, org: str) -> str:
    """The org's NICo API root under ``url``."""
    return f"{url.rstrip('/')}/v2/org/{org}/nico"

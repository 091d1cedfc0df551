"""What the commands that talk to a running API share (``wait-ready``, ``export``): its URL, the
bearer token, a development token for the org when none is given, and how a failed request is told:
one line naming the URL that could not be reached, or the server's own message for a refusal."""

from __future__ import annotations

import contextlib

import httpx
import typer

from nico.cli.bootstrap import settings_or_exit
from nico.cli.options import DEFAULT_URL, ApiToken, ApiUrl
from nico.cli.output import console, fail

__all__ = [
    "DEFAULT_URL",
    "ApiToken",
    "ApiUrl",
    "refusal",
    "server_message",
    "tenant_base",
    "token_or_exit",
    "unreachable",
]


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


def server_message(response: httpx.Response) -> str:
    """What the server said when it refused: its error envelope's message, else the body's start."""
    try:
        body = response.json()
    except ValueError:
        return response.text.strip()[:300] or response.reason_phrase
    message = body.get("message") if isinstance(body, dict) else None
    return str(message) if message else response.text.strip()[:300]


def refusal(response: httpx.Response) -> typer.Exit:
    """A refused request (403, 404, 5xx, ...) as one line, exit 1: the request, the status and the
    server's message. Raise what this returns."""
    request = response.request
    return fail(f"{request.method} {request.url}: {response.status_code} {server_message(response)}")


def unreachable(exc: httpx.HTTPError, url: str) -> typer.Exit:
    """A request that got no answer as one line naming the URL, exit 1 (``url`` when the exception
    carries no request). Raise what this returns."""
    with contextlib.suppress(RuntimeError):  # httpx raises when the exception was made without one
        url = str(exc.request.url)
    return fail(f"cannot reach {url}: {str(exc) or type(exc).__name__}")

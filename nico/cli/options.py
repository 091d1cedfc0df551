"""Options that several commands share, each declared once with its environment twin, so that a
variable the demo prints to export means the same on every command that takes it:

``--org`` ``NICO_ORG``, ``--url`` ``NICO_URL``, ``--token`` ``NICO_TOKEN``.

``--org`` reads ``NICO_ORG`` where the org is who the command acts for (a token, an export, a wait, a
partition made for a tenant). A filter of a site-wide listing (``admin logical-partition show --org``)
has no twin: an org exported for a tenant's shell would silently hide the other tenants' rows.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

ORG_ENV = "NICO_ORG"
URL_ENV = "NICO_URL"
TOKEN_ENV = "NICO_TOKEN"
DEFAULT_URL = "http://127.0.0.1:8080"


def org_option(help: str, *aliases: str) -> Any:
    """``--org`` (and ``aliases``, e.g. the reference's ``-t``) with its twin ``NICO_ORG``; use as
    ``org: Annotated[str, org_option("Tenant org.")]``."""
    return typer.Option("--org", *aliases, envvar=ORG_ENV, help=help)


ApiUrl = Annotated[str, typer.Option("--url", envvar=URL_ENV, help="API base URL.")]
ApiToken = Annotated[
    str | None,
    typer.Option("--token", envvar=TOKEN_ENV, help="Bearer token (default: a dev token for the org)."),
]

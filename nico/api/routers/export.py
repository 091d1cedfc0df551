"""``/nvlink-topology/export`` and ``/nvlink-topology/events`` (nico extensions): NVLink placement for
schedulers (Slurm topology files, Kubernetes node labels, a Kueue Topology) and a Server-Sent Events
stream of its changes. Tenant-scoped (TENANT_ADMIN); ``scope=provider`` gives a provider's whole sites
(PROVIDER_ADMIN or PROVIDER_VIEWER)."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Header, Query
from pydantic import WithJsonSchema
from starlette.responses import Response, StreamingResponse

from nico.api.auth import Principal
from nico.api.deps import CtxDep, PrincipalDep, ReadSessionDep
from nico.api.errors import PARSE_ERROR, stating_error
from nico.api.pagination import page_of
from nico.api.parsing import PageNumberQuery, PageSizeQuery
from nico.services import feed_export, feed_stream
from nico.services.errors import ServiceError
from nico.services.node_labels import CLIQUE_LABELS

router = APIRouter(tags=["nvlink-topology"])

ScopeParam = Annotated[
    Literal["tenant", "provider"],
    Query(
        description=stating_error(
            "tenant: the caller's instances; provider: every instance at the provider's sites",
            400,
            PARSE_ERROR,
        )
    ),
]
SiteParam = Annotated[
    str | None,
    Query(alias="siteId", description=stating_error("Only this site", 400, feed_export.BAD_SITE)),
    WithJsonSchema({"type": "string", "anyOf": [{"format": "uuid"}, {"maxLength": 0}]}),
]
# the id of an event as this stream sent it (feed_stream.parse_cursor); empty: from now
LAST_EVENT_ID_SCHEMA = {"type": "string", "pattern": "^([0-9]{1,19}-[0-9]{1,19})?$"}


def authorize(principal: Principal, org: str, scope: str) -> bool:
    """Whether the caller reads as the provider (True) or as the tenant (False)."""
    if scope == "provider":
        provider_side, _ = principal.require_provider_or_tenant(org)
        if not provider_side:
            raise ServiceError(403, "User does not have Provider Admin or Provider Viewer role with org")
        return True
    principal.require_tenant_admin(org)
    return False


@router.get(
    "/nvlink-topology/export",
    operation_id="export-nvlink-topology",
    summary="NVLink placement for schedulers: Slurm, Kubernetes labels, Kueue (nico extension)",
    description="Without pageNumber and pageSize, every node in one document. With either, a page of "
    "nodes by node name (kubernetes-labels and kubectl-labels only).",
    responses={
        200: {
            "content": {"text/plain": {}, "application/yaml": {}, "application/json": {}},
            "headers": {
                "X-Pagination": {
                    "description": "With pageNumber or pageSize: the page answered and the count of all "
                    'nodes, as JSON: `{"pageNumber":1,"pageSize":100,"total":50000,"orderBy":null}`',
                    "schema": {"type": "string"},
                }
            },
        }
    },
)
async def export_topology(
    org: str,
    principal: PrincipalDep,
    session: ReadSessionDep,
    ctx: CtxDep,
    format: Annotated[
        str,
        Query(
            description=stating_error(", ".join(feed_export.FORMATS), 400, feed_export.BAD_FORMAT),
            json_schema_extra={"enum": list(feed_export.FORMATS)},
        ),
    ],
    scope: ScopeParam = "tenant",
    site_id: SiteParam = None,
    node_name: Annotated[
        str,
        Query(
            alias="nodeName",
            description="Node name template: {instance}, {instance_id}, {machine}, {hostname}, {site}; "
            "`{{` and `}}` for braces. Anything else answers 400 `Invalid nodeName template`",
            json_schema_extra={"pattern": feed_export.NODE_NAME_PATTERN},
        ),
    ] = feed_export.DEFAULT_NODE_NAME,
    clique_label: Annotated[
        str | None,
        Query(
            alias="cliqueLabel",
            description=stating_error(
                "Label key of a node's clique; default: the server's [export] clique_label",
                400,
                feed_export.BAD_CLIQUE_LABEL,
            ),
        ),
        WithJsonSchema({"type": "string", "enum": list(CLIQUE_LABELS)}),
    ] = None,
    page_number: PageNumberQuery = None,
    page_size: PageSizeQuery = None,
) -> Response:
    provider_side = authorize(principal, org, scope)
    fmt = feed_export.check_format(format)
    key = feed_export.check_clique_label(clique_label or ctx.settings.export.clique_label)
    paged = page_number is not None or page_size is not None
    page = page_of(page_number, page_size, None, {"created"}) if paged else None
    where = await feed_export.resolve_scope(
        session, org, provider_side=provider_side, site_id=feed_export.parse_site_id(site_id)
    )
    if page is None:
        text = await feed_export.export(session, where, fmt, node_name, key)
        return Response(text, media_type=feed_export.MEDIA_TYPES[fmt])
    wanted = feed_export.Slice(offset=page.offset, limit=page.size)
    text, total = await feed_export.export_page(session, where, fmt, wanted, node_name, key)
    return Response(
        text, media_type=feed_export.MEDIA_TYPES[fmt], headers={"X-Pagination": page.header(total)}
    )


@router.get(
    "/nvlink-topology/events",
    operation_id="stream-nvlink-placement-events",
    summary="Server-Sent Events of NVLink placement changes, resumable with Last-Event-ID (nico extension)",
    responses={200: {"content": {"text/event-stream": {}}}},
)
async def placement_event_stream(
    org: str,
    principal: PrincipalDep,
    session: ReadSessionDep,
    ctx: CtxDep,
    scope: ScopeParam = "tenant",
    site_id: SiteParam = None,
    last_event_id: Annotated[
        str | None, Header(alias="Last-Event-ID"), WithJsonSchema(LAST_EVENT_ID_SCHEMA)
    ] = None,
) -> Response:
    provider_side = authorize(principal, org, scope)
    cursor = feed_stream.parse_cursor(last_event_id)
    where = await feed_export.resolve_scope(
        session, org, provider_side=provider_side, site_id=feed_export.parse_site_id(site_id)
    )
    body = feed_stream.stream(
        ctx.raw,
        ctx.feed_listener,
        where,
        cursor,
        heartbeat_seconds=ctx.settings.api.placement_event_heartbeat_seconds,
        retention_seconds=ctx.settings.api.placement_event_retention_seconds,
    )
    headers = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
    return StreamingResponse(body, media_type="text/event-stream", headers=headers)

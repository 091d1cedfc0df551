"""The SQL of ``GET /instance/{instanceId}``: the response body, built by PostgreSQL.

The hottest read of the API answers the bytes PostgreSQL writes, with nothing decoded, validated or
encoded again in Python. The statement therefore writes exactly what ``nico.instance.schemas.Instance``
serialises for an instance without ``includeRelation`` objects: the same keys in the same order,
compact JSON, timestamps as pydantic writes them (``2026-11-24T01:23:18.525444Z``; no fraction when it
is 0; ``+05:30`` for an offset) in the session's time zone, as psycopg and pydantic would have.
tests/api/test_instance_document.py compares the two byte for byte; a change of either must change
both. The one thing the statement does not write exactly is a ``labels`` map whose values are not all
strings (the API only stores strings): it then answers no document, and the caller builds the body
from :func:`nico.instance.queries.instance_document_for_caller` instead.
"""

from __future__ import annotations

import json
import uuid
from typing import Any, NamedTuple

import psycopg

from nico.db.queries.feed import CLIQUE_OF_INTERFACE

# A value and how it is written: SQL whose result is JSON text, or a JSON constant.
_Sql = tuple[str, str]


def _sql(expression: str) -> _Sql:
    """JSON text of a value that is never NULL (uuid, text, boolean, integer)."""
    return ("sql", f"to_json({expression})::text")


def _nullable(expression: str) -> _Sql:
    return ("sql", f"coalesce(to_json({expression})::text, 'null')")


def _timestamp(expression: str) -> _Sql:
    """A timestamptz as pydantic writes it (6 fractional digits or none; ``Z`` for UTC)."""
    text = f"to_char({expression}, 'YYYY-MM-DD\"T\"HH24:MI:SS.USTZH:TZM')"
    return ("sql", f"'\"' || replace(replace({text}, '.000000', ''), '+00:00', 'Z') || '\"'")


def _const(value: Any) -> _Sql:
    return ("const", json.dumps(value, separators=(",", ":"), ensure_ascii=False))


def _raw(json_text_sql: str) -> _Sql:
    return ("sql", json_text_sql)


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _object(fields: list[tuple[str, _Sql]]) -> str:
    """SQL writing a compact JSON object of ``fields`` in order (constants merged into literals)."""
    parts: list[str] = []
    pending = "{"
    for index, (key, (kind, value)) in enumerate(fields):
        pending += ("," if index else "") + json.dumps(key) + ":"
        if kind == "const":
            pending += value
        else:
            parts += [_literal(pending), value]
            pending = ""
    parts.append(_literal(pending + "}"))
    return "concat(" + ", ".join(parts) + ")"


def _array(item_sql: str, order: str) -> str:
    """SQL writing a JSON array of the rows' ``item_sql`` (an aggregate: use inside a SELECT)."""
    return f"'[' || coalesce(string_agg({item_sql}, ',' ORDER BY {order}), '') || ']'"


_INTERFACE = _object(
    [
        ("id", _sql("x.id")),
        ("instanceId", _sql("x.instance_id")),
        ("subnetId", _nullable("x.subnet_id")),
        ("vpcPrefixId", _const(None)),
        ("isPhysical", _sql("x.is_physical")),
        ("device", _const(None)),
        ("deviceInstance", _const(None)),
        ("virtualFunctionId", _const(None)),
        ("macAddress", _const(None)),
        ("ipAddresses", _const([])),
        ("status", _sql("x.status")),
        ("created", _timestamp("x.created")),
        ("updated", _timestamp("x.updated")),
    ]
)


def _nvlink_interface(deprecated_key: bool) -> str:
    fields = [
        ("id", _sql("n.id")),
        ("instanceId", _sql("n.instance_id")),
        ("nvLinkLogicalPartitionId", _sql("n.logical_partition_id")),
    ]
    if deprecated_key:  # NVLinkInterface.nv_link_logical_partition_id_deprecated (WireKeys)
        fields.append(("nvLinklogicalPartitionId", _sql("n.logical_partition_id")))
    fields += [
        ("nvLinkDomainId", _nullable("n.domain_uuid")),
        ("deviceInstance", _sql("n.device_instance")),
        ("gpuGuid", _nullable("n.gpu_uid::text")),
        ("status", _sql("n.status")),
        ("nvLinkCliqueId", _nullable("n.clique")),
        ("created", _timestamp("n.created")),
        ("updated", _timestamp("n.updated")),
    ]
    return _object(fields)


_HISTORY = _object(
    [
        ("status", _sql("h.status")),
        ("message", _nullable("h.message")),
        ("created", _timestamp("h.created")),
        ("updated", _timestamp("h.updated")),
    ]
)

# A labels map of strings, compact, in the order jsonb keeps its keys (the order psycopg reads them in).
# (CASE guards every call: jsonb_each refuses anything but an object, and SQL may evaluate both sides
# of an AND.)
_LABELS = """CASE WHEN i.labels IS NULL THEN 'null' WHEN jsonb_typeof(i.labels) = 'object' THEN (
    SELECT '{' || coalesce(string_agg(to_json(e.key)::text || ':' || to_json(e.value)::text, ','
                                      ORDER BY e.ordinality), '') || '}'
    FROM jsonb_each_text(i.labels) WITH ORDINALITY AS e) END"""
_LABELS_WRITTEN_EXACTLY = """CASE WHEN i.labels IS NULL THEN true WHEN jsonb_typeof(i.labels) = 'object' THEN
    NOT EXISTS (SELECT 1 FROM jsonb_each(i.labels) e WHERE jsonb_typeof(e.value) <> 'string')
    ELSE false END"""

_DEPRECATIONS = [
    {
        "attribute": "sshkeygroups",
        "replacedby": "sshKeyGroups",
        "effective": "2025-09-04T00:00:00Z",
        "notice": "\"'sshkeygroups' has been deprecated in favor of 'sshKeyGroups'. "
        'Please take action immediately"',
    }
]


def _instance(deprecated_key: bool) -> str:
    return _object(
        [
            ("id", _sql("i.id")),
            ("name", _sql("i.name")),
            ("description", _nullable("i.description")),
            ("controllerInstanceId", _sql("i.id")),
            ("tenantId", _sql("i.tenant_id")),
            ("infrastructureProviderId", _sql("s.infrastructure_provider_id")),
            ("siteId", _sql("i.site_id")),
            ("instanceTypeId", _nullable("i.instance_type_id")),
            ("vpcId", _sql("i.vpc_id")),
            ("secondaryVpcIds", _const([])),
            ("machineId", _nullable("m.id")),
            ("operatingSystemId", _const(None)),
            ("ipxeScript", _nullable("i.ipxe_script")),
            ("alwaysBootWithCustomIpxe", _sql("i.always_boot_with_custom_ipxe")),
            ("phoneHomeEnabled", _sql("i.phone_home_enabled")),
            ("userData", _nullable("i.user_data")),
            ("labels", _raw(_LABELS)),
            ("isUpdatePending", _const(False)),
            (
                "serialConsoleUrl",
                _nullable(
                    "CASE WHEN s.serial_console_hostname <> '' "
                    "THEN 'ssh://' || i.id::text || '@' || s.serial_console_hostname END"
                ),
            ),
            ("networkSecurityGroupId", _const(None)),
            ("networkSecurityGroupPropagationDetails", _const(None)),
            ("networkSecurityGroupInherited", _const(False)),
            ("tpmEkCertificate", _const(None)),
            ("status", _sql("i.status")),
            ("interfaces", _raw("ports.items")),
            ("infinibandInterfaces", _const([])),
            ("dpuExtensionServiceDeployments", _const([])),
            (
                "nvLinkInterfaces",
                _raw(f"(SELECT {_array(_nvlink_interface(deprecated_key), 'n.rank')} FROM nv n)"),
            ),
            ("nvLinkCliqueId", _nullable("(SELECT clique FROM nv_clique)")),
            ("sshKeyGroupIds", _const(None)),
            ("sshKeyGroups", _const([])),
            ("statusHistory", _raw("history.items")),
            ("created", _timestamp("i.created")),
            ("updated", _timestamp("i.updated")),
            ("deprecations", _const(_DEPRECATIONS)),
        ]
    )


def _statement(deprecated_key: bool) -> str:
    # The instance's NVLink interfaces with their cliques (``nv``), and the instance's clique: every
    # interface Ready and in one and the same clique (``nico.instance.schemas.instance_clique``).
    return f"""
SELECT (SELECT t.id FROM tenant t WHERE t.org = $1) AS caller_tenant_id, d.tenant_id,
       CASE WHEN d.exact THEN d.document END AS document
FROM (SELECT 1) AS one LEFT JOIN LATERAL (
    WITH nv AS (
        SELECT n.*, {CLIQUE_OF_INTERFACE.strip()} AS clique,
               row_number() OVER (ORDER BY n.created, n.device_instance, n.id) AS rank
        FROM nvlink_interface n WHERE n.instance_id = $2
    ), nv_clique AS (
        SELECT CASE WHEN count(*) > 0 AND bool_and(status = 'Ready') AND count(clique) = count(*)
                         AND count(DISTINCT clique) = 1 THEN min(clique) END AS clique
        FROM nv
    )
    SELECT i.tenant_id, {_LABELS_WRITTEN_EXACTLY} AS exact, {_instance(deprecated_key)} AS document
    FROM instance i
    JOIN site s ON s.id = i.site_id
    LEFT JOIN machine m ON m.instance_id = i.id
    CROSS JOIN LATERAL (
        SELECT {_array(_INTERFACE, "x.created, x.id")} AS items
        FROM instance_interface x WHERE x.instance_id = i.id
    ) AS ports
    CROSS JOIN LATERAL (
        SELECT {_array(_HISTORY, "h.created DESC, h.id DESC")} AS items
        FROM (SELECT d.id, d.status, d.message, d.created, d.updated FROM status_detail d
              WHERE d.instance_id = i.id ORDER BY d.created DESC, d.id DESC
              LIMIT $3) AS h
    ) AS history
    WHERE i.id = $2
) AS d ON true
"""


_STATEMENTS = {deprecated_key: _statement(deprecated_key) for deprecated_key in (False, True)}


class InstanceDocument(NamedTuple):
    """The caller's tenant (None: the org has none), the instance's tenant (None: no such instance)
    and its response body (None when only Python can write it: see the module's docstring)."""

    caller_tenant_id: uuid.UUID | None
    tenant_id: uuid.UUID | None
    document: str | None


async def instance_document(
    conn: psycopg.AsyncConnection[Any],
    org: str,
    instance_id: uuid.UUID,
    history_limit: int,
    *,
    deprecated_partition_key: bool,
) -> InstanceDocument:
    """The instance's ``GET`` body as PostgreSQL writes it, and the tenants to check it against."""
    # A raw cursor: the statement's ``$n`` go to the server as they are. A cursor with ``%(name)s``
    # placeholders parses the statement on every call (psycopg caches that only for short ones).
    async with psycopg.AsyncRawCursor(conn) as cursor:
        await cursor.execute(_STATEMENTS[deprecated_partition_key], (org, instance_id, history_limit))
        row = await cursor.fetchone()
    assert row is not None
    return InstanceDocument(*row)

"""SQL of the scheduler feed (NVLink placement as schedulers see it): clique ids, the placement of
each instance, and the placement event log (table ``placement_event``, written by the triggers of
migrations 0005 and 0010).

A clique id is what the GPU driver reports as ``<ClusterUUID>.<CliqueId>``: the NVLink domain's UUID
(the ``domain_uuid`` NMX-C reports in every ``ServerHeader``, nico's ``nvlink_domain.uuid``) and the
NMX partition id of the interface's physical partition in that domain. It exists only for Ready
interfaces: before that the driver has no partition to report.
"""

from __future__ import annotations

# For an nvlink_interface aliased ``n``.
CLIQUE_OF_INTERFACE = """
    CASE WHEN n.status = 'Ready' AND n.domain_uuid IS NOT NULL THEN (
        SELECT n.domain_uuid::text || '.' || p.nmx_partition_id::text
        FROM physical_partition p
        WHERE p.logical_partition_id = n.logical_partition_id AND p.domain_uuid = n.domain_uuid
    ) END
"""

# SQLAlchemy ``text()`` style (``:ids``).
CLIQUES_BY_INTERFACE = f"""
SELECT n.id, {CLIQUE_OF_INTERFACE} AS clique_id FROM nvlink_interface n WHERE n.id = ANY(:ids)
"""

# Every instance in scope with an NVLink domain (its machine's, else its realised interfaces'), by
# name: who it is and where. Scope: a tenant (``tenant``), or a provider's sites (``provider``),
# optionally one site (``site``).
# The NVLink domain of instance ``i``'s realised interfaces (for one whose machine is in none).
_INTERFACES_DOMAIN = """(SELECT n.domain_uuid FROM nvlink_interface n
               WHERE n.instance_id = i.id AND n.domain_uuid IS NOT NULL LIMIT 1)"""
# Who instance ``i`` (on machine ``m``, at site ``s``) is and where.
_PLACED_COLUMNS = f"""i.id AS instance_id, i.name AS instance_name, i.site_id, s.name AS site_name,
           m.id AS machine_id, m.hostname, coalesce(m.domain_uuid, {_INTERFACES_DOMAIN}) AS domain_uuid"""
_PLACED = f"""
SELECT * FROM (
    SELECT {_PLACED_COLUMNS}
    FROM instance i
    JOIN site s ON s.id = i.site_id
    LEFT JOIN machine m ON m.instance_id = i.id
    WHERE (%(tenant)s::uuid IS NULL OR i.tenant_id = %(tenant)s::uuid)
      AND (%(provider)s::uuid IS NULL OR s.infrastructure_provider_id = %(provider)s::uuid)
      AND (%(site)s::uuid IS NULL OR i.site_id = %(site)s::uuid)
) placed
WHERE domain_uuid IS NOT NULL
"""

# For each instance ``p`` of _PLACED: its interfaces and the deviceInstance of every GPU of its machine
# (the GPUs its node exposes), which the node labels are made of.
_GPUS_OF_PLACED = f"""
       (SELECT coalesce(json_agg(json_build_object(
               'id', n.id, 'device_instance', n.device_instance, 'status', n.status,
               'logical_partition_id', n.logical_partition_id, 'clique_id', {CLIQUE_OF_INTERFACE})
           ORDER BY n.device_instance, n.id), '[]')
        FROM nvlink_interface n WHERE n.instance_id = p.instance_id AND n.status <> 'Deleting') AS interfaces,
       ARRAY(SELECT g.device_id - 1 FROM gpu g WHERE g.machine_id = p.machine_id ORDER BY g.device_id)
           AS tray_devices
"""

# Names and domains only (the Slurm files need no more).
PLACEMENT_NAMES = f"SELECT p.* FROM ({_PLACED}) p ORDER BY p.instance_name, p.instance_id"

# Every placed instance with its GPUs.
PLACEMENT = f"SELECT p.*, {_GPUS_OF_PLACED} FROM ({_PLACED}) p ORDER BY p.instance_name, p.instance_id"

# The scheduler export's pages. An instance in scope is a node when it is in an NVLink domain (its
# machine's, else a realised interface's: _PLACED's condition); the page's nodes are picked on their keys
# in name order, on ix_instance_tenant_name (a tenant's) or ix_instance_name (at a provider's sites),
# each checked against the machines in a domain read once from ix_machine_placed_instance (a hash), an
# interface read only for an instance whose machine is in none. A deep page reads the index entries
# before it, no table rows: at 50,000 nodes the last page and the count cost ~25 ms each, where sorting
# every node of the scope whole cost ~0.1 s a page. Scope: ``tenant`` or ``provider`` (the sites of),
# optionally ``site``, each its own text so that PostgreSQL plans each on its index.
_IS_NODE = f"""(
    i.id IN (SELECT m.instance_id FROM machine m
             WHERE m.instance_id IS NOT NULL AND m.domain_uuid IS NOT NULL)
    OR {_INTERFACES_DOMAIN} IS NOT NULL
)"""


def _nodes_in_scope(provider: bool, one_site: bool) -> str:
    """The condition on instance ``i``: a node in scope."""
    scope = (
        "i.site_id = ANY(ARRAY(SELECT s.id FROM site s WHERE s.infrastructure_provider_id = %(provider)s))"
        if provider
        else "i.tenant_id = %(tenant)s"
    )
    return f"{scope}{' AND i.site_id = %(site)s' if one_site else ''} AND {_IS_NODE}"


def placement_count(provider: bool, one_site: bool) -> str:
    """How many nodes there are in scope (``total``)."""
    return f"SELECT count(*) AS total FROM instance i WHERE {_nodes_in_scope(provider, one_site)}"


def placement_page(provider: bool, one_site: bool) -> str:
    """One page of the nodes in scope (``offset``, ``limit``) as PLACEMENT reads them, by name, with the
    count of all (``total``): the GPUs are read for the page's nodes only."""
    # The keys fenced off (MATERIALIZED): else PostgreSQL, expecting few of a deep page's rows, may read
    # the page's instances by walking the whole name index to save sorting 100 rows.
    return f"""
WITH k AS MATERIALIZED (
    SELECT i.id, i.name, count(*) OVER () AS total FROM instance i WHERE {_nodes_in_scope(provider, one_site)}
    ORDER BY i.name, i.id OFFSET %(offset)s LIMIT %(limit)s
)
SELECT p.*, {_GPUS_OF_PLACED}
FROM (
    SELECT {_PLACED_COLUMNS}, k.total
    FROM k
    JOIN instance i ON i.id = k.id
    JOIN site s ON s.id = i.site_id
    LEFT JOIN machine m ON m.instance_id = i.id
) p
ORDER BY p.instance_name, p.instance_id
"""


# The horizon: the oldest running transaction. The events of transactions below it are final (no
# slower transaction can still add an event before them in (txid, id) order).
_HORIZON = "pg_snapshot_xmin(pg_current_snapshot())::text::bigint"
_FINAL = f"e.txid < {_HORIZON}"

# Events after the cursor (``after_txid``, ``after_id``) in scope (scope parameters as PLACEMENT),
# final or not, each with the horizon of the statement's snapshot: the rows before the first one at
# or past it are final; that one's txid is what the stream waits for the horizon to pass.
# An event's columns, with the horizon of the statement's snapshot.
_EVENT_COLUMNS = f"""e.id, e.txid, e.created, e.tenant_id, e.site_id, e.instance_id, e.instance_name,
       e.interface_id, e.device_instance, e.kind, e.domain_uuid, e.logical_partition_id, e.clique_id,
       e.health, {_HORIZON} AS horizon"""
EVENTS_AFTER = f"""
SELECT {_EVENT_COLUMNS}
FROM placement_event e
WHERE (e.txid, e.id) > (%(after_txid)s, %(after_id)s)
  AND (%(tenant)s::uuid IS NULL OR e.tenant_id = %(tenant)s::uuid)
  AND (%(provider)s::uuid IS NULL
       OR e.site_id IN (SELECT s.id FROM site s WHERE s.infrastructure_provider_id = %(provider)s::uuid))
  AND (%(site)s::uuid IS NULL OR e.site_id = %(site)s::uuid)
ORDER BY e.txid, e.id
LIMIT %(limit)s
"""

_EVENTS_IN_RANGE = f"""
SELECT {_EVENT_COLUMNS}
FROM placement_event e
WHERE e.{{key}} = %({{value}})s
  AND (e.{{key}}, e.txid, e.id) > (%({{value}})s, %(after_txid)s, %(after_id)s){{rest}}
ORDER BY e.{{key}}, e.txid, e.id
LIMIT %(limit)s
"""
_OF_PROVIDER = (
    "\n  AND e.site_id IN (SELECT s.id FROM site s WHERE s.infrastructure_provider_id = %(provider)s::uuid)"
)


def events_after(*, tenant: bool, provider: bool, site: bool) -> str:
    """``EVENTS_AFTER`` for a scope of a tenant (``tenant``), or of a site (``site`` without
    ``tenant``), as a range of that scope's index ((tenant_id, txid, id), (site_id, txid, id)) with the
    scope's other filters, and only those: a statement whose best plan is the same for any values, so
    PostgreSQL settles on its generic plan after the fifth read on a connection. ``EVENTS_AFTER``'s
    optional filters make a plan for the values at hand always look better to it: every read of a
    stream was planned again (0.25 ms of its CPU). Any other scope reads ``EVENTS_AFTER``."""
    if tenant:
        key, value = "tenant_id", "tenant"
        rest = ("\n  AND e.site_id = %(site)s" if site else "") + (_OF_PROVIDER if provider else "")
    elif site:
        key, value, rest = "site_id", "site", _OF_PROVIDER if provider else ""
    else:
        return EVENTS_AFTER
    return _EVENTS_IN_RANGE.format(key=key, value=value, rest=rest)


# An event ``b`` of a read as the stream sends it: ``id: <txid>-<id>``, ``event: placement`` and its
# body as compact JSON in the wire's key order (docs/schedulers.md; ``nvLinkHealth`` only on a health
# event), ``time`` as Python's ``isoformat`` writes a timestamptz read in the session's time zone
# (``.ffffff`` only when not 0). Text goes through ``to_json``, which writes printable ASCII as
# ``json.dumps`` does; the stream writes a body holding anything else again in Python
# (``feed_stream.as_python_writes``; tests/api/test_feed_text.py holds the two to the same bytes).
_JSON_TEXT = "coalesce(to_json({})::text, 'null')"
_ISO_TIME = "replace(to_char(b.created, 'YYYY-MM-DD\"T\"HH24:MI:SS.USTZH:TZM'), '.000000', '')"
_EVENT_TEXT = f"""concat(
    'id: ', b.txid, '-', b.id, E'\\nevent: placement\\ndata: {{"kind":', {_JSON_TEXT.format("b.kind")},
    ',"time":"', {_ISO_TIME}, '","instanceId":"', b.instance_id,
    '","instanceName":', {_JSON_TEXT.format("b.instance_name")},
    ',"nvLinkInterfaceId":"', b.interface_id, '","deviceInstance":', b.device_instance,
    ',"siteId":"', b.site_id, '","nvLinkDomainId":', {_JSON_TEXT.format("b.domain_uuid")},
    ',"nvLinkLogicalPartitionId":"', b.logical_partition_id,
    '","nvLinkCliqueId":', {_JSON_TEXT.format("b.clique_id")},
    CASE WHEN b.health IS NOT NULL THEN ',"nvLinkHealth":' || to_json(b.health)::text END,
    E'}}\\n\\n')"""


def event_text_after(*, tenant: bool, provider: bool, site: bool) -> str:
    """One read of a stream, as one row: the SSE text of the events of :func:`events_after` that are
    final (below the statement's horizon: a prefix of the read, which is in (txid, id) order) as
    ``text``, the cursor of the last of them (``last``: [txid, id]), the txid of the first event not
    final yet (``pending``) and how many events were read (``read``: a full batch may have more after
    it). PostgreSQL writes the text: the stream builds no object per event."""
    return f"""
SELECT string_agg({_EVENT_TEXT}, '' ORDER BY b.txid, b.id) FILTER (WHERE b.txid < b.horizon) AS text,
       max(ARRAY[b.txid, b.id]) FILTER (WHERE b.txid < b.horizon) AS last,
       min(b.txid) FILTER (WHERE b.txid >= b.horizon) AS pending,
       count(*) AS read
FROM ({events_after(tenant=tenant, provider=provider, site=site)}) b
"""


# The horizon now (a stream's events at txids below it have become final).
HORIZON = f"SELECT {_HORIZON} AS horizon"

# Where a new stream starts: after the newest final event, or before the oldest running transaction.
START = f"""
SELECT coalesce(
    (SELECT ARRAY[e.txid, e.id] FROM placement_event e WHERE {_FINAL}
     ORDER BY e.txid DESC, e.id DESC LIMIT 1),
    ARRAY[{_HORIZON} - 1, 0]
) AS cursor
"""

# Whether a resumed cursor's event is still kept (if it was pruned, its successors may be too).
CURSOR_KEPT = "SELECT EXISTS (SELECT 1 FROM placement_event WHERE txid = %(txid)s AND id = %(id)s) AS kept"

PRUNE = """
WITH pruned AS (
    DELETE FROM placement_event WHERE created < now() - make_interval(secs => %(seconds)s) RETURNING 1
)
SELECT count(*) AS pruned FROM pruned
"""

CHANNEL = "nico_placement"

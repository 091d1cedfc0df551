"""Placement notifications name their audience: the (tenant, site) pairs of the events logged

Every placement event NOTIFYed ``nico_placement`` with an empty payload, so each API process woke
every open event stream on every change: with 16 tenants streaming, 15 of the 16 reads a change
caused found nothing for their reader (2,061 empty reads against 241 with rows for 112 instances in
``benchmarks/convergence_bench.py``), and each empty read was retried while the horizon settled. The
statement trigger of 0010 now sends, as the payload, the distinct ``<tenant>:<site>`` pairs of the
events it logged (comma-separated; an event without a tenant gives an empty tenant). A payload that
would not fit PostgreSQL's 8,000-byte limit stays empty, which listeners read as "everyone".

Revision ID: 0011
Revises: 0010
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

from nico.db.migrate import sibling_revision

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

AUDIENCE_LIMIT = 7000  # bytes of payload; NOTIFY refuses 8,000 and more


def _function() -> str:
    base = sibling_revision(__file__, "0010")
    logged = """
        WITH logged AS ({insert}
            RETURNING tenant_id, site_id)
        SELECT string_agg(DISTINCT coalesce(logged.tenant_id::text, '') || ':' || logged.site_id::text, ',')
        INTO audience FROM logged;"""
    insert = base._EVENTS_OF.strip().rstrip(";")
    return f"""
CREATE OR REPLACE FUNCTION nico_placement_events_of_interfaces() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    audience text;
BEGIN
    IF TG_OP = 'INSERT' THEN
        {logged.format(insert=insert.format(rows=base._INSERTED))}
    ELSIF TG_OP = 'UPDATE' THEN
        {logged.format(insert=insert.format(rows=base._UPDATED))}
    ELSE
        {logged.format(insert=insert.format(rows=base._DELETED))}
    END IF;
    IF audience IS NOT NULL THEN
        PERFORM pg_notify('nico_placement',
                          CASE WHEN octet_length(audience) <= {AUDIENCE_LIMIT} THEN audience ELSE '' END);
    END IF;
    RETURN NULL;
END
$$
"""


def upgrade() -> None:
    op.execute(_function())


def downgrade() -> None:
    base = sibling_revision(__file__, "0010")
    op.execute(base.INTERFACE_EVENTS.replace("CREATE FUNCTION", "CREATE OR REPLACE FUNCTION", 1))

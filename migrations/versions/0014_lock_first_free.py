"""nico_lock_free_machines_first(): a request that loses its domain takes the next one in the same statement

Placement ranks the domains that can take a whole request and a create locks the first
(``nico_lock_free_machines``, migration 0013). Requests that arrive together rank alike: best fit sends
them all to the one fragment with the fewest free machines, a few get their machines there and the
rest come up short. Each then went back to the server to choose again, and often lost the next race
too: with 16 clients creating batches of 4 on 16 racks, a batch took 2.5 picks on average and up to 6,
each a round trip on a busy server.

This function takes the ranked domains and the count, and locks that many machines in the first
domain that still has them, trying each in its own block with an exception handler (a subtransaction):
a domain that comes up short is rolled back, its locks with it, and the next one is tried. It answers
the machines it locked, or, when every domain came up short, what each gave, as 0013's does. Same pick
(contiguous trays first, through ix_machine_placement) as 0013's.

Revision ID: 0014
Revises: 0013
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

from nico.db.migrate import sibling_revision

revision: str = "0014"
down_revision: str | None = "0013"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_PICK = sibling_revision(__file__, "0013")._PICK.format(
    domain="m.domain_uuid = p_domains[i]", limit="p_count"
)

FUNCTION = f"""
CREATE FUNCTION nico_lock_free_machines_first(p_site uuid, p_type uuid, p_domains uuid[], p_count integer)
RETURNS TABLE (machine_id varchar, machine_domain uuid, short_got integer)
LANGUAGE plpgsql AS $$
DECLARE
    i integer;
    these varchar[];
    these_domains uuid[];
    shorts uuid[] := '{{}}';
    gave integer[] := '{{}}';
BEGIN
    FOR i IN 1 .. coalesce(array_length(p_domains, 1), 0) LOOP
        BEGIN{_PICK}
            IF coalesce(array_length(these, 1), 0) = p_count THEN
                RETURN QUERY SELECT p.id, p.d, NULL::integer FROM unnest(these, these_domains) AS p(id, d);
                RETURN;
            END IF;
            RAISE EXCEPTION 'short pick' USING ERRCODE = 'NC001';
        EXCEPTION WHEN SQLSTATE 'NC001' THEN
            -- The block is rolled back, and its locks with it: note what the domain gave, try the next.
            shorts := array_append(shorts, p_domains[i]);
            gave := array_append(gave, coalesce(array_length(these, 1), 0));
        END;
    END LOOP;
    RETURN QUERY SELECT NULL::varchar, s.d, s.g FROM unnest(shorts, gave) AS s(d, g);
END
$$
"""


def upgrade() -> None:
    op.execute(FUNCTION)


def downgrade() -> None:
    op.execute("DROP FUNCTION nico_lock_free_machines_first(uuid, uuid, uuid[], integer)")

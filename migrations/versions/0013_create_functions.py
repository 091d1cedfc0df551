"""Creates: free machines picked all or nothing in one statement, the quota checked with the commit

1. nico_lock_free_machines().

A create locks the machines placement chose with ``FOR UPDATE SKIP LOCKED``, domain by domain; when a
domain gave fewer (another request holds some), the partial pick had to be released before placement
chose again: a ``SAVEPOINT`` before the first pick and a ``ROLLBACK TO SAVEPOINT`` after a short one,
two round trips more. Worse, psycopg forgets every statement it has prepared on a connection when it
sees a ROLLBACK (the savepoint's included), so each lost race cost the next requests on that
connection their prepared statements: with 16 clients creating batches on 16 racks, 117 of 120
batches lost a race at least once, and nearly every statement of every batch was parsed and planned
again (``benchmarks/api_bench.py --scenarios d``).

The function picks every domain of the plan in a PL/pgSQL block with an exception handler (a
subtransaction inside the statement): when any domain comes up short, the block is rolled back, which
releases its locks, and the function answers how many each short domain gave instead. Same query,
same order (contiguous trays first), same index as before.

2. nico_check_quota(). A create checks its tenant's quota last, under the lock of the reservations
(``FOR UPDATE`` on its allocation constraints), and holds that lock to its commit: every create of
the tenant waits for it. The lock, the count and the verdict were one round trip and the commit
another, with the request's Python in between; 16 clients of one tenant spent 29 ms of each batch
waiting for it. The function locks, counts and raises (SQLSTATE NC002: no allocation; NC003: over, with
"count/reserved" as its detail) in one statement, which goes out with the COMMIT: the lock is held
for what the server does between the two, not for a round trip.

Revision ID: 0013
Revises: 0012
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0013"
down_revision: str | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# ``=`` / ``IS NULL`` rather than ``IS NOT DISTINCT FROM``: only these reach the domain through
# ix_machine_placement, so a pick reads one domain's machines, not the site's.
_PICK = """
                SELECT coalesce(array_agg(s.id ORDER BY s.chassis_serial, s.tray_index, s.id), '{{}}'),
                       coalesce(array_agg(s.domain_uuid ORDER BY s.chassis_serial, s.tray_index, s.id), '{{}}')
                INTO these, these_domains
                FROM (SELECT m.id, m.domain_uuid, m.chassis_serial, m.tray_index FROM machine m
                      WHERE m.site_id = p_site AND m.instance_type_id = p_type AND {domain}
                        AND m.instance_id IS NULL AND m.status = 'Ready' AND NOT m.is_missing_on_site
                      ORDER BY m.chassis_serial, m.tray_index, m.id
                      LIMIT {limit}
                      FOR UPDATE SKIP LOCKED) s;"""

FUNCTION = f"""
CREATE FUNCTION nico_lock_free_machines(p_site uuid, p_type uuid, p_domains uuid[], p_counts integer[])
RETURNS TABLE (machine_id varchar, machine_domain uuid, short_got integer)
LANGUAGE plpgsql AS $$
DECLARE
    i integer;
    these varchar[];
    these_domains uuid[];
    picked varchar[] := '{{}}';
    picked_domains uuid[] := '{{}}';
    shorts uuid[] := '{{}}';
    gave integer[] := '{{}}';
BEGIN
    BEGIN
        FOR i IN 1 .. coalesce(array_length(p_domains, 1), 0) LOOP
            IF p_domains[i] IS NULL THEN{_PICK.format(domain="m.domain_uuid IS NULL", limit="p_counts[i]")}
            ELSE{_PICK.format(domain="m.domain_uuid = p_domains[i]", limit="p_counts[i]")}
            END IF;
            IF coalesce(array_length(these, 1), 0) < p_counts[i] THEN
                shorts := array_append(shorts, p_domains[i]);
                gave := array_append(gave, coalesce(array_length(these, 1), 0));
            END IF;
            picked := picked || these;
            picked_domains := picked_domains || these_domains;
        END LOOP;
        IF coalesce(array_length(shorts, 1), 0) > 0 THEN
            RAISE EXCEPTION 'short pick' USING ERRCODE = 'NC001';
        END IF;
    EXCEPTION WHEN SQLSTATE 'NC001' THEN
        -- The block is rolled back, and its locks with it: say what each short domain gave.
        RETURN QUERY SELECT NULL::varchar, s.d, s.g FROM unnest(shorts, gave) AS s(d, g);
        RETURN;
    END;
    RETURN QUERY SELECT p.id, p.d, NULL::integer FROM unnest(picked, picked_domains) AS p(id, d);
END
$$
"""


# The count's snapshot follows the lock (each statement of a function takes its own at READ
# COMMITTED): it holds the instances of every create that held the lock before this one.
QUOTA = """
CREATE FUNCTION nico_check_quota(p_tenant uuid, p_type uuid) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    value integer;
    locked integer := 0;
    reserved bigint := 0;
    counted bigint;
BEGIN
    FOR value IN
        SELECT ac.constraint_value FROM allocation_constraint ac JOIN allocation a ON a.id = ac.allocation_id
        WHERE a.tenant_id = p_tenant AND ac.instance_type_id = p_type
        ORDER BY ac.id
        FOR UPDATE OF ac
    LOOP
        locked := locked + 1;
        reserved := reserved + value;
    END LOOP;
    IF locked = 0 THEN
        RAISE EXCEPTION 'no allocation' USING ERRCODE = 'NC002';
    END IF;
    SELECT count(*) INTO counted FROM instance WHERE tenant_id = p_tenant AND instance_type_id = p_type;
    IF counted > reserved THEN
        RAISE EXCEPTION 'quota exceeded' USING ERRCODE = 'NC003', DETAIL = counted || '/' || reserved;
    END IF;
END
$$
"""


def upgrade() -> None:
    op.execute(FUNCTION)
    op.execute(QUOTA)


def downgrade() -> None:
    op.execute("DROP FUNCTION nico_check_quota(uuid, uuid)")
    op.execute("DROP FUNCTION nico_lock_free_machines(uuid, uuid, uuid[], integer[])")

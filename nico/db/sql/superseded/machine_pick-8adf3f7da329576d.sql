-- The machine pick: lock free machines of an instance type for a create, contiguous trays first,
-- skipping machines other transactions hold (FOR UPDATE SKIP LOCKED), in one statement.
--
-- nico_lock_free_machines(site, type, domains[], counts[]): counts[i] machines in each domains[i]
--   (a null domain: machines without one), all or nothing. When any domain comes up short, the
--   block is rolled back (a subtransaction inside the statement, so no SAVEPOINT round trip and no
--   ROLLBACK that makes psycopg forget its prepared statements) and the rows say what each short
--   domain gave: (null, domain, gave).
-- nico_lock_free_machines_first(site, type, domains[], count): the whole count in the first of the
--   ranked domains that still has it; each domain is tried in its own block, so one that comes up
--   short keeps none of its locks. When every domain comes up short, the rows say what each gave.
-- Both answer (machine_id, machine_domain, null) per machine locked.
--
-- Machines a logical partition's reservation holds (reserved_lp_id) are never picked here: the
-- partition's own creates take them first, by a plain FOR UPDATE SKIP LOCKED read
-- (nico/instance/queries.py, lock_reserved_machines).
--
-- `=` / `IS NULL` rather than `IS NOT DISTINCT FROM`: only these reach the domain through
-- ix_machine_placement, so a pick reads one domain's machines, not the site's.
--
-- Called by: nico/instance/queries.py (lock_free_machines, lock_first_free), when a create
-- claims the machines placement chose.
-- Made by migrations 0013 and 0014; last changed by migration 0017 (reserved machines left out;
-- 0016: machines with GPUs in a partition nico did not make are skipped).

CREATE OR REPLACE FUNCTION nico_lock_free_machines(p_site uuid, p_type uuid, p_domains uuid[], p_counts integer[])
RETURNS TABLE (machine_id varchar, machine_domain uuid, short_got integer)
LANGUAGE plpgsql AS $$
DECLARE
    i integer;
    these varchar[];
    these_domains uuid[];
    picked varchar[] := '{}';
    picked_domains uuid[] := '{}';
    shorts uuid[] := '{}';
    gave integer[] := '{}';
BEGIN
    BEGIN
        FOR i IN 1 .. coalesce(array_length(p_domains, 1), 0) LOOP
            IF p_domains[i] IS NULL THEN
                SELECT coalesce(array_agg(s.id ORDER BY s.chassis_serial, s.tray_index, s.id), '{}'),
                       coalesce(array_agg(s.domain_uuid ORDER BY s.chassis_serial, s.tray_index, s.id), '{}')
                INTO these, these_domains
                FROM (SELECT m.id, m.domain_uuid, m.chassis_serial, m.tray_index FROM machine m
                      WHERE m.site_id = p_site AND m.instance_type_id = p_type AND m.domain_uuid IS NULL
                        AND m.instance_id IS NULL AND m.status = 'Ready' AND NOT m.is_missing_on_site
                        AND m.foreign_gpus = 0  -- held by a foreign partition: never placed
                        AND m.reserved_lp_id IS NULL
                      ORDER BY m.chassis_serial, m.tray_index, m.id
                      LIMIT p_counts[i]
                      FOR UPDATE SKIP LOCKED) s;
            ELSE
                SELECT coalesce(array_agg(s.id ORDER BY s.chassis_serial, s.tray_index, s.id), '{}'),
                       coalesce(array_agg(s.domain_uuid ORDER BY s.chassis_serial, s.tray_index, s.id), '{}')
                INTO these, these_domains
                FROM (SELECT m.id, m.domain_uuid, m.chassis_serial, m.tray_index FROM machine m
                      WHERE m.site_id = p_site AND m.instance_type_id = p_type AND m.domain_uuid = p_domains[i]
                        AND m.instance_id IS NULL AND m.status = 'Ready' AND NOT m.is_missing_on_site
                        AND m.foreign_gpus = 0  -- held by a foreign partition: never placed
                        AND m.reserved_lp_id IS NULL
                      ORDER BY m.chassis_serial, m.tray_index, m.id
                      LIMIT p_counts[i]
                      FOR UPDATE SKIP LOCKED) s;
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
$$;

CREATE OR REPLACE FUNCTION nico_lock_free_machines_first(p_site uuid, p_type uuid, p_domains uuid[], p_count integer)
RETURNS TABLE (machine_id varchar, machine_domain uuid, short_got integer)
LANGUAGE plpgsql AS $$
DECLARE
    i integer;
    these varchar[];
    these_domains uuid[];
    shorts uuid[] := '{}';
    gave integer[] := '{}';
BEGIN
    FOR i IN 1 .. coalesce(array_length(p_domains, 1), 0) LOOP
        BEGIN
            SELECT coalesce(array_agg(s.id ORDER BY s.chassis_serial, s.tray_index, s.id), '{}'),
                   coalesce(array_agg(s.domain_uuid ORDER BY s.chassis_serial, s.tray_index, s.id), '{}')
            INTO these, these_domains
            FROM (SELECT m.id, m.domain_uuid, m.chassis_serial, m.tray_index FROM machine m
                  WHERE m.site_id = p_site AND m.instance_type_id = p_type AND m.domain_uuid = p_domains[i]
                    AND m.instance_id IS NULL AND m.status = 'Ready' AND NOT m.is_missing_on_site
                    AND m.foreign_gpus = 0  -- held by a foreign partition: never placed
                    AND m.reserved_lp_id IS NULL
                  ORDER BY m.chassis_serial, m.tray_index, m.id
                  LIMIT p_count
                  FOR UPDATE SKIP LOCKED) s;
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
$$;

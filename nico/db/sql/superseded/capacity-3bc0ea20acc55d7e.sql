-- Domain capacity: free and used machines per (site, instance type, NVLink domain) in table
-- domain_capacity, kept equal to a recount of the machine table by triggers, so that placement reads
-- per-domain rows instead of counting a site's machines per request.
--
-- A machine counts as free (Ready, unassigned, present, held by no logical partition's reservation
-- and none of its GPUs in a partition nico did not make: machine.foreign_gpus, set by the reconciler)
-- or used (assigned) under its (site, type, domain); a reserved machine without an instance counts as
-- neither, so placement never plans on it for others; machines without a type count nowhere;
-- machines without a domain count under the zero uuid. The statement triggers
-- domain_capacity_collect_{insert,update,delete} on machine sum a
-- statement's changes per key into domain_capacity_delta (unlogged: its rows live only inside the
-- transaction that wrote them), one row per key that moved, in key order. The constraint trigger
-- domain_capacity_apply on that table, deferred to the commit, adds each row to domain_capacity
-- through domain_capacity_add and deletes it: a create's lock on its domain's counter row is held
-- only while it commits, once per domain and statement.
--
-- Called by: the triggers, on every write of the machine table (assign, free, register, remove,
-- change). domain_capacity is read by nico/instance/queries.py (the capacity sample).
-- Made by migrations 0009 and 0010; last changed by migration 0017 (reserved machines are not free;
-- 0016: nor are machines held by foreign partitions).

CREATE OR REPLACE FUNCTION domain_capacity_add(site uuid, itype uuid, domain uuid, free_delta int, used_delta int)
RETURNS void LANGUAGE sql AS $$
    INSERT INTO domain_capacity AS c (site_id, instance_type_id, domain_uuid, free, used)
    VALUES (site, itype, domain, free_delta, used_delta)
    ON CONFLICT (site_id, instance_type_id, domain_uuid)
    DO UPDATE SET free = c.free + excluded.free, used = c.used + excluded.used
$$;

CREATE OR REPLACE FUNCTION domain_capacity_collect() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO domain_capacity_delta (site_id, instance_type_id, domain_uuid, free, used)
        SELECT d.site_id, d.instance_type_id, d.domain_uuid, sum(d.free), sum(d.used)
        FROM (
            SELECT x.site_id, x.instance_type_id,
                   coalesce(x.domain_uuid, '00000000-0000-0000-0000-000000000000'::uuid) AS domain_uuid,
                   (x.instance_id IS NULL AND x.status = 'Ready' AND NOT x.is_missing_on_site
                     AND x.reserved_lp_id IS NULL AND x.foreign_gpus = 0)::int AS free,
                   (x.instance_id IS NOT NULL)::int AS used
            FROM new_rows x WHERE x.instance_type_id IS NOT NULL) d
        GROUP BY d.site_id, d.instance_type_id, d.domain_uuid
        HAVING sum(d.free) <> 0 OR sum(d.used) <> 0
        ORDER BY d.site_id, d.instance_type_id, d.domain_uuid;
    ELSIF TG_OP = 'UPDATE' THEN
        INSERT INTO domain_capacity_delta (site_id, instance_type_id, domain_uuid, free, used)
        SELECT d.site_id, d.instance_type_id, d.domain_uuid, sum(d.free), sum(d.used)
        FROM (
            SELECT x.site_id, x.instance_type_id,
                   coalesce(x.domain_uuid, '00000000-0000-0000-0000-000000000000'::uuid) AS domain_uuid,
                   - (x.instance_id IS NULL AND x.status = 'Ready' AND NOT x.is_missing_on_site
                     AND x.reserved_lp_id IS NULL AND x.foreign_gpus = 0)::int AS free,
                   - (x.instance_id IS NOT NULL)::int AS used
            FROM old_rows x WHERE x.instance_type_id IS NOT NULL
            UNION ALL
            SELECT x.site_id, x.instance_type_id,
                   coalesce(x.domain_uuid, '00000000-0000-0000-0000-000000000000'::uuid) AS domain_uuid,
                   (x.instance_id IS NULL AND x.status = 'Ready' AND NOT x.is_missing_on_site
                     AND x.reserved_lp_id IS NULL AND x.foreign_gpus = 0)::int AS free,
                   (x.instance_id IS NOT NULL)::int AS used
            FROM new_rows x WHERE x.instance_type_id IS NOT NULL) d
        GROUP BY d.site_id, d.instance_type_id, d.domain_uuid
        HAVING sum(d.free) <> 0 OR sum(d.used) <> 0
        ORDER BY d.site_id, d.instance_type_id, d.domain_uuid;
    ELSE
        INSERT INTO domain_capacity_delta (site_id, instance_type_id, domain_uuid, free, used)
        SELECT d.site_id, d.instance_type_id, d.domain_uuid, sum(d.free), sum(d.used)
        FROM (
            SELECT x.site_id, x.instance_type_id,
                   coalesce(x.domain_uuid, '00000000-0000-0000-0000-000000000000'::uuid) AS domain_uuid,
                   - (x.instance_id IS NULL AND x.status = 'Ready' AND NOT x.is_missing_on_site
                     AND x.reserved_lp_id IS NULL AND x.foreign_gpus = 0)::int AS free,
                   - (x.instance_id IS NOT NULL)::int AS used
            FROM old_rows x WHERE x.instance_type_id IS NOT NULL) d
        GROUP BY d.site_id, d.instance_type_id, d.domain_uuid
        HAVING sum(d.free) <> 0 OR sum(d.used) <> 0
        ORDER BY d.site_id, d.instance_type_id, d.domain_uuid;
    END IF;
    RETURN NULL;
END
$$;

CREATE OR REPLACE FUNCTION domain_capacity_apply() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM domain_capacity_add(NEW.site_id, NEW.instance_type_id, NEW.domain_uuid, NEW.free, NEW.used);
    DELETE FROM domain_capacity_delta WHERE id = NEW.id;
    RETURN NULL;
END
$$;

-- One trigger per event: a trigger with transition tables takes no column list, and each event has
-- its own tables.
DROP TRIGGER IF EXISTS domain_capacity_collect_insert ON machine;
CREATE TRIGGER domain_capacity_collect_insert AFTER INSERT ON machine
REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION domain_capacity_collect();

DROP TRIGGER IF EXISTS domain_capacity_collect_update ON machine;
CREATE TRIGGER domain_capacity_collect_update AFTER UPDATE ON machine
REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION domain_capacity_collect();

DROP TRIGGER IF EXISTS domain_capacity_collect_delete ON machine;
CREATE TRIGGER domain_capacity_collect_delete AFTER DELETE ON machine
REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION domain_capacity_collect();

-- Deferred to the commit: a create's lock on its domain's counter row is held only while it commits.
DROP TRIGGER IF EXISTS domain_capacity_apply ON domain_capacity_delta;
CREATE CONSTRAINT TRIGGER domain_capacity_apply AFTER INSERT ON domain_capacity_delta
DEFERRABLE INITIALLY DEFERRED
FOR EACH ROW EXECUTE FUNCTION domain_capacity_apply();

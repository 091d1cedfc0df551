-- Instances per (tenant, instance type) in table instance_type_count, kept equal to a recount of the
-- instance table by triggers, so that a create's quota check and creation context read one row
-- instead of counting every instance of the tenant (tens of thousands at the largest sites).
--
-- The statement triggers instance_type_count_{insert,delete} on instance sum a statement's changes
-- per key (instances without a type count nowhere, as count(*) WHERE instance_type_id = x
-- never matched them) and add them to the counter rows directly, in key order (two statements that
-- move several keys lock them in one order), not deferred: the quota check, later in the same
-- transaction, must see its own instances. A create's INSERT is sent with its COMMIT, in the round
-- trip that also takes the allocation lock (nico_check_quota), so creates of one tenant and type
-- already take turns for that window: the counter row's lock adds no new wait among them. Two
-- racing creates are exact twice over: the second's update waits for the first's commit and adds to
-- its count (READ COMMITTED re-reads the row it waited for).
--
-- Called by: the triggers, on every write of the instance table (creates, batch creates, deletes,
-- admin changes). instance_type_count is read by quota.sql and creation_context.sql.
-- Made by migration 0026; last changed by migration 0026.

CREATE OR REPLACE FUNCTION instance_type_count_collect() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO instance_type_count AS c (tenant_id, instance_type_id, instances)
        SELECT n.tenant_id, n.instance_type_id, count(*) FROM new_rows n
        WHERE n.instance_type_id IS NOT NULL
        GROUP BY n.tenant_id, n.instance_type_id ORDER BY n.tenant_id, n.instance_type_id
        ON CONFLICT (tenant_id, instance_type_id) DO UPDATE SET instances = c.instances + excluded.instances;
    ELSIF TG_OP = 'DELETE' THEN
        INSERT INTO instance_type_count AS c (tenant_id, instance_type_id, instances)
        SELECT o.tenant_id, o.instance_type_id, -count(*) FROM old_rows o
        WHERE o.instance_type_id IS NOT NULL
        GROUP BY o.tenant_id, o.instance_type_id ORDER BY o.tenant_id, o.instance_type_id
        ON CONFLICT (tenant_id, instance_type_id) DO UPDATE SET instances = c.instances + excluded.instances;
    END IF;
    RETURN NULL;
END
$$;

-- An instance whose tenant or type changed moves from one count to the other, in key order. A row
-- trigger whose WHEN is false costs nothing: the reconciler's many updates of an instance's status
-- and versions run no trigger (a statement trigger with transition tables would run for each).
CREATE OR REPLACE FUNCTION instance_type_count_move() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO instance_type_count AS c (tenant_id, instance_type_id, instances)
    SELECT d.tenant_id, d.instance_type_id, d.moved
    FROM (VALUES (OLD.tenant_id, OLD.instance_type_id, -1), (NEW.tenant_id, NEW.instance_type_id, 1))
         AS d (tenant_id, instance_type_id, moved)
    WHERE d.instance_type_id IS NOT NULL
    ORDER BY d.tenant_id, d.instance_type_id
    ON CONFLICT (tenant_id, instance_type_id) DO UPDATE SET instances = c.instances + excluded.instances;
    RETURN NULL;
END
$$;

DROP TRIGGER IF EXISTS instance_type_count_insert ON instance;
CREATE TRIGGER instance_type_count_insert AFTER INSERT ON instance
REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION instance_type_count_collect();

DROP TRIGGER IF EXISTS instance_type_count_update ON instance;
CREATE TRIGGER instance_type_count_update AFTER UPDATE OF tenant_id, instance_type_id ON instance
FOR EACH ROW WHEN (OLD.tenant_id IS DISTINCT FROM NEW.tenant_id
                   OR OLD.instance_type_id IS DISTINCT FROM NEW.instance_type_id)
EXECUTE FUNCTION instance_type_count_move();

DROP TRIGGER IF EXISTS instance_type_count_delete ON instance;
CREATE TRIGGER instance_type_count_delete AFTER DELETE ON instance
REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION instance_type_count_collect();

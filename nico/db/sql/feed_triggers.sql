-- The scheduler feed's triggers: every change to where an NVLink interface (a binding) is, and every
-- change to the physical partition under Ready interfaces, appends rows to table placement_event (the
-- feed's event log) and NOTIFYs channel nico_placement, in the writing transaction, so every API
-- replica streams the same ordered events whichever process made the change.
--
-- nico_placement_events_of_interfaces(), run once per statement on nvlink_interface by
-- trg_placement_events_{insert,update,delete} over the statement's transition tables: one event per
-- changed binding, in the statement's row order (an update that changes none of status, domain and
-- logical partition gives none), with the tenant of the logical partition, the instance name, the
-- binding's domain or else its machine's, and the clique id (<domain uuid>.<NMX partition id>) of a
-- Ready binding. The lookups are correlated subqueries on unique keys: index probes whatever the
-- planner believes of the tables' sizes (the plan is cached for the connection's life). The NOTIFY
-- payload names its audience, the distinct "<tenant>:<site>" pairs of the events logged
-- (comma-separated, an empty tenant for an event without one); a payload over 7,000 bytes (NOTIFY
-- refuses 8,000) is sent empty, which listeners read as "everyone".
-- nico_placement_event_partition(), run per row on physical_partition by
-- trg_placement_event_partition: a partition created, renumbered or removed changes the clique id of
-- its Ready bindings, so each gets an event (with an empty payload NOTIFY).
-- Rows carry the writing transaction's id: readers take them in (txid, id) order.
--
-- Called by: the triggers. placement_event is read by nico/db/queries/feed.py; nico_placement is
-- listened to by nico/services/feed_stream.py.
-- Made by migrations 0005, 0008, 0010 and 0011; last changed by migration 0015 (its text moved here).

CREATE OR REPLACE FUNCTION nico_placement_events_of_interfaces() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    audience text;
BEGIN
    IF TG_OP = 'INSERT' THEN
        WITH logged AS (
            INSERT INTO placement_event (txid, tenant_id, site_id, instance_id, instance_name, interface_id,
                                         device_instance, kind, domain_uuid, logical_partition_id, clique_id)
            SELECT pg_current_xact_id()::text::bigint,
                   (SELECT lp.tenant_id FROM logical_partition lp WHERE lp.id = r.logical_partition_id),
                   r.site_id, r.instance_id, (SELECT i.name FROM instance i WHERE i.id = r.instance_id), r.id,
                   r.device_instance, r.kind,
                   coalesce(r.domain_uuid, (SELECT m.domain_uuid FROM machine m WHERE m.instance_id = r.instance_id LIMIT 1)),
                   r.logical_partition_id,
                   CASE WHEN r.kind = 'Ready' AND r.domain_uuid IS NOT NULL THEN (
                       SELECT r.domain_uuid::text || '.' || p.nmx_partition_id::text FROM physical_partition p
                       WHERE p.logical_partition_id = r.logical_partition_id AND p.domain_uuid = r.domain_uuid) END
            FROM (SELECT n.*, n.status AS kind, row_number() OVER () AS k FROM new_rows n) r
            ORDER BY r.k
            RETURNING tenant_id, site_id)
        SELECT string_agg(DISTINCT coalesce(logged.tenant_id::text, '') || ':' || logged.site_id::text, ',')
        INTO audience FROM logged;
    ELSIF TG_OP = 'UPDATE' THEN
        WITH logged AS (
            INSERT INTO placement_event (txid, tenant_id, site_id, instance_id, instance_name, interface_id,
                                         device_instance, kind, domain_uuid, logical_partition_id, clique_id)
            SELECT pg_current_xact_id()::text::bigint,
                   (SELECT lp.tenant_id FROM logical_partition lp WHERE lp.id = r.logical_partition_id),
                   r.site_id, r.instance_id, (SELECT i.name FROM instance i WHERE i.id = r.instance_id), r.id,
                   r.device_instance, r.kind,
                   coalesce(r.domain_uuid, (SELECT m.domain_uuid FROM machine m WHERE m.instance_id = r.instance_id LIMIT 1)),
                   r.logical_partition_id,
                   CASE WHEN r.kind = 'Ready' AND r.domain_uuid IS NOT NULL THEN (
                       SELECT r.domain_uuid::text || '.' || p.nmx_partition_id::text FROM physical_partition p
                       WHERE p.logical_partition_id = r.logical_partition_id AND p.domain_uuid = r.domain_uuid) END
            FROM (
                SELECT n.*, n.status AS kind FROM (SELECT n.*, row_number() OVER () AS k FROM new_rows n) n
                JOIN old_rows o ON o.id = n.id
                WHERE n.status IS DISTINCT FROM o.status OR n.domain_uuid IS DISTINCT FROM o.domain_uuid
                   OR n.logical_partition_id IS DISTINCT FROM o.logical_partition_id) r
            ORDER BY r.k
            RETURNING tenant_id, site_id)
        SELECT string_agg(DISTINCT coalesce(logged.tenant_id::text, '') || ':' || logged.site_id::text, ',')
        INTO audience FROM logged;
    ELSE
        WITH logged AS (
            INSERT INTO placement_event (txid, tenant_id, site_id, instance_id, instance_name, interface_id,
                                         device_instance, kind, domain_uuid, logical_partition_id, clique_id)
            SELECT pg_current_xact_id()::text::bigint,
                   (SELECT lp.tenant_id FROM logical_partition lp WHERE lp.id = r.logical_partition_id),
                   r.site_id, r.instance_id, (SELECT i.name FROM instance i WHERE i.id = r.instance_id), r.id,
                   r.device_instance, r.kind,
                   coalesce(r.domain_uuid, (SELECT m.domain_uuid FROM machine m WHERE m.instance_id = r.instance_id LIMIT 1)),
                   r.logical_partition_id,
                   CASE WHEN r.kind = 'Ready' AND r.domain_uuid IS NOT NULL THEN (
                       SELECT r.domain_uuid::text || '.' || p.nmx_partition_id::text FROM physical_partition p
                       WHERE p.logical_partition_id = r.logical_partition_id AND p.domain_uuid = r.domain_uuid) END
            FROM (SELECT o.*, 'Removed'::text AS kind, row_number() OVER () AS k FROM old_rows o) r
            ORDER BY r.k
            RETURNING tenant_id, site_id)
        SELECT string_agg(DISTINCT coalesce(logged.tenant_id::text, '') || ':' || logged.site_id::text, ',')
        INTO audience FROM logged;
    END IF;
    IF audience IS NOT NULL THEN
        PERFORM pg_notify('nico_placement',
                          CASE WHEN octet_length(audience) <= 7000 THEN audience ELSE '' END);
    END IF;
    RETURN NULL;
END
$$;

CREATE OR REPLACE FUNCTION nico_placement_event_partition() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    r physical_partition;
    clique text;
BEGIN
    IF TG_OP = 'UPDATE' AND NEW.nmx_partition_id IS NOT DISTINCT FROM OLD.nmx_partition_id
       AND NEW.domain_uuid IS NOT DISTINCT FROM OLD.domain_uuid
       AND NEW.logical_partition_id IS NOT DISTINCT FROM OLD.logical_partition_id THEN
        RETURN NULL;
    END IF;
    IF TG_OP = 'DELETE' THEN
        r := OLD;
        clique := NULL;
    ELSE
        r := NEW;
        clique := NEW.domain_uuid::text || '.' || NEW.nmx_partition_id::text;
    END IF;
    INSERT INTO placement_event (txid, tenant_id, site_id, instance_id, instance_name, interface_id,
                                 device_instance, kind, domain_uuid, logical_partition_id, clique_id)
    SELECT pg_current_xact_id()::text::bigint, lp.tenant_id, n.site_id, n.instance_id, i.name, n.id,
           n.device_instance, n.status, n.domain_uuid, n.logical_partition_id, clique
    FROM nvlink_interface n
    JOIN logical_partition lp ON lp.id = n.logical_partition_id
    LEFT JOIN instance i ON i.id = n.instance_id
    WHERE n.logical_partition_id = r.logical_partition_id AND n.domain_uuid = r.domain_uuid
      AND n.status = 'Ready';
    IF FOUND THEN
        PERFORM pg_notify('nico_placement', '');
    END IF;
    RETURN NULL;
END
$$;

-- One trigger per event: a trigger with transition tables takes no column list, and each event has
-- its own tables.
DROP TRIGGER IF EXISTS trg_placement_events_insert ON nvlink_interface;
CREATE TRIGGER trg_placement_events_insert AFTER INSERT ON nvlink_interface
REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION nico_placement_events_of_interfaces();

DROP TRIGGER IF EXISTS trg_placement_events_update ON nvlink_interface;
CREATE TRIGGER trg_placement_events_update AFTER UPDATE ON nvlink_interface
REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION nico_placement_events_of_interfaces();

DROP TRIGGER IF EXISTS trg_placement_events_delete ON nvlink_interface;
CREATE TRIGGER trg_placement_events_delete AFTER DELETE ON nvlink_interface
REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION nico_placement_events_of_interfaces();

DROP TRIGGER IF EXISTS trg_placement_event_partition ON physical_partition;
CREATE TRIGGER trg_placement_event_partition
AFTER INSERT OR DELETE OR UPDATE OF nmx_partition_id, domain_uuid, logical_partition_id ON physical_partition
FOR EACH ROW EXECUTE FUNCTION nico_placement_event_partition();

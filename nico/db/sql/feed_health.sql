-- The scheduler feed hears GPU health: when the fabric's word on a GPU's health changes (the
-- reconciler's health read updates gpu.health), every live NVLink interface bound to that GPU (its
-- machine's instance, device_instance = device_id - 1) gets an event in placement_event with the
-- interface's status as its kind (a consumer that knows only statuses sees nothing new about where
-- the GPU is: the partition stays) and the new health in column health; the first report of a healthy
-- GPU (unknown -> HEALTHY) gives none. NOTIFYs nico_placement with the events' audience, as
-- feed_triggers.sql does.
--
-- nico_placement_event_health(), run per row on gpu by trg_placement_event_health, only for a row
-- whose health changed (its WHEN clause): the writes of GPU observations every pass makes never run
-- it, health changes are rare.
--
-- Called by: the trigger. placement_event is read by nico/db/queries/feed.py.
-- Made by migration 0019; last changed by migration 0019.

CREATE OR REPLACE FUNCTION nico_placement_event_health() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    audience text;
BEGIN
    WITH logged AS (
        INSERT INTO placement_event (txid, tenant_id, site_id, instance_id, instance_name, interface_id,
                                     device_instance, kind, domain_uuid, logical_partition_id, clique_id,
                                     health)
        SELECT pg_current_xact_id()::text::bigint, lp.tenant_id, b.site_id, b.instance_id, i.name, b.id,
               b.device_instance, b.status, coalesce(b.domain_uuid, m.domain_uuid), b.logical_partition_id,
               CASE WHEN b.status = 'Ready' AND b.domain_uuid IS NOT NULL THEN (
                   SELECT b.domain_uuid::text || '.' || p.nmx_partition_id::text FROM physical_partition p
                   WHERE p.logical_partition_id = b.logical_partition_id AND p.domain_uuid = b.domain_uuid) END,
               NEW.health
        FROM machine m
        JOIN nvlink_interface b ON b.instance_id = m.instance_id AND b.device_instance = NEW.device_id - 1
                               AND b.status <> 'Deleting'
        JOIN logical_partition lp ON lp.id = b.logical_partition_id
        LEFT JOIN instance i ON i.id = b.instance_id
        WHERE m.id = NEW.machine_id
        RETURNING tenant_id, site_id)
    SELECT string_agg(DISTINCT coalesce(logged.tenant_id::text, '') || ':' || logged.site_id::text, ',')
    INTO audience FROM logged;
    IF audience IS NOT NULL THEN
        PERFORM pg_notify('nico_placement',
                          CASE WHEN octet_length(audience) <= 7000 THEN audience ELSE '' END);
    END IF;
    RETURN NULL;
END
$$;

DROP TRIGGER IF EXISTS trg_placement_event_health ON gpu;
CREATE TRIGGER trg_placement_event_health AFTER UPDATE OF health ON gpu
FOR EACH ROW
WHEN (NEW.health IS DISTINCT FROM OLD.health AND NEW.health IS NOT NULL
      AND NOT (OLD.health IS NULL AND NEW.health = 'HEALTHY'))
EXECUTE FUNCTION nico_placement_event_health();

-- The quota check of a create: nico_check_quota(tenant, instance type) locks the tenant's
-- allocation constraints for the type (FOR UPDATE, in id order), counts its instances of the type
-- and the machines of the type its logical partitions hold in reserve without an instance, and
-- raises when there is no allocation (SQLSTATE NC002) or the count is over what they reserve (NC003,
-- detail "count/reserved"). One statement, sent with the COMMIT: the lock every create of the
-- tenant waits for is held for what the server does between the two, not for a round trip.
--
-- The count's snapshot follows the lock (each statement of a function takes its own at READ
-- COMMITTED): it sees the instances of every create that held the lock before this one.
--
-- Called by: nico/instance/queries.py (check_quota_at_commit: sent with the request's COMMIT by
-- nico.db.raw.commit, which turns NC002 and NC003 into a
-- QuotaRefusal) and nico/logical_partition/reservation.py (a reservation made or grown).
-- Made by migration 0013; last changed by migration 0025 (reserved machines counted by the tenant's
-- partitions; 0017: reserved machines count).

CREATE OR REPLACE FUNCTION nico_check_quota(p_tenant uuid, p_type uuid) RETURNS void
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
    -- Machines the tenant's logical partitions hold in reserve count as taken too: each partition's,
    -- probed by the reservation's key (the type compared apart, so no plan starts from every machine
    -- of the type: that joined a site's free machines to the tenant's partitions at every create).
    SELECT counted + coalesce(sum((SELECT count(*) FROM machine m
                                   WHERE m.reserved_lp_id = lp.id AND m.instance_id IS NULL
                                     AND m.instance_type_id IS NOT DISTINCT FROM p_type)), 0)
    INTO counted FROM logical_partition lp WHERE lp.tenant_id = p_tenant;
    IF counted > reserved THEN
        RAISE EXCEPTION 'quota exceeded' USING ERRCODE = 'NC003', DETAIL = counted || '/' || reserved;
    END IF;
END
$$;

-- A create's first reads and locks, in one statement: nico_creation_context(org, requested tenant,
-- VPC, instance type, subnets[], names[], partitions[]) answers what the create's checks read (one row,
-- none when the org has no tenant) and the logical partitions of partitions[] that exist, as JSON
-- [id, tenant_id, site_id, status], after locking, in this order (each statement its own snapshot at
-- READ COMMITTED, as when they went out one by one):
--
-- 1. the rest of the transaction's statements take the plan their prepared statement keeps for any
--    values (plan_cache_mode, local to the transaction: a create's statements look rows up by key);
-- 2. the creation context, read before any lock;
-- 3. the VPC FOR SHARE: a concurrent change of its default partition waits for the create;
-- 4. the VPC's default logical partition FOR SHARE, as the named ones: a change of the partition
--    (singleNvLinkDomain set, a reservation changed) waits for the creates binding to it;
-- 5. the named logical partitions FOR SHARE, in id order (docs/architecture.md, "Locks").
--
-- Called by: nico/instance/queries.py (creation_context, in the round trip of placement's inputs).
-- Made by migration 0023; last changed by migration 0023.

CREATE OR REPLACE FUNCTION nico_creation_context(
    p_org text, p_requested uuid, p_vpc uuid, p_type uuid, p_subnets uuid[], p_names text[], p_partitions uuid[]
) RETURNS TABLE (
    o_tenant_id uuid, o_targeted boolean, o_requested_tenant_exists boolean,
    o_vpc_id uuid, o_vpc_tenant_id uuid, o_vpc_site_id uuid, o_vpc_status text, o_vpc_default_partition_id uuid,
    o_site_status text, o_instance_type_id uuid, o_instance_type_site_id uuid,
    o_subnets json, o_clash text[], o_uses_site boolean, o_instances_of_type bigint, o_reserved bigint,
    o_capabilities json, o_partitions json
) LANGUAGE plpgsql AS $$
DECLARE
    tenant_found boolean;
BEGIN
    PERFORM set_config('plan_cache_mode', 'force_generic_plan', true);
    SELECT t.id, t.targeted_instance_creation,
           EXISTS (SELECT 1 FROM tenant r WHERE r.id = p_requested),
           v.id, v.tenant_id, v.site_id, v.status, v.nvlink_logical_partition_id,
           s.status,
           it.id, it.site_id,
           (SELECT coalesce(json_agg(json_build_object('id', sn.id, 'tenant_id', sn.tenant_id,
                                                       'status', sn.status, 'vpc_id', sn.vpc_id)), '[]')
            FROM subnet sn WHERE sn.id = ANY(p_subnets)),
           (SELECT ARRAY[i.id::text, i.name] FROM instance i
            WHERE i.tenant_id = t.id AND i.site_id = v.site_id AND i.name = ANY(p_names)
            ORDER BY i.name LIMIT 1),
           EXISTS (SELECT 1 FROM tenant_site ts WHERE ts.tenant_id = t.id AND ts.site_id = it.site_id),
           (SELECT count(*) FROM instance i WHERE i.tenant_id = t.id AND i.instance_type_id = it.id),
           (SELECT sum(ac.constraint_value) FROM allocation_constraint ac
            JOIN allocation a ON a.id = ac.allocation_id
            WHERE a.tenant_id = t.id AND ac.instance_type_id = it.id),
           (SELECT coalesce(json_agg(json_build_object('name', mc.name, 'count', mc.count)
                                     ORDER BY mc.position, mc.created), '[]')
            FROM machine_capability mc
            WHERE mc.instance_type_id = it.id AND mc.type = 'GPU' AND mc.device_type = 'NVLink')
    INTO o_tenant_id, o_targeted, o_requested_tenant_exists,
         o_vpc_id, o_vpc_tenant_id, o_vpc_site_id, o_vpc_status, o_vpc_default_partition_id,
         o_site_status, o_instance_type_id, o_instance_type_site_id,
         o_subnets, o_clash, o_uses_site, o_instances_of_type, o_reserved, o_capabilities
    FROM tenant t
    LEFT JOIN vpc v ON v.id = p_vpc
    LEFT JOIN site s ON s.id = v.site_id
    LEFT JOIN instance_type it ON it.id = p_type
    WHERE t.org = p_org;
    tenant_found := FOUND;
    PERFORM 1 FROM vpc v WHERE v.id = p_vpc FOR SHARE;
    PERFORM 1 FROM logical_partition lp
    WHERE lp.id = (SELECT v.nvlink_logical_partition_id FROM vpc v WHERE v.id = p_vpc) FOR SHARE;
    SELECT coalesce(json_agg(json_build_array(l.id, l.tenant_id, l.site_id, l.status) ORDER BY l.id), '[]')
    INTO o_partitions
    FROM (SELECT lp.id, lp.tenant_id, lp.site_id, lp.status FROM logical_partition lp
          WHERE lp.id = ANY(p_partitions) ORDER BY lp.id FOR SHARE) l;
    IF tenant_found THEN
        RETURN NEXT;
    END IF;
END
$$;

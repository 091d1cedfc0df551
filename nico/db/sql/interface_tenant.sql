-- An NVLink interface's tenant: nvlink_interface.tenant_id is the tenant of its instance, set on the
-- row as it is inserted, so the tenant's list of interfaces (GET /nvlink-interface) pages and counts
-- on one index of the table (tenant, created, id) instead of joining every interface of the site to
-- its instance (at a 10,000-rack site's 200,000 interfaces the join alone cost ~0.1 s a page). An
-- instance never changes tenant and an interface never changes instance, so the copy stays true.
--
-- nico_interface_tenant(), run per row before each insert on nvlink_interface (trg_interface_tenant):
-- the instance's tenant, one primary-key read, whatever the inserting statement gave.
--
-- Called by: the trigger. Read by nico/db/queries/nvlink_interface.py (tenant_bindings_where).
-- Made by migration 0022; last changed by migration 0022.

CREATE OR REPLACE FUNCTION nico_interface_tenant() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.tenant_id := (SELECT i.tenant_id FROM instance i WHERE i.id = NEW.instance_id);
    RETURN NEW;
END;
$$;

DROP TRIGGER IF EXISTS trg_interface_tenant ON nvlink_interface;
CREATE TRIGGER trg_interface_tenant BEFORE INSERT ON nvlink_interface
    FOR EACH ROW EXECUTE FUNCTION nico_interface_tenant();

-- A tenant's limits at a site, checked by PostgreSQL so that every API replica sees the same counts.
--
-- nico_check_partition_quota(tenant, site, limit) and nico_check_nvlink_changes_quota(tenant, site,
-- limit) lock the tenant's tenant_site row (FOR NO KEY UPDATE: creates of one tenant at one site take
-- turns at the count, other tenants and sites never wait), count after the lock (each statement of a
-- function takes its own snapshot at READ COMMITTED, so the count sees every write of those that held
-- the lock before) and raise when the count, the caller's own writes included, is over the limit:
-- NC004 (logical partitions) and NC005 (instances whose NVLink change the fabric has not yet
-- settled), detail "count/limit". Sent after the caller's writes, with or just before its COMMIT.
--
-- nico_take_fabric_token(org, rate, burst) takes one token of the org's bucket of fabric-changing
-- requests (fabric_rate_bucket, unlogged: losing it in a crash only refills every bucket) and answers
-- 0, or, when the bucket is empty, the seconds until a token is there (nothing taken). Called on its
-- own, outside any transaction: the row lock lasts one statement.
--
-- Called by: nico/logical_partition/queries.py (insert_ready_partition_within_quota),
-- nico/db/queries/tenant_limits.py (check_nvlink_changes_at_commit, take_fabric_token).
-- Made by migration 0018; last changed by migration 0018.

CREATE OR REPLACE FUNCTION nico_lock_tenant_site(p_tenant uuid, p_site uuid) RETURNS void
LANGUAGE sql AS $$
    SELECT 1 FROM tenant_site WHERE tenant_id = p_tenant AND site_id = p_site FOR NO KEY UPDATE;
$$;

CREATE OR REPLACE FUNCTION nico_check_partition_quota(p_tenant uuid, p_site uuid, p_limit integer)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    counted bigint;
BEGIN
    PERFORM nico_lock_tenant_site(p_tenant, p_site);
    SELECT count(*) INTO counted FROM logical_partition WHERE tenant_id = p_tenant AND site_id = p_site;
    IF counted > p_limit THEN
        RAISE EXCEPTION 'logical partition quota exceeded' USING ERRCODE = 'NC004', DETAIL = counted || '/' || p_limit;
    END IF;
END
$$;

CREATE OR REPLACE FUNCTION nico_check_nvlink_changes_quota(p_tenant uuid, p_site uuid, p_limit integer)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    counted bigint;
BEGIN
    PERFORM nico_lock_tenant_site(p_tenant, p_site);
    SELECT count(*) INTO counted FROM instance i JOIN machine m ON m.instance_id = i.id
    WHERE i.tenant_id = p_tenant AND i.site_id = p_site AND m.domain_uuid IS NOT NULL
      AND (i.status = 'Terminating' OR i.nvlink_applied_version IS DISTINCT FROM i.nvlink_config_version);
    IF counted > p_limit THEN
        RAISE EXCEPTION 'NVLink changes in flight over quota' USING ERRCODE = 'NC005', DETAIL = counted || '/' || p_limit;
    END IF;
END
$$;

CREATE OR REPLACE FUNCTION nico_take_fabric_token(p_org text, p_rate double precision, p_burst double precision)
RETURNS double precision LANGUAGE plpgsql AS $$
DECLARE
    held double precision;
    since timestamptz;
    at timestamptz;
BEGIN
    INSERT INTO fabric_rate_bucket (org, tokens, refilled) VALUES (p_org, p_burst, clock_timestamp())
    ON CONFLICT (org) DO NOTHING;
    SELECT tokens, refilled INTO held, since FROM fabric_rate_bucket WHERE org = p_org FOR UPDATE;
    at := clock_timestamp();  -- after the lock: the refill counts the time the last holder left
    held := least(p_burst, held + p_rate * greatest(extract(epoch FROM at - since), 0));
    IF held >= 1 THEN
        UPDATE fabric_rate_bucket SET tokens = held - 1, refilled = at WHERE org = p_org;
        RETURN 0;
    END IF;
    UPDATE fabric_rate_bucket SET tokens = held, refilled = at WHERE org = p_org;
    RETURN (1 - held) / p_rate;
END
$$;

-- A domain's place in rack order: nvlink_domain.rack_serial is the least chassis serial of its
-- machines (NULL while it has none), kept by the writes to machine themselves, so the site overview and
-- the topology pages order a 10,000-rack site's domains by a column of theirs instead of aggregating
-- every machine of the site on each page.
--
-- nico_domain_rack_serial_added(), run once per INSERT statement on machine (trg_machine_rack_serial_
-- added, the new rows as a transition table: a registration of a rack's trays is one statement): the
-- least serial each domain gets lowers the domain's to it.
-- nico_domain_rack_serial_left(), run per row by trg_machine_rack_serial_moved (a machine's domain or
-- chassis serial changed: rare, and the WHEN clause keeps the hot writes of machine, its instance and
-- holds, from running it) and once per DELETE statement by trg_machine_rack_serial_removed: when a
-- domain's least serial leaves, the domain's serial becomes the least of the machines left, read after
-- taking the domain's row lock (domains in uuid order), so a writer of the same domain that committed
-- first is counted; the moved machine's new place is then counted as an added one.
--
-- Called by: the triggers. Read by nico/db/queries/topology.py (tenant_domains).
-- Made by migration 0020; last changed by migration 0020.

CREATE OR REPLACE FUNCTION nico_domain_rack_serial_added() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE nvlink_domain d
    SET rack_serial = a.serial
    FROM (SELECT domain_uuid, min(chassis_serial) AS serial FROM added
          WHERE domain_uuid IS NOT NULL GROUP BY domain_uuid) a
    WHERE d.uuid = a.domain_uuid AND (d.rack_serial IS NULL OR d.rack_serial > a.serial);
    RETURN NULL;
END;
$$;

CREATE OR REPLACE FUNCTION nico_domain_rack_serial_left() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_LEVEL = 'ROW' THEN
        IF OLD.domain_uuid IS NOT NULL THEN
            PERFORM 1 FROM nvlink_domain WHERE uuid = OLD.domain_uuid FOR UPDATE;
            UPDATE nvlink_domain d
            SET rack_serial = (SELECT min(m.chassis_serial) FROM machine m WHERE m.domain_uuid = d.uuid)
            WHERE d.uuid = OLD.domain_uuid AND d.rack_serial IS NOT DISTINCT FROM OLD.chassis_serial;
        END IF;
        IF NEW.domain_uuid IS NOT NULL THEN
            UPDATE nvlink_domain
            SET rack_serial = NEW.chassis_serial
            WHERE uuid = NEW.domain_uuid AND (rack_serial IS NULL OR rack_serial > NEW.chassis_serial);
        END IF;
        RETURN NULL;
    END IF;
    PERFORM 1 FROM nvlink_domain
    WHERE uuid IN (SELECT domain_uuid FROM removed) ORDER BY uuid FOR UPDATE;
    UPDATE nvlink_domain d
    SET rack_serial = (SELECT min(m.chassis_serial) FROM machine m WHERE m.domain_uuid = d.uuid)
    WHERE d.uuid IN (SELECT domain_uuid FROM removed)
      AND d.rack_serial IN (SELECT chassis_serial FROM removed r WHERE r.domain_uuid = d.uuid);
    RETURN NULL;
END;
$$;

DROP TRIGGER IF EXISTS trg_machine_rack_serial_added ON machine;
CREATE TRIGGER trg_machine_rack_serial_added
    AFTER INSERT ON machine REFERENCING NEW TABLE AS added
    FOR EACH STATEMENT EXECUTE FUNCTION nico_domain_rack_serial_added();

DROP TRIGGER IF EXISTS trg_machine_rack_serial_moved ON machine;
CREATE TRIGGER trg_machine_rack_serial_moved
    AFTER UPDATE OF domain_uuid, chassis_serial ON machine
    FOR EACH ROW WHEN (OLD.domain_uuid IS DISTINCT FROM NEW.domain_uuid
                       OR OLD.chassis_serial IS DISTINCT FROM NEW.chassis_serial)
    EXECUTE FUNCTION nico_domain_rack_serial_left();

DROP TRIGGER IF EXISTS trg_machine_rack_serial_removed ON machine;
CREATE TRIGGER trg_machine_rack_serial_removed
    AFTER DELETE ON machine REFERENCING OLD TABLE AS removed
    FOR EACH STATEMENT EXECUTE FUNCTION nico_domain_rack_serial_left();

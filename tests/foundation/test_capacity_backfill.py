"""Migration 0009 counts the machines already there into ``domain_capacity`` (the backfill): a site
upgraded with machines in use places on the right free counts from the first request on."""

from __future__ import annotations

import uuid

import sqlalchemy as sa

from nico.db import migrate
from nico.db import models as m
from tests.support import db as testdb


def test_upgrade_counts_existing_machines() -> None:
    url = testdb.create_database("nico_backfill")
    try:
        migrate.upgrade(url, "0008")
        provider, site, itype, domain = (uuid.uuid4() for _ in range(4))
        engine = sa.create_engine(url)
        try:
            with engine.begin() as conn:
                conn.execute(sa.insert(m.InfrastructureProvider), [{"id": provider, "org": "p"}])
                conn.execute(
                    sa.insert(m.Site),
                    [{"id": site, "infrastructure_provider_id": provider, "name": "s"}],
                )
                conn.execute(
                    sa.insert(m.InstanceType),
                    [{"id": itype, "infrastructure_provider_id": provider, "site_id": site, "name": "t"}],
                )
                conn.execute(sa.insert(m.NvlinkDomain), [{"uuid": domain, "site_id": site}])
                rows = [
                    {
                        "id": f"m{n}",
                        "site_id": site,
                        "instance_type_id": itype,
                        "status": "Maintenance" if n == 0 else "Ready",
                        "is_missing_on_site": n == 1,
                        "domain_uuid": domain if n < 5 else None,
                        "chassis_serial": "C1" if n < 5 else None,
                        "tray_index": n if n < 5 else None,
                    }
                    for n in range(7)
                ]
                rows.append({**rows[-1], "id": "untyped", "instance_type_id": None})
                conn.execute(sa.insert(m.Machine), rows)
            migrate.upgrade(url)
            with engine.connect() as conn:
                counts = {
                    d: (free, used)
                    for d, free, used in conn.execute(
                        sa.text("SELECT domain_uuid, free, used FROM domain_capacity WHERE site_id = :s"),
                        {"s": site},
                    )
                }
        finally:
            engine.dispose()
        # m0 in maintenance, m1 missing: 3 of the 5 in the domain are free; 2 without a domain.
        assert counts == {domain: (3, 0), uuid.UUID(int=0): (2, 0)}
    finally:
        testdb.drop_database(url)

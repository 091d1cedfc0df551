"""Migration 0026 counts the instances already there into ``instance_type_count`` (the backfill): a
site upgraded with instances checks its tenants' quotas on the right counts from the first create
on, and the downgrade puts back the rules that count the instance table and drops what 0026 made."""

from __future__ import annotations

import uuid

import sqlalchemy as sa

from nico.db import migrate
from nico.db import models as m
from tests.support import db as testdb


def test_upgrade_counts_existing_instances() -> None:
    url = testdb.create_database("nico_count_backfill")
    try:
        migrate.upgrade(url, "0025")
        provider, site, small, large, first, second = (uuid.uuid4() for _ in range(6))
        engine = sa.create_engine(url)
        try:
            with engine.begin() as conn:
                conn.execute(sa.insert(m.InfrastructureProvider), [{"id": provider, "org": "p"}])
                conn.execute(
                    sa.insert(m.Site), [{"id": site, "infrastructure_provider_id": provider, "name": "s"}]
                )
                conn.execute(
                    sa.insert(m.InstanceType),
                    [
                        {"id": t, "infrastructure_provider_id": provider, "site_id": site, "name": str(t)}
                        for t in (small, large)
                    ],
                )
                conn.execute(sa.insert(m.Tenant), [{"id": first, "org": "a"}, {"id": second, "org": "b"}])
                vpcs = {who: uuid.uuid4() for who in (first, second)}
                conn.execute(
                    sa.insert(m.Vpc),
                    [{"id": v, "tenant_id": who, "site_id": site, "name": "v"} for who, v in vpcs.items()],
                )
                wanted = {(first, small): 3, (first, large): 1, (second, small): 2, (second, None): 2}
                conn.execute(
                    sa.insert(m.Instance),
                    [
                        {
                            "tenant_id": who,
                            "site_id": site,
                            "instance_type_id": t,
                            "vpc_id": vpcs[who],
                            "name": f"{t}-{n}",
                        }
                        for (who, t), count in wanted.items()
                        for n in range(count)
                    ],
                )
            migrate.upgrade(url)
            with engine.connect() as conn:
                kept = {
                    (t, i): n
                    for t, i, n in conn.execute(
                        sa.text("SELECT tenant_id, instance_type_id, instances FROM instance_type_count")
                    )
                }
            assert kept == {(first, small): 3, (first, large): 1, (second, small): 2}
            with engine.connect() as conn:
                stats = "SELECT count(*) FROM pg_statistic_ext WHERE stxname = 'st_instance_in_flight'"
                assert conn.scalar(sa.text(stats)) == 1
            migrate.downgrade(url, "0025")
            with engine.connect() as conn:
                assert conn.scalar(sa.text("SELECT to_regclass('instance_type_count')")) is None
                assert conn.scalar(sa.text("SELECT to_regclass('ix_instance_in_flight')")) is None
                assert conn.scalar(sa.text(stats)) == 0
        finally:
            engine.dispose()
    finally:
        testdb.drop_database(url)

"""Outages told once: a database that cannot be reached makes one warning, however many domains and
retries fail during it, and one more when it is back; a bug keeps its traceback."""

from __future__ import annotations

import logging
import uuid

import psycopg
import pytest
from prometheus_client import CollectorRegistry
from sqlalchemy import exc as sa_exc

from nico.config import NvLinkConfig
from nico.db.engine import make_engine
from nico.reconciler.metrics import ReconcilerMetrics
from nico.reconciler.outages import Outages, is_database_outage
from nico.reconciler.scheduler import Reconciler
from nico.sim.inprocess import InProcessBackend
from tests.support.net import free_port
from tests.support.sim_site import SimSite

D1, D2 = uuid.UUID(int=1), uuid.UUID(int=2)


def test_what_counts_as_a_database_outage() -> None:
    refused = psycopg.OperationalError("connection refused")
    assert is_database_outage(refused)
    assert is_database_outage(sa_exc.OperationalError("SELECT 1", {}, refused))
    assert is_database_outage(ConnectionResetError())
    assert not is_database_outage(sa_exc.IntegrityError("INSERT", {}, psycopg.IntegrityError("dup")))
    assert not is_database_outage(ValueError("a bug"))


def test_one_line_when_it_starts_and_one_with_its_length_when_it_ends(
    caplog: pytest.LogCaptureFixture,
) -> None:
    now = [100.0]
    outages = Outages(clock=lambda: now[0])
    caplog.set_level(logging.INFO, logger="nico.reconciler.outages")
    for _ in range(5):
        for domain in (D1, D2):
            assert outages.database_failed(psycopg.OperationalError("connection refused\nDETAIL"), domain)
    assert not outages.database_failed(KeyError("bug"))  # not an outage: the caller logs it
    assert [r.getMessage() for r in caplog.records] == [
        "the database is unreachable: connection refused (one line until it ends)"
    ]
    now[0] = 131.5
    outages.database_ok()
    outages.database_ok()  # nothing more: the outage is over
    assert len(caplog.records) == 2
    assert caplog.records[1].getMessage() == (
        "the database is reachable again after 31.5 s "
        f"(10 failed attempts; failures per domain: {D1}: 5, {D2}: 5)"
    )


def test_a_fabric_outage_is_told_per_domain(caplog: pytest.LogCaptureFixture) -> None:
    outages = Outages(clock=lambda: 0.0)
    caplog.set_level(logging.INFO, logger="nico.reconciler.outages")
    for _ in range(3):
        outages.fabric_failed(D1, "Failed to reach NMX-C: down")
    outages.fabric_ok(D2)  # never failed: says nothing
    outages.fabric_ok(D1)
    assert [r.getMessage() for r in caplog.records] == [
        f"domain {D1}: Failed to reach NMX-C: down (one line until it ends)",
        f"domain {D1}: the fabric manager answers again after 0.0 s "
        f"(3 failed attempts; failures per domain: {D1}: 3)",
    ]


async def test_passes_without_a_database_log_one_warning_not_a_traceback_each(
    site: SimSite, backend: InProcessBackend, caplog: pytest.LogCaptureFixture
) -> None:
    engine = make_engine(f"postgresql+psycopg://nico@127.0.0.1:{free_port()}/nico")
    metrics = ReconcilerMetrics(CollectorRegistry(), backend.kind, hold_seconds=120.0)
    reconciler = Reconciler(engine, backend, NvLinkConfig(backend=backend.kind), metrics)
    caplog.set_level(logging.INFO)
    try:
        for _ in range(3):
            results = await reconciler.reconcile(site.domains)
            assert {r.status for r in results.values()} == {"error"}
    finally:
        await reconciler.close()
        await engine.dispose()
    mine = [r for r in caplog.records if r.name.startswith("nico.")]
    assert [r.levelname for r in mine] == ["WARNING"], [r.getMessage() for r in mine]
    assert mine[0].getMessage().startswith("the database is unreachable: ")
    assert not any(r.exc_info for r in mine)

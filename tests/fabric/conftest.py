"""Fixtures for the fabric tests: a small simulated site, its servers on loopback, and clients.

None of them touches the database.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

from nico.config import NvLinkConfig
from nico.fabric.nmxc.client import NmxcBackend
from nico.fabric.nmxm.client import NmxmBackend
from nico.sim.fabric import SimFabric
from nico.sim.inprocess import InProcessBackend
from nico.sim.nmxc_server import NmxcSimulator
from nico.sim.nmxm_app import NmxmSimulator

# Generous for a loaded 2-core machine; tests of deadlines build clients with short ones.
CALL_TIMEOUT = 3.0
SHORT = 0.3
USER, PASSWORD = "nmx", "s3cret"


@pytest.fixture
def fabric() -> SimFabric:
    """Two NVL72 racks (SIM-0001, SIM-0002) and one NVL36x2 pair (SIM-0003 + SIM-0004)."""
    return SimFabric(2, nvl36x2=1, seed=11, max_partitions=4)


@pytest_asyncio.fixture
async def nmxc_sim(fabric: SimFabric) -> AsyncIterator[NmxcSimulator]:
    async with NmxcSimulator(fabric) as sim:
        yield sim


@pytest_asyncio.fixture
async def nmxc(nmxc_sim: NmxcSimulator) -> AsyncIterator[NmxcBackend]:
    client = NmxcBackend(NvLinkConfig(), call_timeout=CALL_TIMEOUT)
    yield client
    await client.close()


@pytest_asyncio.fixture
async def inprocess(fabric: SimFabric) -> AsyncIterator[InProcessBackend]:
    backend = InProcessBackend(fabric, call_timeout=CALL_TIMEOUT)
    yield backend
    await backend.close()


@pytest_asyncio.fixture
async def nmxm_sim(fabric: SimFabric) -> AsyncIterator[NmxmSimulator]:
    async with NmxmSimulator(fabric, username=USER, password=PASSWORD) as sim:
        yield sim


@pytest_asyncio.fixture
async def nmxm(nmxm_sim: NmxmSimulator) -> AsyncIterator[NmxmBackend]:
    client = NmxmBackend(
        nmxm_sim.url,
        USER,
        PASSWORD,
        operation_timeout=CALL_TIMEOUT,
        call_timeout=CALL_TIMEOUT,
        poll_interval=0.01,
    )
    yield client
    await client.close()

"""Each backend declares what it offers (``backend.capabilities``), and the declaration is the truth:
every optional interface it implements is declared (a backend that gains one and forgets to say so
would never be asked), every declared one is the backend itself, and the flags say how it is reached."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

from nico.config import NvLinkConfig
from nico.fabric.backend import (
    AsyncOperations,
    FabricBackend,
    FabricHealth,
    FabricTopology,
    GpuTopology,
    PartitionEvents,
    SiteInventory,
    StoredCredentials,
)
from nico.fabric.nmxc.client import NmxcBackend
from nico.fabric.nmxm.client import NmxmBackend
from nico.sim.fabric import SimFabric
from nico.sim.inprocess import InProcessBackend

FACETS: dict[str, type] = {
    "operations": AsyncOperations,
    "events": PartitionEvents,
    "credentials": StoredCredentials,
    "health": FabricHealth,
    "topology": FabricTopology,
    "gpu_topology": GpuTopology,
    "site": SiteInventory,
}


@pytest_asyncio.fixture(params=["nmxc", "nmxm", "inprocess"])
async def backend(request: pytest.FixtureRequest) -> AsyncIterator[FabricBackend]:
    made: FabricBackend
    if request.param == "nmxc":
        made = NmxcBackend(NvLinkConfig())
    elif request.param == "nmxm":
        made = NmxmBackend("http://nmx-m.invalid", "u", "p")
    else:
        made = InProcessBackend(SimFabric(racks=1, seed=1))
    yield made
    await made.close()


async def test_every_interface_a_backend_implements_is_declared(backend: FabricBackend) -> None:
    declared = backend.capabilities
    for name, protocol in FACETS.items():
        facet = getattr(declared, name)
        assert (facet is not None) == isinstance(backend, protocol), name
        assert facet is None or facet is backend, name


async def test_how_each_backend_is_reached(backend: FabricBackend) -> None:
    declared = backend.capabilities
    per_chassis = backend.kind == "nmxc"
    assert declared.per_endpoint is per_chassis
    assert declared.manager == ("NMX-C" if per_chassis else "NMX-M")
    # Multicast limits go with the domain's budget (GetDomainProperties); NMX-M refuses them.
    assert declared.multicast_limits is (declared.topology is not None)

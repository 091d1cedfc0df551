"""A domain's pass reads the NMX-C registry rows of its own chassis only (a pass that read the whole
registry cost time in the size of the site): those rows replace what was known of those chassis,
a row of theirs that is gone is forgotten, and every other chassis' endpoint stays as known."""

from __future__ import annotations

from nico.config import NvLinkConfig
from nico.fabric.observation import FabricObserver
from nico.sim.fabric import SimFabric
from nico.sim.inprocess import InProcessBackend


def test_a_domains_rows_replace_its_chassis_and_leave_the_others() -> None:
    observer = FabricObserver(InProcessBackend(SimFabric(racks=1, seed=1)), NvLinkConfig().nmxc_endpoints)
    observer.use_registry({"A": "http://a", "B": "http://b", "C": "http://c"}, None)  # a full pass's

    observer.use_registry({"A": "http://a2"}, None, covers={"A", "B"})  # B's row was deleted

    assert observer.endpoints.registry == {"A": "http://a2", "C": "http://c"}


def test_the_whole_registry_replaces_everything_known() -> None:
    observer = FabricObserver(InProcessBackend(SimFabric(racks=1, seed=1)), NvLinkConfig().nmxc_endpoints)
    observer.use_registry({"A": "http://a", "B": "http://b"}, None)

    observer.use_registry({"C": "http://c"}, None)

    assert observer.endpoints.registry == {"C": "http://c"}

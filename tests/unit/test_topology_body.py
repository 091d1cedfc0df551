"""The topology page's body is written without a pydantic model per GPU (``topology_body``); it must be
byte for byte what the declared schema (``NVLinkTopology``) dumps, for every kind of GPU and for text
that JSON has to escape."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

from nico.api.schemas.topology import NVLinkTopology, topology_body
from nico.services.topology import (
    ChassisView,
    DomainView,
    GpuView,
    PartitionLegend,
    TopologyView,
    TrayView,
)

# Quotes, backslashes, every control character, non-ASCII, an emoji, DEL, and the line separators
# JavaScript cares about: what a tenant may put in an instance or partition name, or a fabric in an error.
AWKWARD = 'a"b\\c/' + "".join(map(chr, range(32))) + "é中😀\x7f\u2028\u2029"


def _view() -> TopologyView:
    mine, other_domain = uuid.uuid4(), uuid.uuid4()
    partition = uuid.uuid4()
    gpus = [
        GpuView(0, "free", health="HEALTHY"),
        GpuView(1, "free"),
        GpuView(2, "other"),
        GpuView(3, "held"),
        GpuView(4, "mine", uuid.uuid4(), AWKWARD, partition, AWKWARD, "Pending", False, "DEGRADED"),
        GpuView(5, "mine", uuid.uuid4(), "plain", None, None, None, False, None),
        GpuView(6, "mine", uuid.uuid4(), "ready", partition, "p", "Ready", True, "HEALTHY"),
    ]
    failing = DomainView(
        mine,
        uuid.uuid4(),
        AWKWARD,
        f"NMX-C said: {AWKWARD}",
        datetime(2026, 5, 30, 12, 0, 0, 123456, tzinfo=UTC),
        3,
        [
            ChassisView(AWKWARD, [TrayView(0, gpus), TrayView(1, [])]),
            ChassisView("S-2", [TrayView(7, gpus[:2])]),
        ],
        gpus_without_home=2,
        foreign_gpus=1,
    )
    quiet = DomainView(other_domain, uuid.uuid4(), "site", None, None, 0, [])
    on_the_second = replace_time(failing, datetime(2026, 5, 30, 12, 0, 0, tzinfo=UTC))
    legend = [PartitionLegend(partition, AWKWARD, "Ready", frozenset({mine, other_domain}))]
    return TopologyView([failing, quiet, on_the_second], legend)


def replace_time(domain: DomainView, at: datetime) -> DomainView:
    return DomainView(
        uuid.uuid4(),
        domain.site_id,
        domain.site_name,
        domain.error,
        at,
        domain.consecutive_failures,
        domain.chassis,
    )


def test_the_body_is_the_schemas_dump_byte_for_byte() -> None:
    view = _view()
    assert topology_body(view) == NVLinkTopology.of(view).model_dump_json().encode()


def test_an_empty_page_too() -> None:
    view = TopologyView([], [])
    assert topology_body(view) == NVLinkTopology.of(view).model_dump_json().encode()

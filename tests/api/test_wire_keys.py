"""NVLink interface objects carry ``nvLinkLogicalPartitionId``, and the deprecated
``nvLinklogicalPartitionId`` only while ``[api] emit_deprecated_partition_key`` is on (issue 10, part 8)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest

from nico.api.schemas.nvlink_interface import NVLinkInterface, NVLinkInterfaceRequest, WireKeys
from nico.config import Settings


@pytest.fixture
def restore_wire_keys() -> Iterator[None]:
    before = WireKeys.emit_deprecated_partition_key
    yield
    WireKeys.emit_deprecated_partition_key = before


def rendered() -> tuple[str, dict[str, object]]:
    partition = uuid.uuid4()
    now = datetime.now(UTC)
    item = NVLinkInterface.model_validate(
        {
            "id": uuid.uuid4(),
            "instance_id": uuid.uuid4(),
            "nv_link_logical_partition_id": partition,
            "nv_link_domain_id": None,
            "device_instance": 1,
            "gpu_guid": None,
            "status": "Pending",
            "created": now,
            "updated": now,
        }
    )
    return str(partition), json.loads(item.model_dump_json())


@pytest.mark.usefixtures("restore_wire_keys")
def test_the_setting_decides_whether_the_deprecated_key_is_emitted(settings: Settings) -> None:
    from nico.api.app import create_app

    create_app(
        settings.model_copy(
            update={"api": settings.api.model_copy(update={"emit_deprecated_partition_key": False})}
        )
    )
    partition, body = rendered()
    assert body["nvLinkLogicalPartitionId"] == partition and "nvLinklogicalPartitionId" not in body
    create_app(settings)  # the default: on
    partition, body = rendered()
    assert body["nvLinkLogicalPartitionId"] == body["nvLinklogicalPartitionId"] == partition


@pytest.mark.parametrize("key", ["nvLinkLogicalPartitionId", "nvLinklogicalPartitionId"])
def test_requests_accept_both_spellings(key: str) -> None:
    partition = str(uuid.uuid4())
    assert NVLinkInterfaceRequest.model_validate({key: partition}).nv_link_logical_partition_id == partition

"""The NMX-C stubs: committed files equal a fresh generation, and the wire names match spec §6."""

from __future__ import annotations

from pathlib import Path

from google.protobuf.descriptor import FieldDescriptor

from nico.fabric.nmxc import nmx_c_pb2 as pb
from nico.fabric.nmxc.generate import OUTPUTS, PACKAGE_DIR, generate


def test_committed_stubs_match_a_fresh_generation(tmp_path: Path) -> None:
    written = generate(tmp_path)
    assert sorted(p.name for p in written) == sorted(OUTPUTS)
    for path in written:
        committed = (PACKAGE_DIR / path.name).read_bytes()
        assert path.read_bytes() == committed, (
            f"{path.name} does not match protos/nmx_c.proto: run python -m nico.fabric.nmxc.generate"
        )


def test_package_service_and_method_paths() -> None:
    service = pb.DESCRIPTOR.services_by_name["NMX_Controller"]
    assert service.full_name == "nmx_c.NMX_Controller"
    methods = {m.name: (m.input_type.name, m.output_type.name) for m in service.methods}
    assert methods == {
        "Hello": ("ClientHello", "ServerHello"),
        "GetPartitionInfoList": ("GetPartitionInfoListRequest", "GetPartitionInfoListResponse"),
        "CreatePartition": ("CreatePartitionRequest", "CreatePartitionResponse"),
        "DeletePartition": ("DeletePartitionRequest", "DeletePartitionResponse"),
        "AddGpusToPartition": ("UpdatePartitionRequest", "UpdatePartitionResponse"),
        "RemoveGpusFromPartition": ("UpdatePartitionRequest", "UpdatePartitionResponse"),
        "GetGpuInfoList": ("GetGpuInfoListRequest", "GetGpuInfoListResponse"),
        "GetComputeNodeInfoList": ("GetComputeNodeInfoListRequest", "GetComputeNodeInfoListResponse"),
        "GetDomainProperties": ("GetDomainPropertiesRequest", "DomainProperties"),
        "GetDomainStateInfo": ("GetDomainStateInfoRequest", "DomainStateInfo"),
        "Subscribe": ("SubscribeRequest", "ServerNotification"),
    } | {row[0]: (row[1], row[2]) for row in _rows(SPEC_2026_RPCS)}
    assert service.methods_by_name["Subscribe"].server_streaming


U32, U64, STR, BOOL, ENUM, MSG = (
    FieldDescriptor.TYPE_UINT32,
    FieldDescriptor.TYPE_UINT64,
    FieldDescriptor.TYPE_STRING,
    FieldDescriptor.TYPE_BOOL,
    FieldDescriptor.TYPE_ENUM,
    FieldDescriptor.TYPE_MESSAGE,
)

# (message, field, number, wire type) for every field nico's client and simulator read or write.
SPEC_FIELDS = [
    ("ServerHeader", "domain_uuid", 1, STR),
    ("ServerHeader", "app_ver", 3, STR),
    ("ServerHeader", "return_code", 4, ENUM),
    ("ClientHello", "gateway_id", 1, STR),
    ("ClientHello", "major_version", 2, ENUM),
    ("ClientHello", "minor_version", 3, ENUM),
    ("ServerHello", "server_header", 1, MSG),
    ("ServerHello", "major_version", 5, ENUM),
    ("ServerHello", "minor_version", 6, ENUM),
    ("Context", "context", 1, STR),
    ("PartitionId", "partition_id", 1, U32),
    ("Location", "chassis_id", 1, U64),
    ("Location", "slot_id", 2, U64),
    ("Location", "host_id", 3, U64),
    ("LocationInfo", "chassis_serial_number", 2, STR),
    ("LocationInfo", "tray_index", 4, U64),
    ("LocationInfo", "location", 6, MSG),
    ("GpuResourceId", "gpu_location", 1, MSG),
    ("GpuResourceId", "gpu_uid", 2, U64),
    ("PartitionInfo", "partition_id", 1, MSG),
    ("PartitionInfo", "name", 2, STR),
    ("PartitionInfo", "num_gpus", 3, U32),
    ("PartitionInfo", "gpu_uid_list", 5, U64),
    ("PartitionInfo", "health", 6, ENUM),
    ("PartitionInfo", "partition_type", 7, ENUM),
    ("GetPartitionInfoListRequest", "context", 1, MSG),
    ("GetPartitionInfoListRequest", "partition_id_list", 2, MSG),
    ("GetPartitionInfoListRequest", "partition_name_list", 3, STR),
    ("GetPartitionInfoListRequest", "gateway_id", 4, STR),
    ("GetPartitionInfoListResponse", "partition_info_list", 3, MSG),
    ("CreatePartitionRequest", "name", 2, STR),
    ("CreatePartitionRequest", "gpu_resource_id", 3, MSG),
    ("CreatePartitionRequest", "partition_id", 6, MSG),
    ("CreatePartitionRequest", "gateway_id", 7, STR),
    ("CreatePartitionResponse", "partition_id", 3, MSG),
    ("DeletePartitionRequest", "partition_id", 2, MSG),
    ("DeletePartitionRequest", "gateway_id", 3, STR),
    ("DeletePartitionRequest", "name", 4, STR),
    ("UpdatePartitionRequest", "partition_id", 2, MSG),
    ("UpdatePartitionRequest", "location_list", 3, MSG),
    ("UpdatePartitionRequest", "gpu_uid", 4, U64),
    ("UpdatePartitionRequest", "gateway_id", 5, STR),
    ("UpdatePartitionRequest", "name", 6, STR),
    ("UpdatePartitionRequest", "reroute", 7, BOOL),
    ("GetGpuInfoListRequest", "attr", 2, ENUM),
    ("GetGpuInfoListRequest", "gateway_id", 6, STR),
    ("GpuInfo", "loc", 1, MSG),
    ("GpuInfo", "gpu_id", 2, U32),
    ("GpuInfo", "gpu_uid", 3, U64),
    ("GpuInfo", "gpu_health", 4, ENUM),
    ("GpuInfo", "partition_id", 5, MSG),
    ("GetGpuInfoListResponse", "gpu_info_list", 3, MSG),
    ("GetComputeNodeInfoListRequest", "loc_list", 2, MSG),
    ("GetComputeNodeInfoListRequest", "gateway_id", 3, STR),
    ("ComputeNodeInfo", "partition_id_list", 4, MSG),
    ("GetComputeNodeInfoListResponse", "node_info_list", 3, MSG),
    ("DomainProperties", "max_num_partitions", 31, U32),
    ("DomainStateInfo", "control_plane_state", 3, ENUM),
    ("DomainStateInfo", "nmx_controller_health", 6, ENUM),
    ("SubscribeRequest", "gateway_id", 1, STR),
    ("SubscribeRequest", "notify_on_self_change", 2, BOOL),
    ("SubscribeRequest", "heart_beat_rate", 3, U32),
    ("ServerNotification", "fm_event", 7, MSG),
    ("FmEvent", "fm_event_partition_change", 5, MSG),
    ("FmEventPartitionChange", "partition_id", 2, MSG),
]


def test_field_numbers_and_types_follow_the_spec() -> None:
    found = []
    for message, field, _, _ in SPEC_FIELDS:
        descriptor = pb.DESCRIPTOR.message_types_by_name[message].fields_by_name[field]
        found.append((message, field, descriptor.number, descriptor.type))
    assert found == SPEC_FIELDS


def test_enum_numbers_follow_the_spec() -> None:
    assert pb.PROTO_MSG_MAJOR_VERSION == 2
    assert pb.PROTO_MSG_MINOR_VERSION == 20
    codes = pb.StReturnCode
    assert [codes.Value(f"NMX_ST_{n}") for n in ("SUCCESS", "BADPARAM", "RESOURCE_IN_USE")] == [1, 2, 13]
    assert [codes.Value(f"NMX_ST_PARTITION_{n}") for n in ("EXISTS", "ID_IN_USE", "NAME_NOT_IN_USE")] == [
        17,
        18,
        21,
    ]
    assert codes.Value("NMX_ST_NOT_READY") == 23
    assert codes.Value("NMX_ST_NMX_CONTROLLER_INVALID_CONFIG_FILE") == 503
    assert pb.NMX_PARTITION_TYPE_GPUUID_BASED == 2
    assert pb.NMX_GPU_HEALTH_DEGRADED_BW == 4
    assert pb.NMX_GPU_ATTR_ALL == 1


# The RPC, message and enum tables of spec/nmx-c-2026.md (NVIDIA's 2026-05 snapshot), copied unchanged
# into nmx_c_2026_tables.md; the tests below parse them, so a field number, type, oneof or enum value
# that drifts from NVIDIA's fails.
_TABLES = (Path(__file__).parent / "nmx_c_2026_tables.md").read_text()


def _section(title: str) -> str:
    text = _TABLES.split(f"## {title}\n", 1)[1]
    return text.split("\n## ", 1)[0]


SPEC_2026_RPCS = _section("RPCs")
SPEC_2026_MESSAGES = _section("Messages")
SPEC_2026_ENUMS = _section("Enums")


_SCALARS = {
    "uint32": FieldDescriptor.TYPE_UINT32,
    "uint64": FieldDescriptor.TYPE_UINT64,
    "string": FieldDescriptor.TYPE_STRING,
    "bool": FieldDescriptor.TYPE_BOOL,
}


def _rows(table: str) -> list[list[str]]:
    return [
        [cell.strip() for cell in line.strip().strip("|").split("|")] for line in table.strip().splitlines()
    ]


def _spec_fields(text: str) -> list[tuple[str | None, str, int, str]]:
    """``(oneof or None, name, number, type)`` of one message row of the spec's table."""
    fields = []
    for part in text.split(";"):
        part = part.strip()
        oneof = None
        if part.startswith("oneof "):
            oneof, part = part.removeprefix("oneof ").split(":", 1)
        for item in part.split(","):
            name, rest = item.strip().split("=", 1)
            number, kind = rest.split(":", 1)
            fields.append((oneof.strip() if oneof else None, name.strip(), int(number), kind.strip()))
    return fields


def _described(field: FieldDescriptor) -> str:
    """The spec's notation for a field's type: ``repeated X``, ``optional X``, scalar or message name."""
    if field.type == FieldDescriptor.TYPE_MESSAGE:
        kind = field.message_type.name
    elif field.type == FieldDescriptor.TYPE_ENUM:
        kind = field.enum_type.name
    else:
        kind = next(name for name, value in _SCALARS.items() if value == field.type)
    if field.is_repeated:
        return f"repeated {kind}"
    if (
        field.has_presence
        and field.containing_oneof is not None
        and field.containing_oneof.name.startswith("_")
    ):
        return f"optional {kind}"
    return kind


def test_every_2026_rpc_is_served() -> None:
    service = pb.DESCRIPTOR.services_by_name["NMX_Controller"]
    rows = _rows(SPEC_2026_RPCS)
    assert len(rows) == 12
    for rpc, request, response in rows:
        method = service.methods_by_name[rpc]
        assert (method.input_type.name, method.output_type.name) == (request, response), rpc
        assert not method.server_streaming


def test_every_2026_message_field_follows_the_spec() -> None:
    rows = _rows(SPEC_2026_MESSAGES)
    assert len(rows) == 43
    for message, text in rows:
        descriptor = pb.DESCRIPTOR.message_types_by_name[message]
        expected = _spec_fields(text)
        assert len(descriptor.fields) == len(expected), message
        for oneof, name, number, kind in expected:
            field = descriptor.fields_by_name[name]
            assert field.number == number, f"{message}.{name}"
            assert _described(field) == kind, f"{message}.{name}"
            real_oneof = field.containing_oneof
            if oneof is None:
                assert real_oneof is None or real_oneof.name.startswith("_"), f"{message}.{name}"
            else:
                assert real_oneof is not None and real_oneof.name == oneof, f"{message}.{name}"


def test_every_2026_enum_value_follows_the_spec() -> None:
    rows = _rows(SPEC_2026_ENUMS)
    assert len(rows) == 11
    for enum, text in rows:
        descriptor = pb.DESCRIPTOR.enum_types_by_name[enum]
        expected = {}
        for item in text.split(","):
            name, number = item.strip().split("=")
            expected[name] = int(number)
        assert {v.name: v.number for v in descriptor.values} == expected, enum


def test_2026_corrections() -> None:
    props = pb.DomainProperties.DESCRIPTOR.fields_by_name
    assert (props["line_rate_mbps"].number, props["line_rate_mbps"].type) == (14, FieldDescriptor.TYPE_UINT32)
    for name, number in [
        ("min_gpus_per_partition", 30),
        ("max_num_partitions", 31),
        ("max_num_alids", 32),
        ("max_multicast_groups", 40),
    ]:
        assert (props[name].number, props[name].type) == (number, FieldDescriptor.TYPE_UINT32)
    note = pb.ServerNotification.DESCRIPTOR
    assert {f.name: f.number for f in note.oneofs_by_name["notification"].fields} == {
        "subscription_response": 1,
        "static_config_response": 3,
        "create_partition_response": 4,
        "delete_partition_response": 5,
        "update_partition_response": 6,
        "fm_event": 7,
        "health_state_changed": 8,
        "set_admin_state_response": 9,
        "domain_state_info": 10,
        "init_done": 11,
    }
    event = pb.FmEvent.DESCRIPTOR
    assert (event.fields_by_name["server_header"].number, event.fields_by_name["context"].number) == (1, 2)
    assert {f.name: f.number for f in event.oneofs_by_name["event"].fields} == {
        "fm_event_control_plane_state_change": 3,
        "fm_event_topology_change": 4,
        "fm_event_partition_change": 5,
    }
    attr = pb.PartitionAttr.DESCRIPTOR.fields_by_name
    assert (attr["resiliency_mode"].number, attr["resiliency_mode"].enum_type.name) == (1, "ResiliencyMode")
    assert (attr["multicast_groups_limit"].number, attr["multicast_groups_limit"].type) == (
        3,
        FieldDescriptor.TYPE_UINT32,
    )
    ident = pb.TransceiverIdentifier.DESCRIPTOR
    assert {f.name: f.number for f in ident.oneofs_by_name["chassisInfo"].fields} == {
        "chassis_serial_number": 1,
        "chassis_id": 2,
    }
    assert (ident.fields_by_name["slot_id"].type, ident.fields_by_name["transceiver_num"].type) == (
        FieldDescriptor.TYPE_UINT64,
        FieldDescriptor.TYPE_UINT32,
    )

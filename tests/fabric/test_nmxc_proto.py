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
    }
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

from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ProtoMsgMajorVersion(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    PROTO_MSG_MAJOR_VERSION_UNDEFINED: _ClassVar[ProtoMsgMajorVersion]
    PROTO_MSG_MAJOR_VERSION_OBSOLETE1: _ClassVar[ProtoMsgMajorVersion]
    PROTO_MSG_MAJOR_VERSION: _ClassVar[ProtoMsgMajorVersion]

class ProtoMsgMinorVersion(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    PROTO_MSG_MINOR_VERSION_UNDEFINED: _ClassVar[ProtoMsgMinorVersion]
    PROTO_MSG_MINOR_VERSION_OBSOLETE1: _ClassVar[ProtoMsgMinorVersion]
    PROTO_MSG_MINOR_VERSION_OBSOLETE2: _ClassVar[ProtoMsgMinorVersion]
    PROTO_MSG_MINOR_VERSION_OBSOLETE3: _ClassVar[ProtoMsgMinorVersion]
    PROTO_MSG_MINOR_VERSION: _ClassVar[ProtoMsgMinorVersion]

class StReturnCode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    NMX_ST_UNDEFINED: _ClassVar[StReturnCode]
    NMX_ST_SUCCESS: _ClassVar[StReturnCode]
    NMX_ST_BADPARAM: _ClassVar[StReturnCode]
    NMX_ST_GENERIC_ERROR: _ClassVar[StReturnCode]
    NMX_ST_NOT_SUPPORTED: _ClassVar[StReturnCode]
    NMX_ST_UNINITIALIZED: _ClassVar[StReturnCode]
    NMX_ST_TIMEOUT: _ClassVar[StReturnCode]
    NMX_ST_VERSION_MISMATCH: _ClassVar[StReturnCode]
    NMX_ST_IN_USE: _ClassVar[StReturnCode]
    NMX_ST_NOT_CONFIGURED: _ClassVar[StReturnCode]
    NMX_ST_CONNECTION_NOT_VALID: _ClassVar[StReturnCode]
    NMX_ST_NVLINK_ERROR: _ClassVar[StReturnCode]
    NMX_ST_RESOURCE_BAD: _ClassVar[StReturnCode]
    NMX_ST_RESOURCE_IN_USE: _ClassVar[StReturnCode]
    NMX_ST_RESOURCE_NOT_IN_USE: _ClassVar[StReturnCode]
    NMX_ST_RESOURCE_EXHAUSTED: _ClassVar[StReturnCode]
    NMX_ST_RESOURCE_NOT_READY: _ClassVar[StReturnCode]
    NMX_ST_PARTITION_EXISTS: _ClassVar[StReturnCode]
    NMX_ST_PARTITION_ID_IN_USE: _ClassVar[StReturnCode]
    NMX_ST_PARTITION_ID_NOT_IN_USE: _ClassVar[StReturnCode]
    NMX_ST_PARTITION_NAME_IN_USE: _ClassVar[StReturnCode]
    NMX_ST_PARTITION_NAME_NOT_IN_USE: _ClassVar[StReturnCode]
    NMX_ST_PARTITION_ID_NAME_MISMATCH: _ClassVar[StReturnCode]
    NMX_ST_NOT_READY: _ClassVar[StReturnCode]
    NMX_ST_NMX_CONTROLLER_INTERNAL_ERROR: _ClassVar[StReturnCode]
    NMX_ST_NMX_CONTROLLER_DB_ERROR: _ClassVar[StReturnCode]
    NMX_ST_NMX_CONTROLLER_DB_CORRUPTION: _ClassVar[StReturnCode]
    NMX_ST_NMX_CONTROLLER_INVALID_CONFIG_FILE: _ClassVar[StReturnCode]

class PartitionType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    NMX_PARTITION_TYPE_UNDEFINED: _ClassVar[PartitionType]
    NMX_PARTITION_TYPE_LOCATION_BASED: _ClassVar[PartitionType]
    NMX_PARTITION_TYPE_GPUUID_BASED: _ClassVar[PartitionType]

class PartitionHealth(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    NMX_PARTITION_HEALTH_UNKNOWN: _ClassVar[PartitionHealth]
    NMX_PARTITION_HEALTH_HEALTHY: _ClassVar[PartitionHealth]
    NMX_PARTITION_HEALTH_DEGRADED_BANDWIDTH: _ClassVar[PartitionHealth]
    NMX_PARTITION_HEALTH_DEGRADED: _ClassVar[PartitionHealth]
    NMX_PARTITION_HEALTH_UNHEALTHY: _ClassVar[PartitionHealth]

class GpuAttr(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    NMX_GPU_ATTR_UNDEFINED: _ClassVar[GpuAttr]
    NMX_GPU_ATTR_ALL: _ClassVar[GpuAttr]
    NMX_GPU_ATTR_LOCATION: _ClassVar[GpuAttr]
    NMX_GPU_ATTR_PARTITION_ID: _ClassVar[GpuAttr]

class GpuHealth(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    NMX_GPU_HEALTH_UNKNOWN: _ClassVar[GpuHealth]
    NMX_GPU_HEALTH_HEALTHY: _ClassVar[GpuHealth]
    NMX_GPU_HEALTH_DEGRADED: _ClassVar[GpuHealth]
    NMX_GPU_HEALTH_NO_NVLINK: _ClassVar[GpuHealth]
    NMX_GPU_HEALTH_DEGRADED_BW: _ClassVar[GpuHealth]

class ComputeNodeHealth(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    NMX_COMPUTE_NODE_HEALTH_UNKNOWN: _ClassVar[ComputeNodeHealth]
    NMX_COMPUTE_NODE_HEALTH_HEALTHY: _ClassVar[ComputeNodeHealth]
    NMX_COMPUTE_NODE_HEALTH_DEGRADED: _ClassVar[ComputeNodeHealth]
    NMX_COMPUTE_NODE_HEALTH_UNHEALTHY: _ClassVar[ComputeNodeHealth]

class ResiliencyMode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    NMX_RESILIENCY_MODE_UNDEFINED: _ClassVar[ResiliencyMode]
    NMX_RESILIENCY_MODE_FULL_BANDWIDTH: _ClassVar[ResiliencyMode]
    NMX_RESILIENCY_MODE_ADAPTIVE_BANDWIDTH: _ClassVar[ResiliencyMode]
    NMX_RESILIENCY_MODE_USER_ACTION_REQUIRED: _ClassVar[ResiliencyMode]

class ControlPlaneState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    NMX_CONTROL_PLANE_STATE_UNDEFINED: _ClassVar[ControlPlaneState]
    NMX_CONTROL_PLANE_STATE_OFFLINE: _ClassVar[ControlPlaneState]
    NMX_CONTROL_PLANE_STATE_STANDBY: _ClassVar[ControlPlaneState]
    NMX_CONTROL_PLANE_STATE_CONFIGURED: _ClassVar[ControlPlaneState]
    NMX_CONTROL_PLANE_STATE_TIMEOUT: _ClassVar[ControlPlaneState]
    NMX_CONTROL_PLANE_STATE_ERROR: _ClassVar[ControlPlaneState]
    NMX_CONTROL_PLANE_STATE_UNCONFIGURED: _ClassVar[ControlPlaneState]
    NMX_CONTROL_PLANE_STATE_DEGRADED: _ClassVar[ControlPlaneState]

class NmxControllerHealth(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    NMX_CONTROLLER_HEALTH_UNKNOWN: _ClassVar[NmxControllerHealth]
    NMX_CONTROLLER_HEALTH_HEALTHY: _ClassVar[NmxControllerHealth]
    NMX_CONTROLLER_HEALTH_DEGRADED: _ClassVar[NmxControllerHealth]
    NMX_CONTROLLER_HEALTH_UNHEALTHY: _ClassVar[NmxControllerHealth]
    NMX_CONTROLLER_HEALTH_UNHEALTHY_DB_CORRUPTED: _ClassVar[NmxControllerHealth]
PROTO_MSG_MAJOR_VERSION_UNDEFINED: ProtoMsgMajorVersion
PROTO_MSG_MAJOR_VERSION_OBSOLETE1: ProtoMsgMajorVersion
PROTO_MSG_MAJOR_VERSION: ProtoMsgMajorVersion
PROTO_MSG_MINOR_VERSION_UNDEFINED: ProtoMsgMinorVersion
PROTO_MSG_MINOR_VERSION_OBSOLETE1: ProtoMsgMinorVersion
PROTO_MSG_MINOR_VERSION_OBSOLETE2: ProtoMsgMinorVersion
PROTO_MSG_MINOR_VERSION_OBSOLETE3: ProtoMsgMinorVersion
PROTO_MSG_MINOR_VERSION: ProtoMsgMinorVersion
NMX_ST_UNDEFINED: StReturnCode
NMX_ST_SUCCESS: StReturnCode
NMX_ST_BADPARAM: StReturnCode
NMX_ST_GENERIC_ERROR: StReturnCode
NMX_ST_NOT_SUPPORTED: StReturnCode
NMX_ST_UNINITIALIZED: StReturnCode
NMX_ST_TIMEOUT: StReturnCode
NMX_ST_VERSION_MISMATCH: StReturnCode
NMX_ST_IN_USE: StReturnCode
NMX_ST_NOT_CONFIGURED: StReturnCode
NMX_ST_CONNECTION_NOT_VALID: StReturnCode
NMX_ST_NVLINK_ERROR: StReturnCode
NMX_ST_RESOURCE_BAD: StReturnCode
NMX_ST_RESOURCE_IN_USE: StReturnCode
NMX_ST_RESOURCE_NOT_IN_USE: StReturnCode
NMX_ST_RESOURCE_EXHAUSTED: StReturnCode
NMX_ST_RESOURCE_NOT_READY: StReturnCode
NMX_ST_PARTITION_EXISTS: StReturnCode
NMX_ST_PARTITION_ID_IN_USE: StReturnCode
NMX_ST_PARTITION_ID_NOT_IN_USE: StReturnCode
NMX_ST_PARTITION_NAME_IN_USE: StReturnCode
NMX_ST_PARTITION_NAME_NOT_IN_USE: StReturnCode
NMX_ST_PARTITION_ID_NAME_MISMATCH: StReturnCode
NMX_ST_NOT_READY: StReturnCode
NMX_ST_NMX_CONTROLLER_INTERNAL_ERROR: StReturnCode
NMX_ST_NMX_CONTROLLER_DB_ERROR: StReturnCode
NMX_ST_NMX_CONTROLLER_DB_CORRUPTION: StReturnCode
NMX_ST_NMX_CONTROLLER_INVALID_CONFIG_FILE: StReturnCode
NMX_PARTITION_TYPE_UNDEFINED: PartitionType
NMX_PARTITION_TYPE_LOCATION_BASED: PartitionType
NMX_PARTITION_TYPE_GPUUID_BASED: PartitionType
NMX_PARTITION_HEALTH_UNKNOWN: PartitionHealth
NMX_PARTITION_HEALTH_HEALTHY: PartitionHealth
NMX_PARTITION_HEALTH_DEGRADED_BANDWIDTH: PartitionHealth
NMX_PARTITION_HEALTH_DEGRADED: PartitionHealth
NMX_PARTITION_HEALTH_UNHEALTHY: PartitionHealth
NMX_GPU_ATTR_UNDEFINED: GpuAttr
NMX_GPU_ATTR_ALL: GpuAttr
NMX_GPU_ATTR_LOCATION: GpuAttr
NMX_GPU_ATTR_PARTITION_ID: GpuAttr
NMX_GPU_HEALTH_UNKNOWN: GpuHealth
NMX_GPU_HEALTH_HEALTHY: GpuHealth
NMX_GPU_HEALTH_DEGRADED: GpuHealth
NMX_GPU_HEALTH_NO_NVLINK: GpuHealth
NMX_GPU_HEALTH_DEGRADED_BW: GpuHealth
NMX_COMPUTE_NODE_HEALTH_UNKNOWN: ComputeNodeHealth
NMX_COMPUTE_NODE_HEALTH_HEALTHY: ComputeNodeHealth
NMX_COMPUTE_NODE_HEALTH_DEGRADED: ComputeNodeHealth
NMX_COMPUTE_NODE_HEALTH_UNHEALTHY: ComputeNodeHealth
NMX_RESILIENCY_MODE_UNDEFINED: ResiliencyMode
NMX_RESILIENCY_MODE_FULL_BANDWIDTH: ResiliencyMode
NMX_RESILIENCY_MODE_ADAPTIVE_BANDWIDTH: ResiliencyMode
NMX_RESILIENCY_MODE_USER_ACTION_REQUIRED: ResiliencyMode
NMX_CONTROL_PLANE_STATE_UNDEFINED: ControlPlaneState
NMX_CONTROL_PLANE_STATE_OFFLINE: ControlPlaneState
NMX_CONTROL_PLANE_STATE_STANDBY: ControlPlaneState
NMX_CONTROL_PLANE_STATE_CONFIGURED: ControlPlaneState
NMX_CONTROL_PLANE_STATE_TIMEOUT: ControlPlaneState
NMX_CONTROL_PLANE_STATE_ERROR: ControlPlaneState
NMX_CONTROL_PLANE_STATE_UNCONFIGURED: ControlPlaneState
NMX_CONTROL_PLANE_STATE_DEGRADED: ControlPlaneState
NMX_CONTROLLER_HEALTH_UNKNOWN: NmxControllerHealth
NMX_CONTROLLER_HEALTH_HEALTHY: NmxControllerHealth
NMX_CONTROLLER_HEALTH_DEGRADED: NmxControllerHealth
NMX_CONTROLLER_HEALTH_UNHEALTHY: NmxControllerHealth
NMX_CONTROLLER_HEALTH_UNHEALTHY_DB_CORRUPTED: NmxControllerHealth

class ServerHeader(_message.Message):
    __slots__ = ("domain_uuid", "app_uuid", "app_ver", "return_code")
    DOMAIN_UUID_FIELD_NUMBER: _ClassVar[int]
    APP_UUID_FIELD_NUMBER: _ClassVar[int]
    APP_VER_FIELD_NUMBER: _ClassVar[int]
    RETURN_CODE_FIELD_NUMBER: _ClassVar[int]
    domain_uuid: str
    app_uuid: str
    app_ver: str
    return_code: StReturnCode
    def __init__(self, domain_uuid: _Optional[str] = ..., app_uuid: _Optional[str] = ..., app_ver: _Optional[str] = ..., return_code: _Optional[_Union[StReturnCode, str]] = ...) -> None: ...

class KeyValPair(_message.Message):
    __slots__ = ("key", "value")
    KEY_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    key: str
    value: str
    def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...

class Context(_message.Message):
    __slots__ = ("context",)
    CONTEXT_FIELD_NUMBER: _ClassVar[int]
    context: str
    def __init__(self, context: _Optional[str] = ...) -> None: ...

class PartitionId(_message.Message):
    __slots__ = ("partition_id",)
    PARTITION_ID_FIELD_NUMBER: _ClassVar[int]
    partition_id: int
    def __init__(self, partition_id: _Optional[int] = ...) -> None: ...

class Location(_message.Message):
    __slots__ = ("chassis_id", "slot_id", "host_id")
    CHASSIS_ID_FIELD_NUMBER: _ClassVar[int]
    SLOT_ID_FIELD_NUMBER: _ClassVar[int]
    HOST_ID_FIELD_NUMBER: _ClassVar[int]
    chassis_id: int
    slot_id: int
    host_id: int
    def __init__(self, chassis_id: _Optional[int] = ..., slot_id: _Optional[int] = ..., host_id: _Optional[int] = ...) -> None: ...

class LocationInfo(_message.Message):
    __slots__ = ("chassis_serial_number", "tray_index", "location")
    CHASSIS_SERIAL_NUMBER_FIELD_NUMBER: _ClassVar[int]
    TRAY_INDEX_FIELD_NUMBER: _ClassVar[int]
    LOCATION_FIELD_NUMBER: _ClassVar[int]
    chassis_serial_number: str
    tray_index: int
    location: Location
    def __init__(self, chassis_serial_number: _Optional[str] = ..., tray_index: _Optional[int] = ..., location: _Optional[_Union[Location, _Mapping]] = ...) -> None: ...

class GpuLocation(_message.Message):
    __slots__ = ("loc", "gpu_id")
    LOC_FIELD_NUMBER: _ClassVar[int]
    GPU_ID_FIELD_NUMBER: _ClassVar[int]
    loc: Location
    gpu_id: int
    def __init__(self, loc: _Optional[_Union[Location, _Mapping]] = ..., gpu_id: _Optional[int] = ...) -> None: ...

class GpuResourceId(_message.Message):
    __slots__ = ("gpu_location", "gpu_uid")
    GPU_LOCATION_FIELD_NUMBER: _ClassVar[int]
    GPU_UID_FIELD_NUMBER: _ClassVar[int]
    gpu_location: GpuLocation
    gpu_uid: int
    def __init__(self, gpu_location: _Optional[_Union[GpuLocation, _Mapping]] = ..., gpu_uid: _Optional[int] = ...) -> None: ...

class PartitionAttr(_message.Message):
    __slots__ = ("resiliency_mode", "multicast_groups_limit")
    RESILIENCY_MODE_FIELD_NUMBER: _ClassVar[int]
    MULTICAST_GROUPS_LIMIT_FIELD_NUMBER: _ClassVar[int]
    resiliency_mode: ResiliencyMode
    multicast_groups_limit: int
    def __init__(self, resiliency_mode: _Optional[_Union[ResiliencyMode, str]] = ..., multicast_groups_limit: _Optional[int] = ...) -> None: ...

class ClientHello(_message.Message):
    __slots__ = ("gateway_id", "major_version", "minor_version")
    GATEWAY_ID_FIELD_NUMBER: _ClassVar[int]
    MAJOR_VERSION_FIELD_NUMBER: _ClassVar[int]
    MINOR_VERSION_FIELD_NUMBER: _ClassVar[int]
    gateway_id: str
    major_version: ProtoMsgMajorVersion
    minor_version: ProtoMsgMinorVersion
    def __init__(self, gateway_id: _Optional[str] = ..., major_version: _Optional[_Union[ProtoMsgMajorVersion, str]] = ..., minor_version: _Optional[_Union[ProtoMsgMinorVersion, str]] = ...) -> None: ...

class ServerHello(_message.Message):
    __slots__ = ("server_header", "components_ver", "capabilities", "host_os_details", "major_version", "minor_version")
    SERVER_HEADER_FIELD_NUMBER: _ClassVar[int]
    COMPONENTS_VER_FIELD_NUMBER: _ClassVar[int]
    CAPABILITIES_FIELD_NUMBER: _ClassVar[int]
    HOST_OS_DETAILS_FIELD_NUMBER: _ClassVar[int]
    MAJOR_VERSION_FIELD_NUMBER: _ClassVar[int]
    MINOR_VERSION_FIELD_NUMBER: _ClassVar[int]
    server_header: ServerHeader
    components_ver: _containers.RepeatedCompositeFieldContainer[KeyValPair]
    capabilities: _containers.RepeatedScalarFieldContainer[str]
    host_os_details: str
    major_version: ProtoMsgMajorVersion
    minor_version: ProtoMsgMinorVersion
    def __init__(self, server_header: _Optional[_Union[ServerHeader, _Mapping]] = ..., components_ver: _Optional[_Iterable[_Union[KeyValPair, _Mapping]]] = ..., capabilities: _Optional[_Iterable[str]] = ..., host_os_details: _Optional[str] = ..., major_version: _Optional[_Union[ProtoMsgMajorVersion, str]] = ..., minor_version: _Optional[_Union[ProtoMsgMinorVersion, str]] = ...) -> None: ...

class PartitionInfo(_message.Message):
    __slots__ = ("partition_id", "name", "num_gpus", "gpu_location_list", "gpu_uid_list", "health", "partition_type", "num_allocated_multicast_groups", "attr")
    PARTITION_ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    NUM_GPUS_FIELD_NUMBER: _ClassVar[int]
    GPU_LOCATION_LIST_FIELD_NUMBER: _ClassVar[int]
    GPU_UID_LIST_FIELD_NUMBER: _ClassVar[int]
    HEALTH_FIELD_NUMBER: _ClassVar[int]
    PARTITION_TYPE_FIELD_NUMBER: _ClassVar[int]
    NUM_ALLOCATED_MULTICAST_GROUPS_FIELD_NUMBER: _ClassVar[int]
    ATTR_FIELD_NUMBER: _ClassVar[int]
    partition_id: PartitionId
    name: str
    num_gpus: int
    gpu_location_list: _containers.RepeatedCompositeFieldContainer[GpuLocation]
    gpu_uid_list: _containers.RepeatedScalarFieldContainer[int]
    health: PartitionHealth
    partition_type: PartitionType
    num_allocated_multicast_groups: int
    attr: PartitionAttr
    def __init__(self, partition_id: _Optional[_Union[PartitionId, _Mapping]] = ..., name: _Optional[str] = ..., num_gpus: _Optional[int] = ..., gpu_location_list: _Optional[_Iterable[_Union[GpuLocation, _Mapping]]] = ..., gpu_uid_list: _Optional[_Iterable[int]] = ..., health: _Optional[_Union[PartitionHealth, str]] = ..., partition_type: _Optional[_Union[PartitionType, str]] = ..., num_allocated_multicast_groups: _Optional[int] = ..., attr: _Optional[_Union[PartitionAttr, _Mapping]] = ...) -> None: ...

class GetPartitionInfoListRequest(_message.Message):
    __slots__ = ("context", "partition_id_list", "partition_name_list", "gateway_id")
    CONTEXT_FIELD_NUMBER: _ClassVar[int]
    PARTITION_ID_LIST_FIELD_NUMBER: _ClassVar[int]
    PARTITION_NAME_LIST_FIELD_NUMBER: _ClassVar[int]
    GATEWAY_ID_FIELD_NUMBER: _ClassVar[int]
    context: Context
    partition_id_list: _containers.RepeatedCompositeFieldContainer[PartitionId]
    partition_name_list: _containers.RepeatedScalarFieldContainer[str]
    gateway_id: str
    def __init__(self, context: _Optional[_Union[Context, _Mapping]] = ..., partition_id_list: _Optional[_Iterable[_Union[PartitionId, _Mapping]]] = ..., partition_name_list: _Optional[_Iterable[str]] = ..., gateway_id: _Optional[str] = ...) -> None: ...

class GetPartitionInfoListResponse(_message.Message):
    __slots__ = ("server_header", "context", "partition_info_list")
    SERVER_HEADER_FIELD_NUMBER: _ClassVar[int]
    CONTEXT_FIELD_NUMBER: _ClassVar[int]
    PARTITION_INFO_LIST_FIELD_NUMBER: _ClassVar[int]
    server_header: ServerHeader
    context: Context
    partition_info_list: _containers.RepeatedCompositeFieldContainer[PartitionInfo]
    def __init__(self, server_header: _Optional[_Union[ServerHeader, _Mapping]] = ..., context: _Optional[_Union[Context, _Mapping]] = ..., partition_info_list: _Optional[_Iterable[_Union[PartitionInfo, _Mapping]]] = ...) -> None: ...

class CreatePartitionRequest(_message.Message):
    __slots__ = ("context", "name", "gpu_resource_id", "attr", "partition_id", "gateway_id")
    CONTEXT_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    GPU_RESOURCE_ID_FIELD_NUMBER: _ClassVar[int]
    ATTR_FIELD_NUMBER: _ClassVar[int]
    PARTITION_ID_FIELD_NUMBER: _ClassVar[int]
    GATEWAY_ID_FIELD_NUMBER: _ClassVar[int]
    context: Context
    name: str
    gpu_resource_id: _containers.RepeatedCompositeFieldContainer[GpuResourceId]
    attr: PartitionAttr
    partition_id: PartitionId
    gateway_id: str
    def __init__(self, context: _Optional[_Union[Context, _Mapping]] = ..., name: _Optional[str] = ..., gpu_resource_id: _Optional[_Iterable[_Union[GpuResourceId, _Mapping]]] = ..., attr: _Optional[_Union[PartitionAttr, _Mapping]] = ..., partition_id: _Optional[_Union[PartitionId, _Mapping]] = ..., gateway_id: _Optional[str] = ...) -> None: ...

class CreatePartitionResponse(_message.Message):
    __slots__ = ("server_header", "context", "partition_id")
    SERVER_HEADER_FIELD_NUMBER: _ClassVar[int]
    CONTEXT_FIELD_NUMBER: _ClassVar[int]
    PARTITION_ID_FIELD_NUMBER: _ClassVar[int]
    server_header: ServerHeader
    context: Context
    partition_id: PartitionId
    def __init__(self, server_header: _Optional[_Union[ServerHeader, _Mapping]] = ..., context: _Optional[_Union[Context, _Mapping]] = ..., partition_id: _Optional[_Union[PartitionId, _Mapping]] = ...) -> None: ...

class DeletePartitionRequest(_message.Message):
    __slots__ = ("context", "partition_id", "gateway_id", "name")
    CONTEXT_FIELD_NUMBER: _ClassVar[int]
    PARTITION_ID_FIELD_NUMBER: _ClassVar[int]
    GATEWAY_ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    context: Context
    partition_id: PartitionId
    gateway_id: str
    name: str
    def __init__(self, context: _Optional[_Union[Context, _Mapping]] = ..., partition_id: _Optional[_Union[PartitionId, _Mapping]] = ..., gateway_id: _Optional[str] = ..., name: _Optional[str] = ...) -> None: ...

class DeletePartitionResponse(_message.Message):
    __slots__ = ("server_header", "context", "partition_id")
    SERVER_HEADER_FIELD_NUMBER: _ClassVar[int]
    CONTEXT_FIELD_NUMBER: _ClassVar[int]
    PARTITION_ID_FIELD_NUMBER: _ClassVar[int]
    server_header: ServerHeader
    context: Context
    partition_id: PartitionId
    def __init__(self, server_header: _Optional[_Union[ServerHeader, _Mapping]] = ..., context: _Optional[_Union[Context, _Mapping]] = ..., partition_id: _Optional[_Union[PartitionId, _Mapping]] = ...) -> None: ...

class UpdatePartitionRequest(_message.Message):
    __slots__ = ("context", "partition_id", "location_list", "gpu_uid", "gateway_id", "name", "reroute")
    CONTEXT_FIELD_NUMBER: _ClassVar[int]
    PARTITION_ID_FIELD_NUMBER: _ClassVar[int]
    LOCATION_LIST_FIELD_NUMBER: _ClassVar[int]
    GPU_UID_FIELD_NUMBER: _ClassVar[int]
    GATEWAY_ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    REROUTE_FIELD_NUMBER: _ClassVar[int]
    context: Context
    partition_id: PartitionId
    location_list: _containers.RepeatedCompositeFieldContainer[GpuLocation]
    gpu_uid: _containers.RepeatedScalarFieldContainer[int]
    gateway_id: str
    name: str
    reroute: bool
    def __init__(self, context: _Optional[_Union[Context, _Mapping]] = ..., partition_id: _Optional[_Union[PartitionId, _Mapping]] = ..., location_list: _Optional[_Iterable[_Union[GpuLocation, _Mapping]]] = ..., gpu_uid: _Optional[_Iterable[int]] = ..., gateway_id: _Optional[str] = ..., name: _Optional[str] = ..., reroute: _Optional[bool] = ...) -> None: ...

class UpdatePartitionResponse(_message.Message):
    __slots__ = ("server_header", "context", "partition_id")
    SERVER_HEADER_FIELD_NUMBER: _ClassVar[int]
    CONTEXT_FIELD_NUMBER: _ClassVar[int]
    PARTITION_ID_FIELD_NUMBER: _ClassVar[int]
    server_header: ServerHeader
    context: Context
    partition_id: PartitionId
    def __init__(self, server_header: _Optional[_Union[ServerHeader, _Mapping]] = ..., context: _Optional[_Union[Context, _Mapping]] = ..., partition_id: _Optional[_Union[PartitionId, _Mapping]] = ...) -> None: ...

class GetGpuInfoListRequest(_message.Message):
    __slots__ = ("context", "attr", "num_gpus", "loc", "partition_id", "gateway_id", "gpu_health")
    CONTEXT_FIELD_NUMBER: _ClassVar[int]
    ATTR_FIELD_NUMBER: _ClassVar[int]
    NUM_GPUS_FIELD_NUMBER: _ClassVar[int]
    LOC_FIELD_NUMBER: _ClassVar[int]
    PARTITION_ID_FIELD_NUMBER: _ClassVar[int]
    GATEWAY_ID_FIELD_NUMBER: _ClassVar[int]
    GPU_HEALTH_FIELD_NUMBER: _ClassVar[int]
    context: Context
    attr: GpuAttr
    num_gpus: int
    loc: Location
    partition_id: PartitionId
    gateway_id: str
    gpu_health: GpuHealth
    def __init__(self, context: _Optional[_Union[Context, _Mapping]] = ..., attr: _Optional[_Union[GpuAttr, str]] = ..., num_gpus: _Optional[int] = ..., loc: _Optional[_Union[Location, _Mapping]] = ..., partition_id: _Optional[_Union[PartitionId, _Mapping]] = ..., gateway_id: _Optional[str] = ..., gpu_health: _Optional[_Union[GpuHealth, str]] = ...) -> None: ...

class GpuInfo(_message.Message):
    __slots__ = ("loc", "gpu_id", "gpu_uid", "gpu_health", "partition_id")
    LOC_FIELD_NUMBER: _ClassVar[int]
    GPU_ID_FIELD_NUMBER: _ClassVar[int]
    GPU_UID_FIELD_NUMBER: _ClassVar[int]
    GPU_HEALTH_FIELD_NUMBER: _ClassVar[int]
    PARTITION_ID_FIELD_NUMBER: _ClassVar[int]
    loc: LocationInfo
    gpu_id: int
    gpu_uid: int
    gpu_health: GpuHealth
    partition_id: PartitionId
    def __init__(self, loc: _Optional[_Union[LocationInfo, _Mapping]] = ..., gpu_id: _Optional[int] = ..., gpu_uid: _Optional[int] = ..., gpu_health: _Optional[_Union[GpuHealth, str]] = ..., partition_id: _Optional[_Union[PartitionId, _Mapping]] = ...) -> None: ...

class GetGpuInfoListResponse(_message.Message):
    __slots__ = ("server_header", "context", "gpu_info_list")
    SERVER_HEADER_FIELD_NUMBER: _ClassVar[int]
    CONTEXT_FIELD_NUMBER: _ClassVar[int]
    GPU_INFO_LIST_FIELD_NUMBER: _ClassVar[int]
    server_header: ServerHeader
    context: Context
    gpu_info_list: _containers.RepeatedCompositeFieldContainer[GpuInfo]
    def __init__(self, server_header: _Optional[_Union[ServerHeader, _Mapping]] = ..., context: _Optional[_Union[Context, _Mapping]] = ..., gpu_info_list: _Optional[_Iterable[_Union[GpuInfo, _Mapping]]] = ...) -> None: ...

class GetComputeNodeInfoListRequest(_message.Message):
    __slots__ = ("context", "loc_list", "gateway_id")
    CONTEXT_FIELD_NUMBER: _ClassVar[int]
    LOC_LIST_FIELD_NUMBER: _ClassVar[int]
    GATEWAY_ID_FIELD_NUMBER: _ClassVar[int]
    context: Context
    loc_list: _containers.RepeatedCompositeFieldContainer[Location]
    gateway_id: str
    def __init__(self, context: _Optional[_Union[Context, _Mapping]] = ..., loc_list: _Optional[_Iterable[_Union[Location, _Mapping]]] = ..., gateway_id: _Optional[str] = ...) -> None: ...

class ComputeNodeInfo(_message.Message):
    __slots__ = ("loc", "num_gpus", "node_health", "partition_id_list")
    LOC_FIELD_NUMBER: _ClassVar[int]
    NUM_GPUS_FIELD_NUMBER: _ClassVar[int]
    NODE_HEALTH_FIELD_NUMBER: _ClassVar[int]
    PARTITION_ID_LIST_FIELD_NUMBER: _ClassVar[int]
    loc: LocationInfo
    num_gpus: int
    node_health: ComputeNodeHealth
    partition_id_list: _containers.RepeatedCompositeFieldContainer[PartitionId]
    def __init__(self, loc: _Optional[_Union[LocationInfo, _Mapping]] = ..., num_gpus: _Optional[int] = ..., node_health: _Optional[_Union[ComputeNodeHealth, str]] = ..., partition_id_list: _Optional[_Iterable[_Union[PartitionId, _Mapping]]] = ...) -> None: ...

class GetComputeNodeInfoListResponse(_message.Message):
    __slots__ = ("server_header", "context", "node_info_list")
    SERVER_HEADER_FIELD_NUMBER: _ClassVar[int]
    CONTEXT_FIELD_NUMBER: _ClassVar[int]
    NODE_INFO_LIST_FIELD_NUMBER: _ClassVar[int]
    server_header: ServerHeader
    context: Context
    node_info_list: _containers.RepeatedCompositeFieldContainer[ComputeNodeInfo]
    def __init__(self, server_header: _Optional[_Union[ServerHeader, _Mapping]] = ..., context: _Optional[_Union[Context, _Mapping]] = ..., node_info_list: _Optional[_Iterable[_Union[ComputeNodeInfo, _Mapping]]] = ...) -> None: ...

class GetDomainPropertiesRequest(_message.Message):
    __slots__ = ("context", "gateway_id")
    CONTEXT_FIELD_NUMBER: _ClassVar[int]
    GATEWAY_ID_FIELD_NUMBER: _ClassVar[int]
    context: Context
    gateway_id: str
    def __init__(self, context: _Optional[_Union[Context, _Mapping]] = ..., gateway_id: _Optional[str] = ...) -> None: ...

class DomainProperties(_message.Message):
    __slots__ = ("server_header", "context", "max_compute_nodes", "max_compute_nodes_per_chassis", "max_gpus_per_compute_node", "max_gpu_nv_links", "line_rate_mbps", "max_switch_nodes", "max_switch_nodes_per_chassis", "max_switches_per_switch_node", "max_switch_nv_links", "min_gpus_per_partition", "max_num_partitions", "max_num_alids", "max_multicast_groups", "max_num_ports")
    SERVER_HEADER_FIELD_NUMBER: _ClassVar[int]
    CONTEXT_FIELD_NUMBER: _ClassVar[int]
    MAX_COMPUTE_NODES_FIELD_NUMBER: _ClassVar[int]
    MAX_COMPUTE_NODES_PER_CHASSIS_FIELD_NUMBER: _ClassVar[int]
    MAX_GPUS_PER_COMPUTE_NODE_FIELD_NUMBER: _ClassVar[int]
    MAX_GPU_NV_LINKS_FIELD_NUMBER: _ClassVar[int]
    LINE_RATE_MBPS_FIELD_NUMBER: _ClassVar[int]
    MAX_SWITCH_NODES_FIELD_NUMBER: _ClassVar[int]
    MAX_SWITCH_NODES_PER_CHASSIS_FIELD_NUMBER: _ClassVar[int]
    MAX_SWITCHES_PER_SWITCH_NODE_FIELD_NUMBER: _ClassVar[int]
    MAX_SWITCH_NV_LINKS_FIELD_NUMBER: _ClassVar[int]
    MIN_GPUS_PER_PARTITION_FIELD_NUMBER: _ClassVar[int]
    MAX_NUM_PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    MAX_NUM_ALIDS_FIELD_NUMBER: _ClassVar[int]
    MAX_MULTICAST_GROUPS_FIELD_NUMBER: _ClassVar[int]
    MAX_NUM_PORTS_FIELD_NUMBER: _ClassVar[int]
    server_header: ServerHeader
    context: Context
    max_compute_nodes: int
    max_compute_nodes_per_chassis: int
    max_gpus_per_compute_node: int
    max_gpu_nv_links: int
    line_rate_mbps: int
    max_switch_nodes: int
    max_switch_nodes_per_chassis: int
    max_switches_per_switch_node: int
    max_switch_nv_links: int
    min_gpus_per_partition: int
    max_num_partitions: int
    max_num_alids: int
    max_multicast_groups: int
    max_num_ports: int
    def __init__(self, server_header: _Optional[_Union[ServerHeader, _Mapping]] = ..., context: _Optional[_Union[Context, _Mapping]] = ..., max_compute_nodes: _Optional[int] = ..., max_compute_nodes_per_chassis: _Optional[int] = ..., max_gpus_per_compute_node: _Optional[int] = ..., max_gpu_nv_links: _Optional[int] = ..., line_rate_mbps: _Optional[int] = ..., max_switch_nodes: _Optional[int] = ..., max_switch_nodes_per_chassis: _Optional[int] = ..., max_switches_per_switch_node: _Optional[int] = ..., max_switch_nv_links: _Optional[int] = ..., min_gpus_per_partition: _Optional[int] = ..., max_num_partitions: _Optional[int] = ..., max_num_alids: _Optional[int] = ..., max_multicast_groups: _Optional[int] = ..., max_num_ports: _Optional[int] = ...) -> None: ...

class GetDomainStateInfoRequest(_message.Message):
    __slots__ = ("context", "gateway_id")
    CONTEXT_FIELD_NUMBER: _ClassVar[int]
    GATEWAY_ID_FIELD_NUMBER: _ClassVar[int]
    context: Context
    gateway_id: str
    def __init__(self, context: _Optional[_Union[Context, _Mapping]] = ..., gateway_id: _Optional[str] = ...) -> None: ...

class DomainStateInfo(_message.Message):
    __slots__ = ("server_header", "context", "control_plane_state", "available_multicast_groups", "config_status_description", "nmx_controller_health")
    SERVER_HEADER_FIELD_NUMBER: _ClassVar[int]
    CONTEXT_FIELD_NUMBER: _ClassVar[int]
    CONTROL_PLANE_STATE_FIELD_NUMBER: _ClassVar[int]
    AVAILABLE_MULTICAST_GROUPS_FIELD_NUMBER: _ClassVar[int]
    CONFIG_STATUS_DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    NMX_CONTROLLER_HEALTH_FIELD_NUMBER: _ClassVar[int]
    server_header: ServerHeader
    context: Context
    control_plane_state: ControlPlaneState
    available_multicast_groups: int
    config_status_description: str
    nmx_controller_health: NmxControllerHealth
    def __init__(self, server_header: _Optional[_Union[ServerHeader, _Mapping]] = ..., context: _Optional[_Union[Context, _Mapping]] = ..., control_plane_state: _Optional[_Union[ControlPlaneState, str]] = ..., available_multicast_groups: _Optional[int] = ..., config_status_description: _Optional[str] = ..., nmx_controller_health: _Optional[_Union[NmxControllerHealth, str]] = ...) -> None: ...

class SubscribeRequest(_message.Message):
    __slots__ = ("gateway_id", "notify_on_self_change", "heart_beat_rate")
    GATEWAY_ID_FIELD_NUMBER: _ClassVar[int]
    NOTIFY_ON_SELF_CHANGE_FIELD_NUMBER: _ClassVar[int]
    HEART_BEAT_RATE_FIELD_NUMBER: _ClassVar[int]
    gateway_id: str
    notify_on_self_change: bool
    heart_beat_rate: int
    def __init__(self, gateway_id: _Optional[str] = ..., notify_on_self_change: _Optional[bool] = ..., heart_beat_rate: _Optional[int] = ...) -> None: ...

class FmEventPartitionChange(_message.Message):
    __slots__ = ("context", "partition_id")
    CONTEXT_FIELD_NUMBER: _ClassVar[int]
    PARTITION_ID_FIELD_NUMBER: _ClassVar[int]
    context: Context
    partition_id: PartitionId
    def __init__(self, context: _Optional[_Union[Context, _Mapping]] = ..., partition_id: _Optional[_Union[PartitionId, _Mapping]] = ...) -> None: ...

class FmEvent(_message.Message):
    __slots__ = ("server_header", "context", "fm_event_partition_change")
    SERVER_HEADER_FIELD_NUMBER: _ClassVar[int]
    CONTEXT_FIELD_NUMBER: _ClassVar[int]
    FM_EVENT_PARTITION_CHANGE_FIELD_NUMBER: _ClassVar[int]
    server_header: ServerHeader
    context: Context
    fm_event_partition_change: FmEventPartitionChange
    def __init__(self, server_header: _Optional[_Union[ServerHeader, _Mapping]] = ..., context: _Optional[_Union[Context, _Mapping]] = ..., fm_event_partition_change: _Optional[_Union[FmEventPartitionChange, _Mapping]] = ...) -> None: ...

class ServerNotification(_message.Message):
    __slots__ = ("create_partition_response", "delete_partition_response", "update_partition_response", "fm_event", "domain_state_info")
    CREATE_PARTITION_RESPONSE_FIELD_NUMBER: _ClassVar[int]
    DELETE_PARTITION_RESPONSE_FIELD_NUMBER: _ClassVar[int]
    UPDATE_PARTITION_RESPONSE_FIELD_NUMBER: _ClassVar[int]
    FM_EVENT_FIELD_NUMBER: _ClassVar[int]
    DOMAIN_STATE_INFO_FIELD_NUMBER: _ClassVar[int]
    create_partition_response: CreatePartitionResponse
    delete_partition_response: DeletePartitionResponse
    update_partition_response: UpdatePartitionResponse
    fm_event: FmEvent
    domain_state_info: DomainStateInfo
    def __init__(self, create_partition_response: _Optional[_Union[CreatePartitionResponse, _Mapping]] = ..., delete_partition_response: _Optional[_Union[DeletePartitionResponse, _Mapping]] = ..., update_partition_response: _Optional[_Union[UpdatePartitionResponse, _Mapping]] = ..., fm_event: _Optional[_Union[FmEvent, _Mapping]] = ..., domain_state_info: _Optional[_Union[DomainStateInfo, _Mapping]] = ...) -> None: ...

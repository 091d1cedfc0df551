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

class AdminState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    NMX_ADMIN_STATE_UNKNOWN: _ClassVar[AdminState]
    NMX_ADMIN_STATE_UP: _ClassVar[AdminState]
    NMX_ADMIN_STATE_DOWN: _ClassVar[AdminState]
    NMX_ADMIN_STATE_DIAG: _ClassVar[AdminState]

class ComputeNodeAttr(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    NMX_COMPUTE_NODE_ATTR_UNDEFINED: _ClassVar[ComputeNodeAttr]
    NMX_COMPUTE_NODE_ATTR_ALL: _ClassVar[ComputeNodeAttr]
    NMX_COMPUTE_NODE_ATTR_FREE: _ClassVar[ComputeNodeAttr]
    NMX_COMPUTE_NODE_ATTR_FULLY_ALLOCATED: _ClassVar[ComputeNodeAttr]
    NMX_COMPUTE_NODE_ATTR_PARTIALLY_ALLOCATED: _ClassVar[ComputeNodeAttr]

class DeviceType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    NMX_DEVICE_TYPE_UNDEFINED: _ClassVar[DeviceType]
    NMX_DEVICE_TYPE_SWITCH: _ClassVar[DeviceType]
    NMX_DEVICE_TYPE_GPU: _ClassVar[DeviceType]
    NMX_DEVICE_TYPE_ROUTER: _ClassVar[DeviceType]
    NMX_DEVICE_TYPE_CA: _ClassVar[DeviceType]

class LogicalLinkState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    NMX_LOGICAL_LINK_NO_CHANGE: _ClassVar[LogicalLinkState]
    NMX_LOGICAL_LINK_STATE_DOWN: _ClassVar[LogicalLinkState]
    NMX_LOGICAL_LINK_STATE_INIT: _ClassVar[LogicalLinkState]
    NMX_LOGICAL_LINK_STATE_ARMED: _ClassVar[LogicalLinkState]
    NMX_LOGICAL_LINK_STATE_ACTIVE: _ClassVar[LogicalLinkState]
    NMX_LOGICAL_LINK_STATE_ACT_DEFER: _ClassVar[LogicalLinkState]

class PartitionInfoAttr(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    NMX_PARTITION_INFO_ATTR_UNDEFINED: _ClassVar[PartitionInfoAttr]
    NMX_PARTITION_INFO_ATTR_ALL: _ClassVar[PartitionInfoAttr]
    NMX_PARTITION_INFO_ATTR_NUM_GPUS: _ClassVar[PartitionInfoAttr]
    NMX_PARTITION_INFO_ATTR_NUM_COMPUTE_NODES: _ClassVar[PartitionInfoAttr]

class PhysicalPortState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    NMX_PORT_PHYS_STATE_NO_CHANGE: _ClassVar[PhysicalPortState]
    NMX_PORT_PHYS_STATE_SLEEP: _ClassVar[PhysicalPortState]
    NMX_PORT_PHYS_STATE_POLLING: _ClassVar[PhysicalPortState]
    NMX_PORT_PHYS_STATE_DISABLED: _ClassVar[PhysicalPortState]
    NMX_PORT_PHYS_STATE_PORTCONFTRAIN: _ClassVar[PhysicalPortState]
    NMX_PORT_PHYS_STATE_LINKUP: _ClassVar[PhysicalPortState]
    NMX_PORT_PHYS_STATE_LINKERRRECOVER: _ClassVar[PhysicalPortState]
    NMX_PORT_PHYS_STATE_PHYTEST: _ClassVar[PhysicalPortState]

class PortType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    NMX_PORT_TYPE_UNDEFINED: _ClassVar[PortType]
    NMX_PORT_TYPE_GPU: _ClassVar[PortType]
    NMX_PORT_TYPE_SWITCH_ACCESS: _ClassVar[PortType]
    NMX_PORT_TYPE_SWITCH_TRUNK: _ClassVar[PortType]
    NMX_PORT_TYPE_FNM: _ClassVar[PortType]
    NMX_PORT_TYPE_HCA: _ClassVar[PortType]

class ReportType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    NMX_REPORT_TYPE_UNKNOWN: _ClassVar[ReportType]
    NMX_REPORT_TYPE_TOPOLOGY: _ClassVar[ReportType]
    NMX_REPORT_TYPE_PARTITIONS: _ClassVar[ReportType]

class SwitchHealth(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    NMX_SWITCH_HEALTH_UNKNOWN: _ClassVar[SwitchHealth]
    NMX_SWITCH_HEALTH_HEALTHY: _ClassVar[SwitchHealth]
    NMX_SWITCH_HEALTH_MISSING_NVLINK: _ClassVar[SwitchHealth]
    NMX_SWITCH_HEALTH_UNHEALTHY: _ClassVar[SwitchHealth]

class SwitchNodeAttr(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    NMX_SWITCH_NODE_ATTR_UNDEFINED: _ClassVar[SwitchNodeAttr]
    NMX_SWITCH_NODE_ATTR_ALL: _ClassVar[SwitchNodeAttr]
    NMX_SWITCH_NODE_ATTR_L1: _ClassVar[SwitchNodeAttr]
    NMX_SWITCH_NODE_ATTR_L2: _ClassVar[SwitchNodeAttr]

class SwitchNodeHealth(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    NMX_SWITCH_NODE_HEALTH_UNKNOWN: _ClassVar[SwitchNodeHealth]
    NMX_SWITCH_NODE_HEALTH_HEALTHY: _ClassVar[SwitchNodeHealth]
    NMX_SWITCH_NODE_HEALTH_MISSING_NVLINK: _ClassVar[SwitchNodeHealth]
    NMX_SWITCH_NODE_HEALTH_UNHEALTHY: _ClassVar[SwitchNodeHealth]
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
NMX_ADMIN_STATE_UNKNOWN: AdminState
NMX_ADMIN_STATE_UP: AdminState
NMX_ADMIN_STATE_DOWN: AdminState
NMX_ADMIN_STATE_DIAG: AdminState
NMX_COMPUTE_NODE_ATTR_UNDEFINED: ComputeNodeAttr
NMX_COMPUTE_NODE_ATTR_ALL: ComputeNodeAttr
NMX_COMPUTE_NODE_ATTR_FREE: ComputeNodeAttr
NMX_COMPUTE_NODE_ATTR_FULLY_ALLOCATED: ComputeNodeAttr
NMX_COMPUTE_NODE_ATTR_PARTIALLY_ALLOCATED: ComputeNodeAttr
NMX_DEVICE_TYPE_UNDEFINED: DeviceType
NMX_DEVICE_TYPE_SWITCH: DeviceType
NMX_DEVICE_TYPE_GPU: DeviceType
NMX_DEVICE_TYPE_ROUTER: DeviceType
NMX_DEVICE_TYPE_CA: DeviceType
NMX_LOGICAL_LINK_NO_CHANGE: LogicalLinkState
NMX_LOGICAL_LINK_STATE_DOWN: LogicalLinkState
NMX_LOGICAL_LINK_STATE_INIT: LogicalLinkState
NMX_LOGICAL_LINK_STATE_ARMED: LogicalLinkState
NMX_LOGICAL_LINK_STATE_ACTIVE: LogicalLinkState
NMX_LOGICAL_LINK_STATE_ACT_DEFER: LogicalLinkState
NMX_PARTITION_INFO_ATTR_UNDEFINED: PartitionInfoAttr
NMX_PARTITION_INFO_ATTR_ALL: PartitionInfoAttr
NMX_PARTITION_INFO_ATTR_NUM_GPUS: PartitionInfoAttr
NMX_PARTITION_INFO_ATTR_NUM_COMPUTE_NODES: PartitionInfoAttr
NMX_PORT_PHYS_STATE_NO_CHANGE: PhysicalPortState
NMX_PORT_PHYS_STATE_SLEEP: PhysicalPortState
NMX_PORT_PHYS_STATE_POLLING: PhysicalPortState
NMX_PORT_PHYS_STATE_DISABLED: PhysicalPortState
NMX_PORT_PHYS_STATE_PORTCONFTRAIN: PhysicalPortState
NMX_PORT_PHYS_STATE_LINKUP: PhysicalPortState
NMX_PORT_PHYS_STATE_LINKERRRECOVER: PhysicalPortState
NMX_PORT_PHYS_STATE_PHYTEST: PhysicalPortState
NMX_PORT_TYPE_UNDEFINED: PortType
NMX_PORT_TYPE_GPU: PortType
NMX_PORT_TYPE_SWITCH_ACCESS: PortType
NMX_PORT_TYPE_SWITCH_TRUNK: PortType
NMX_PORT_TYPE_FNM: PortType
NMX_PORT_TYPE_HCA: PortType
NMX_REPORT_TYPE_UNKNOWN: ReportType
NMX_REPORT_TYPE_TOPOLOGY: ReportType
NMX_REPORT_TYPE_PARTITIONS: ReportType
NMX_SWITCH_HEALTH_UNKNOWN: SwitchHealth
NMX_SWITCH_HEALTH_HEALTHY: SwitchHealth
NMX_SWITCH_HEALTH_MISSING_NVLINK: SwitchHealth
NMX_SWITCH_HEALTH_UNHEALTHY: SwitchHealth
NMX_SWITCH_NODE_ATTR_UNDEFINED: SwitchNodeAttr
NMX_SWITCH_NODE_ATTR_ALL: SwitchNodeAttr
NMX_SWITCH_NODE_ATTR_L1: SwitchNodeAttr
NMX_SWITCH_NODE_ATTR_L2: SwitchNodeAttr
NMX_SWITCH_NODE_HEALTH_UNKNOWN: SwitchNodeHealth
NMX_SWITCH_NODE_HEALTH_HEALTHY: SwitchNodeHealth
NMX_SWITCH_NODE_HEALTH_MISSING_NVLINK: SwitchNodeHealth
NMX_SWITCH_NODE_HEALTH_UNHEALTHY: SwitchNodeHealth

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

class FmEventControlPlaneStateChange(_message.Message):
    __slots__ = ("context",)
    CONTEXT_FIELD_NUMBER: _ClassVar[int]
    context: Context
    def __init__(self, context: _Optional[_Union[Context, _Mapping]] = ...) -> None: ...

class FmEventTopologyChange(_message.Message):
    __slots__ = ("context",)
    CONTEXT_FIELD_NUMBER: _ClassVar[int]
    context: Context
    def __init__(self, context: _Optional[_Union[Context, _Mapping]] = ...) -> None: ...

class FmEvent(_message.Message):
    __slots__ = ("server_header", "context", "fm_event_control_plane_state_change", "fm_event_topology_change", "fm_event_partition_change")
    SERVER_HEADER_FIELD_NUMBER: _ClassVar[int]
    CONTEXT_FIELD_NUMBER: _ClassVar[int]
    FM_EVENT_CONTROL_PLANE_STATE_CHANGE_FIELD_NUMBER: _ClassVar[int]
    FM_EVENT_TOPOLOGY_CHANGE_FIELD_NUMBER: _ClassVar[int]
    FM_EVENT_PARTITION_CHANGE_FIELD_NUMBER: _ClassVar[int]
    server_header: ServerHeader
    context: Context
    fm_event_control_plane_state_change: FmEventControlPlaneStateChange
    fm_event_topology_change: FmEventTopologyChange
    fm_event_partition_change: FmEventPartitionChange
    def __init__(self, server_header: _Optional[_Union[ServerHeader, _Mapping]] = ..., context: _Optional[_Union[Context, _Mapping]] = ..., fm_event_control_plane_state_change: _Optional[_Union[FmEventControlPlaneStateChange, _Mapping]] = ..., fm_event_topology_change: _Optional[_Union[FmEventTopologyChange, _Mapping]] = ..., fm_event_partition_change: _Optional[_Union[FmEventPartitionChange, _Mapping]] = ...) -> None: ...

class SubscriptionResponse(_message.Message):
    __slots__ = ("server_header",)
    SERVER_HEADER_FIELD_NUMBER: _ClassVar[int]
    server_header: ServerHeader
    def __init__(self, server_header: _Optional[_Union[ServerHeader, _Mapping]] = ...) -> None: ...

class ReturnCode(_message.Message):
    __slots__ = ("server_header",)
    SERVER_HEADER_FIELD_NUMBER: _ClassVar[int]
    server_header: ServerHeader
    def __init__(self, server_header: _Optional[_Union[ServerHeader, _Mapping]] = ...) -> None: ...

class HealthStateChanged(_message.Message):
    __slots__ = ("server_header",)
    SERVER_HEADER_FIELD_NUMBER: _ClassVar[int]
    server_header: ServerHeader
    def __init__(self, server_header: _Optional[_Union[ServerHeader, _Mapping]] = ...) -> None: ...

class InitDone(_message.Message):
    __slots__ = ("server_header",)
    SERVER_HEADER_FIELD_NUMBER: _ClassVar[int]
    server_header: ServerHeader
    def __init__(self, server_header: _Optional[_Union[ServerHeader, _Mapping]] = ...) -> None: ...

class ServerNotification(_message.Message):
    __slots__ = ("subscription_response", "static_config_response", "create_partition_response", "delete_partition_response", "update_partition_response", "fm_event", "health_state_changed", "set_admin_state_response", "domain_state_info", "init_done")
    SUBSCRIPTION_RESPONSE_FIELD_NUMBER: _ClassVar[int]
    STATIC_CONFIG_RESPONSE_FIELD_NUMBER: _ClassVar[int]
    CREATE_PARTITION_RESPONSE_FIELD_NUMBER: _ClassVar[int]
    DELETE_PARTITION_RESPONSE_FIELD_NUMBER: _ClassVar[int]
    UPDATE_PARTITION_RESPONSE_FIELD_NUMBER: _ClassVar[int]
    FM_EVENT_FIELD_NUMBER: _ClassVar[int]
    HEALTH_STATE_CHANGED_FIELD_NUMBER: _ClassVar[int]
    SET_ADMIN_STATE_RESPONSE_FIELD_NUMBER: _ClassVar[int]
    DOMAIN_STATE_INFO_FIELD_NUMBER: _ClassVar[int]
    INIT_DONE_FIELD_NUMBER: _ClassVar[int]
    subscription_response: SubscriptionResponse
    static_config_response: ReturnCode
    create_partition_response: CreatePartitionResponse
    delete_partition_response: DeletePartitionResponse
    update_partition_response: UpdatePartitionResponse
    fm_event: FmEvent
    health_state_changed: HealthStateChanged
    set_admin_state_response: SetAdminStateResponse
    domain_state_info: DomainStateInfo
    init_done: InitDone
    def __init__(self, subscription_response: _Optional[_Union[SubscriptionResponse, _Mapping]] = ..., static_config_response: _Optional[_Union[ReturnCode, _Mapping]] = ..., create_partition_response: _Optional[_Union[CreatePartitionResponse, _Mapping]] = ..., delete_partition_response: _Optional[_Union[DeletePartitionResponse, _Mapping]] = ..., update_partition_response: _Optional[_Union[UpdatePartitionResponse, _Mapping]] = ..., fm_event: _Optional[_Union[FmEvent, _Mapping]] = ..., health_state_changed: _Optional[_Union[HealthStateChanged, _Mapping]] = ..., set_admin_state_response: _Optional[_Union[SetAdminStateResponse, _Mapping]] = ..., domain_state_info: _Optional[_Union[DomainStateInfo, _Mapping]] = ..., init_done: _Optional[_Union[InitDone, _Mapping]] = ...) -> None: ...

class TransceiverIdentifier(_message.Message):
    __slots__ = ("chassis_serial_number", "chassis_id", "slot_id", "transceiver_num")
    CHASSIS_SERIAL_NUMBER_FIELD_NUMBER: _ClassVar[int]
    CHASSIS_ID_FIELD_NUMBER: _ClassVar[int]
    SLOT_ID_FIELD_NUMBER: _ClassVar[int]
    TRANSCEIVER_NUM_FIELD_NUMBER: _ClassVar[int]
    chassis_serial_number: str
    chassis_id: int
    slot_id: int
    transceiver_num: int
    def __init__(self, chassis_serial_number: _Optional[str] = ..., chassis_id: _Optional[int] = ..., slot_id: _Optional[int] = ..., transceiver_num: _Optional[int] = ...) -> None: ...

class SlotId(_message.Message):
    __slots__ = ("slot_id",)
    SLOT_ID_FIELD_NUMBER: _ClassVar[int]
    slot_id: int
    def __init__(self, slot_id: _Optional[int] = ...) -> None: ...

class AdminStateEntry(_message.Message):
    __slots__ = ("admin_state", "transceiver_identifier")
    ADMIN_STATE_FIELD_NUMBER: _ClassVar[int]
    TRANSCEIVER_IDENTIFIER_FIELD_NUMBER: _ClassVar[int]
    admin_state: AdminState
    transceiver_identifier: TransceiverIdentifier
    def __init__(self, admin_state: _Optional[_Union[AdminState, str]] = ..., transceiver_identifier: _Optional[_Union[TransceiverIdentifier, _Mapping]] = ...) -> None: ...

class GetAdminStateRequest(_message.Message):
    __slots__ = ("context", "gateway_id", "transceiver_identifier")
    CONTEXT_FIELD_NUMBER: _ClassVar[int]
    GATEWAY_ID_FIELD_NUMBER: _ClassVar[int]
    TRANSCEIVER_IDENTIFIER_FIELD_NUMBER: _ClassVar[int]
    context: Context
    gateway_id: str
    transceiver_identifier: TransceiverIdentifier
    def __init__(self, context: _Optional[_Union[Context, _Mapping]] = ..., gateway_id: _Optional[str] = ..., transceiver_identifier: _Optional[_Union[TransceiverIdentifier, _Mapping]] = ...) -> None: ...

class GetAdminStateResponse(_message.Message):
    __slots__ = ("server_header", "context", "admin_state_entry")
    SERVER_HEADER_FIELD_NUMBER: _ClassVar[int]
    CONTEXT_FIELD_NUMBER: _ClassVar[int]
    ADMIN_STATE_ENTRY_FIELD_NUMBER: _ClassVar[int]
    server_header: ServerHeader
    context: Context
    admin_state_entry: _containers.RepeatedCompositeFieldContainer[AdminStateEntry]
    def __init__(self, server_header: _Optional[_Union[ServerHeader, _Mapping]] = ..., context: _Optional[_Union[Context, _Mapping]] = ..., admin_state_entry: _Optional[_Iterable[_Union[AdminStateEntry, _Mapping]]] = ...) -> None: ...

class SetAdminStateRequest(_message.Message):
    __slots__ = ("context", "gateway_id", "admin_state_entry")
    CONTEXT_FIELD_NUMBER: _ClassVar[int]
    GATEWAY_ID_FIELD_NUMBER: _ClassVar[int]
    ADMIN_STATE_ENTRY_FIELD_NUMBER: _ClassVar[int]
    context: Context
    gateway_id: str
    admin_state_entry: AdminStateEntry
    def __init__(self, context: _Optional[_Union[Context, _Mapping]] = ..., gateway_id: _Optional[str] = ..., admin_state_entry: _Optional[_Union[AdminStateEntry, _Mapping]] = ...) -> None: ...

class SetAdminStateResponse(_message.Message):
    __slots__ = ("server_header", "context", "admin_state_entry")
    SERVER_HEADER_FIELD_NUMBER: _ClassVar[int]
    CONTEXT_FIELD_NUMBER: _ClassVar[int]
    ADMIN_STATE_ENTRY_FIELD_NUMBER: _ClassVar[int]
    server_header: ServerHeader
    context: Context
    admin_state_entry: AdminStateEntry
    def __init__(self, server_header: _Optional[_Union[ServerHeader, _Mapping]] = ..., context: _Optional[_Union[Context, _Mapping]] = ..., admin_state_entry: _Optional[_Union[AdminStateEntry, _Mapping]] = ...) -> None: ...

class PortTopoInfo(_message.Message):
    __slots__ = ("port_type", "port_uid", "port_num", "peer_port_device_uid", "peer_port_num", "physical_state", "logical_state", "subnet_prefix", "is_sdn_port", "partition_id_list", "cage_num", "cage_port_num", "cage_split_port_num", "base_lid", "system_port_num", "compute_port_num", "contain_and_drain", "rail", "plane", "link_rate_mbps", "port_admin_state")
    PORT_TYPE_FIELD_NUMBER: _ClassVar[int]
    PORT_UID_FIELD_NUMBER: _ClassVar[int]
    PORT_NUM_FIELD_NUMBER: _ClassVar[int]
    PEER_PORT_DEVICE_UID_FIELD_NUMBER: _ClassVar[int]
    PEER_PORT_NUM_FIELD_NUMBER: _ClassVar[int]
    PHYSICAL_STATE_FIELD_NUMBER: _ClassVar[int]
    LOGICAL_STATE_FIELD_NUMBER: _ClassVar[int]
    SUBNET_PREFIX_FIELD_NUMBER: _ClassVar[int]
    IS_SDN_PORT_FIELD_NUMBER: _ClassVar[int]
    PARTITION_ID_LIST_FIELD_NUMBER: _ClassVar[int]
    CAGE_NUM_FIELD_NUMBER: _ClassVar[int]
    CAGE_PORT_NUM_FIELD_NUMBER: _ClassVar[int]
    CAGE_SPLIT_PORT_NUM_FIELD_NUMBER: _ClassVar[int]
    BASE_LID_FIELD_NUMBER: _ClassVar[int]
    SYSTEM_PORT_NUM_FIELD_NUMBER: _ClassVar[int]
    COMPUTE_PORT_NUM_FIELD_NUMBER: _ClassVar[int]
    CONTAIN_AND_DRAIN_FIELD_NUMBER: _ClassVar[int]
    RAIL_FIELD_NUMBER: _ClassVar[int]
    PLANE_FIELD_NUMBER: _ClassVar[int]
    LINK_RATE_MBPS_FIELD_NUMBER: _ClassVar[int]
    PORT_ADMIN_STATE_FIELD_NUMBER: _ClassVar[int]
    port_type: PortType
    port_uid: int
    port_num: int
    peer_port_device_uid: int
    peer_port_num: int
    physical_state: PhysicalPortState
    logical_state: LogicalLinkState
    subnet_prefix: int
    is_sdn_port: bool
    partition_id_list: _containers.RepeatedCompositeFieldContainer[PartitionId]
    cage_num: int
    cage_port_num: int
    cage_split_port_num: int
    base_lid: int
    system_port_num: int
    compute_port_num: int
    contain_and_drain: bool
    rail: int
    plane: int
    link_rate_mbps: int
    port_admin_state: AdminState
    def __init__(self, port_type: _Optional[_Union[PortType, str]] = ..., port_uid: _Optional[int] = ..., port_num: _Optional[int] = ..., peer_port_device_uid: _Optional[int] = ..., peer_port_num: _Optional[int] = ..., physical_state: _Optional[_Union[PhysicalPortState, str]] = ..., logical_state: _Optional[_Union[LogicalLinkState, str]] = ..., subnet_prefix: _Optional[int] = ..., is_sdn_port: _Optional[bool] = ..., partition_id_list: _Optional[_Iterable[_Union[PartitionId, _Mapping]]] = ..., cage_num: _Optional[int] = ..., cage_port_num: _Optional[int] = ..., cage_split_port_num: _Optional[int] = ..., base_lid: _Optional[int] = ..., system_port_num: _Optional[int] = ..., compute_port_num: _Optional[int] = ..., contain_and_drain: _Optional[bool] = ..., rail: _Optional[int] = ..., plane: _Optional[int] = ..., link_rate_mbps: _Optional[int] = ..., port_admin_state: _Optional[_Union[AdminState, str]] = ...) -> None: ...

class SwitchTopoInfo(_message.Message):
    __slots__ = ("loc", "topology_id", "device_uid", "device_id", "num_ports", "system_uid", "vendor_id", "device_pcie_id", "description", "partition_id", "device_health", "port_topo_info")
    LOC_FIELD_NUMBER: _ClassVar[int]
    TOPOLOGY_ID_FIELD_NUMBER: _ClassVar[int]
    DEVICE_UID_FIELD_NUMBER: _ClassVar[int]
    DEVICE_ID_FIELD_NUMBER: _ClassVar[int]
    NUM_PORTS_FIELD_NUMBER: _ClassVar[int]
    SYSTEM_UID_FIELD_NUMBER: _ClassVar[int]
    VENDOR_ID_FIELD_NUMBER: _ClassVar[int]
    DEVICE_PCIE_ID_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    PARTITION_ID_FIELD_NUMBER: _ClassVar[int]
    DEVICE_HEALTH_FIELD_NUMBER: _ClassVar[int]
    PORT_TOPO_INFO_FIELD_NUMBER: _ClassVar[int]
    loc: LocationInfo
    topology_id: int
    device_uid: int
    device_id: int
    num_ports: int
    system_uid: int
    vendor_id: int
    device_pcie_id: int
    description: str
    partition_id: _containers.RepeatedCompositeFieldContainer[PartitionId]
    device_health: SwitchHealth
    port_topo_info: _containers.RepeatedCompositeFieldContainer[PortTopoInfo]
    def __init__(self, loc: _Optional[_Union[LocationInfo, _Mapping]] = ..., topology_id: _Optional[int] = ..., device_uid: _Optional[int] = ..., device_id: _Optional[int] = ..., num_ports: _Optional[int] = ..., system_uid: _Optional[int] = ..., vendor_id: _Optional[int] = ..., device_pcie_id: _Optional[int] = ..., description: _Optional[str] = ..., partition_id: _Optional[_Iterable[_Union[PartitionId, _Mapping]]] = ..., device_health: _Optional[_Union[SwitchHealth, str]] = ..., port_topo_info: _Optional[_Iterable[_Union[PortTopoInfo, _Mapping]]] = ...) -> None: ...

class GpuTopoInfo(_message.Message):
    __slots__ = ("loc", "topology_id", "device_uid", "device_id", "num_ports", "system_uid", "vendor_id", "device_pcie_id", "a_lids", "description", "partition_id", "device_health", "port_topo_info")
    LOC_FIELD_NUMBER: _ClassVar[int]
    TOPOLOGY_ID_FIELD_NUMBER: _ClassVar[int]
    DEVICE_UID_FIELD_NUMBER: _ClassVar[int]
    DEVICE_ID_FIELD_NUMBER: _ClassVar[int]
    NUM_PORTS_FIELD_NUMBER: _ClassVar[int]
    SYSTEM_UID_FIELD_NUMBER: _ClassVar[int]
    VENDOR_ID_FIELD_NUMBER: _ClassVar[int]
    DEVICE_PCIE_ID_FIELD_NUMBER: _ClassVar[int]
    A_LIDS_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    PARTITION_ID_FIELD_NUMBER: _ClassVar[int]
    DEVICE_HEALTH_FIELD_NUMBER: _ClassVar[int]
    PORT_TOPO_INFO_FIELD_NUMBER: _ClassVar[int]
    loc: LocationInfo
    topology_id: int
    device_uid: int
    device_id: int
    num_ports: int
    system_uid: int
    vendor_id: int
    device_pcie_id: int
    a_lids: _containers.RepeatedScalarFieldContainer[int]
    description: str
    partition_id: _containers.RepeatedCompositeFieldContainer[PartitionId]
    device_health: GpuHealth
    port_topo_info: _containers.RepeatedCompositeFieldContainer[PortTopoInfo]
    def __init__(self, loc: _Optional[_Union[LocationInfo, _Mapping]] = ..., topology_id: _Optional[int] = ..., device_uid: _Optional[int] = ..., device_id: _Optional[int] = ..., num_ports: _Optional[int] = ..., system_uid: _Optional[int] = ..., vendor_id: _Optional[int] = ..., device_pcie_id: _Optional[int] = ..., a_lids: _Optional[_Iterable[int]] = ..., description: _Optional[str] = ..., partition_id: _Optional[_Iterable[_Union[PartitionId, _Mapping]]] = ..., device_health: _Optional[_Union[GpuHealth, str]] = ..., port_topo_info: _Optional[_Iterable[_Union[PortTopoInfo, _Mapping]]] = ...) -> None: ...

class DeviceTopoInfo(_message.Message):
    __slots__ = ("switch_topo_info", "gpu_topo_info")
    SWITCH_TOPO_INFO_FIELD_NUMBER: _ClassVar[int]
    GPU_TOPO_INFO_FIELD_NUMBER: _ClassVar[int]
    switch_topo_info: SwitchTopoInfo
    gpu_topo_info: GpuTopoInfo
    def __init__(self, switch_topo_info: _Optional[_Union[SwitchTopoInfo, _Mapping]] = ..., gpu_topo_info: _Optional[_Union[GpuTopoInfo, _Mapping]] = ...) -> None: ...

class GetTopologyInfoRequest(_message.Message):
    __slots__ = ("context", "gateway_id")
    CONTEXT_FIELD_NUMBER: _ClassVar[int]
    GATEWAY_ID_FIELD_NUMBER: _ClassVar[int]
    context: Context
    gateway_id: str
    def __init__(self, context: _Optional[_Union[Context, _Mapping]] = ..., gateway_id: _Optional[str] = ...) -> None: ...

class FmTopologyInfo(_message.Message):
    __slots__ = ("server_header", "context", "device_topo_info")
    SERVER_HEADER_FIELD_NUMBER: _ClassVar[int]
    CONTEXT_FIELD_NUMBER: _ClassVar[int]
    DEVICE_TOPO_INFO_FIELD_NUMBER: _ClassVar[int]
    server_header: ServerHeader
    context: Context
    device_topo_info: _containers.RepeatedCompositeFieldContainer[DeviceTopoInfo]
    def __init__(self, server_header: _Optional[_Union[ServerHeader, _Mapping]] = ..., context: _Optional[_Union[Context, _Mapping]] = ..., device_topo_info: _Optional[_Iterable[_Union[DeviceTopoInfo, _Mapping]]] = ...) -> None: ...

class GetComputeNodeCountRequest(_message.Message):
    __slots__ = ("context", "attr", "chassis_id", "node_health", "gateway_id")
    CONTEXT_FIELD_NUMBER: _ClassVar[int]
    ATTR_FIELD_NUMBER: _ClassVar[int]
    CHASSIS_ID_FIELD_NUMBER: _ClassVar[int]
    NODE_HEALTH_FIELD_NUMBER: _ClassVar[int]
    GATEWAY_ID_FIELD_NUMBER: _ClassVar[int]
    context: Context
    attr: ComputeNodeAttr
    chassis_id: int
    node_health: ComputeNodeHealth
    gateway_id: str
    def __init__(self, context: _Optional[_Union[Context, _Mapping]] = ..., attr: _Optional[_Union[ComputeNodeAttr, str]] = ..., chassis_id: _Optional[int] = ..., node_health: _Optional[_Union[ComputeNodeHealth, str]] = ..., gateway_id: _Optional[str] = ...) -> None: ...

class GetComputeNodeCountResponse(_message.Message):
    __slots__ = ("server_header", "context", "num_nodes")
    SERVER_HEADER_FIELD_NUMBER: _ClassVar[int]
    CONTEXT_FIELD_NUMBER: _ClassVar[int]
    NUM_NODES_FIELD_NUMBER: _ClassVar[int]
    server_header: ServerHeader
    context: Context
    num_nodes: int
    def __init__(self, server_header: _Optional[_Union[ServerHeader, _Mapping]] = ..., context: _Optional[_Union[Context, _Mapping]] = ..., num_nodes: _Optional[int] = ...) -> None: ...

class GetComputeNodeLocationListRequest(_message.Message):
    __slots__ = ("context", "attr", "node_health", "chassis_id", "num_nodes", "gateway_id")
    CONTEXT_FIELD_NUMBER: _ClassVar[int]
    ATTR_FIELD_NUMBER: _ClassVar[int]
    NODE_HEALTH_FIELD_NUMBER: _ClassVar[int]
    CHASSIS_ID_FIELD_NUMBER: _ClassVar[int]
    NUM_NODES_FIELD_NUMBER: _ClassVar[int]
    GATEWAY_ID_FIELD_NUMBER: _ClassVar[int]
    context: Context
    attr: ComputeNodeAttr
    node_health: ComputeNodeHealth
    chassis_id: int
    num_nodes: int
    gateway_id: str
    def __init__(self, context: _Optional[_Union[Context, _Mapping]] = ..., attr: _Optional[_Union[ComputeNodeAttr, str]] = ..., node_health: _Optional[_Union[ComputeNodeHealth, str]] = ..., chassis_id: _Optional[int] = ..., num_nodes: _Optional[int] = ..., gateway_id: _Optional[str] = ...) -> None: ...

class GetComputeNodeLocationListResponse(_message.Message):
    __slots__ = ("server_header", "context", "loc_list")
    SERVER_HEADER_FIELD_NUMBER: _ClassVar[int]
    CONTEXT_FIELD_NUMBER: _ClassVar[int]
    LOC_LIST_FIELD_NUMBER: _ClassVar[int]
    server_header: ServerHeader
    context: Context
    loc_list: _containers.RepeatedCompositeFieldContainer[Location]
    def __init__(self, server_header: _Optional[_Union[ServerHeader, _Mapping]] = ..., context: _Optional[_Union[Context, _Mapping]] = ..., loc_list: _Optional[_Iterable[_Union[Location, _Mapping]]] = ...) -> None: ...

class GetSwitchNodeCountRequest(_message.Message):
    __slots__ = ("context", "attr", "node_health", "num_nodes", "gateway_id")
    CONTEXT_FIELD_NUMBER: _ClassVar[int]
    ATTR_FIELD_NUMBER: _ClassVar[int]
    NODE_HEALTH_FIELD_NUMBER: _ClassVar[int]
    NUM_NODES_FIELD_NUMBER: _ClassVar[int]
    GATEWAY_ID_FIELD_NUMBER: _ClassVar[int]
    context: Context
    attr: SwitchNodeAttr
    node_health: SwitchNodeHealth
    num_nodes: int
    gateway_id: str
    def __init__(self, context: _Optional[_Union[Context, _Mapping]] = ..., attr: _Optional[_Union[SwitchNodeAttr, str]] = ..., node_health: _Optional[_Union[SwitchNodeHealth, str]] = ..., num_nodes: _Optional[int] = ..., gateway_id: _Optional[str] = ...) -> None: ...

class GetSwitchNodeCountResponse(_message.Message):
    __slots__ = ("server_header", "context", "num_nodes")
    SERVER_HEADER_FIELD_NUMBER: _ClassVar[int]
    CONTEXT_FIELD_NUMBER: _ClassVar[int]
    NUM_NODES_FIELD_NUMBER: _ClassVar[int]
    server_header: ServerHeader
    context: Context
    num_nodes: int
    def __init__(self, server_header: _Optional[_Union[ServerHeader, _Mapping]] = ..., context: _Optional[_Union[Context, _Mapping]] = ..., num_nodes: _Optional[int] = ...) -> None: ...

class GetSwitchNodeLocationListRequest(_message.Message):
    __slots__ = ("context", "attr", "node_health", "num_nodes", "gateway_id")
    CONTEXT_FIELD_NUMBER: _ClassVar[int]
    ATTR_FIELD_NUMBER: _ClassVar[int]
    NODE_HEALTH_FIELD_NUMBER: _ClassVar[int]
    NUM_NODES_FIELD_NUMBER: _ClassVar[int]
    GATEWAY_ID_FIELD_NUMBER: _ClassVar[int]
    context: Context
    attr: SwitchNodeAttr
    node_health: SwitchNodeHealth
    num_nodes: int
    gateway_id: str
    def __init__(self, context: _Optional[_Union[Context, _Mapping]] = ..., attr: _Optional[_Union[SwitchNodeAttr, str]] = ..., node_health: _Optional[_Union[SwitchNodeHealth, str]] = ..., num_nodes: _Optional[int] = ..., gateway_id: _Optional[str] = ...) -> None: ...

class GetSwitchNodeLocationListResponse(_message.Message):
    __slots__ = ("server_header", "context", "loc_list")
    SERVER_HEADER_FIELD_NUMBER: _ClassVar[int]
    CONTEXT_FIELD_NUMBER: _ClassVar[int]
    LOC_LIST_FIELD_NUMBER: _ClassVar[int]
    server_header: ServerHeader
    context: Context
    loc_list: _containers.RepeatedCompositeFieldContainer[Location]
    def __init__(self, server_header: _Optional[_Union[ServerHeader, _Mapping]] = ..., context: _Optional[_Union[Context, _Mapping]] = ..., loc_list: _Optional[_Iterable[_Union[Location, _Mapping]]] = ...) -> None: ...

class SwitchNodeInfo(_message.Message):
    __slots__ = ("loc", "num_switches", "node_health", "partition_id_list")
    LOC_FIELD_NUMBER: _ClassVar[int]
    NUM_SWITCHES_FIELD_NUMBER: _ClassVar[int]
    NODE_HEALTH_FIELD_NUMBER: _ClassVar[int]
    PARTITION_ID_LIST_FIELD_NUMBER: _ClassVar[int]
    loc: LocationInfo
    num_switches: int
    node_health: SwitchNodeHealth
    partition_id_list: _containers.RepeatedCompositeFieldContainer[PartitionId]
    def __init__(self, loc: _Optional[_Union[LocationInfo, _Mapping]] = ..., num_switches: _Optional[int] = ..., node_health: _Optional[_Union[SwitchNodeHealth, str]] = ..., partition_id_list: _Optional[_Iterable[_Union[PartitionId, _Mapping]]] = ...) -> None: ...

class GetSwitchNodeInfoListRequest(_message.Message):
    __slots__ = ("context", "loc_list", "gateway_id")
    CONTEXT_FIELD_NUMBER: _ClassVar[int]
    LOC_LIST_FIELD_NUMBER: _ClassVar[int]
    GATEWAY_ID_FIELD_NUMBER: _ClassVar[int]
    context: Context
    loc_list: _containers.RepeatedCompositeFieldContainer[Location]
    gateway_id: str
    def __init__(self, context: _Optional[_Union[Context, _Mapping]] = ..., loc_list: _Optional[_Iterable[_Union[Location, _Mapping]]] = ..., gateway_id: _Optional[str] = ...) -> None: ...

class GetSwitchNodeInfoListResponse(_message.Message):
    __slots__ = ("server_header", "context", "node_info_list")
    SERVER_HEADER_FIELD_NUMBER: _ClassVar[int]
    CONTEXT_FIELD_NUMBER: _ClassVar[int]
    NODE_INFO_LIST_FIELD_NUMBER: _ClassVar[int]
    server_header: ServerHeader
    context: Context
    node_info_list: _containers.RepeatedCompositeFieldContainer[SwitchNodeInfo]
    def __init__(self, server_header: _Optional[_Union[ServerHeader, _Mapping]] = ..., context: _Optional[_Union[Context, _Mapping]] = ..., node_info_list: _Optional[_Iterable[_Union[SwitchNodeInfo, _Mapping]]] = ...) -> None: ...

class SwitchInfo(_message.Message):
    __slots__ = ("loc", "switch_id", "switch_uid", "num_ports", "health")
    LOC_FIELD_NUMBER: _ClassVar[int]
    SWITCH_ID_FIELD_NUMBER: _ClassVar[int]
    SWITCH_UID_FIELD_NUMBER: _ClassVar[int]
    NUM_PORTS_FIELD_NUMBER: _ClassVar[int]
    HEALTH_FIELD_NUMBER: _ClassVar[int]
    loc: Location
    switch_id: int
    switch_uid: int
    num_ports: int
    health: SwitchHealth
    def __init__(self, loc: _Optional[_Union[Location, _Mapping]] = ..., switch_id: _Optional[int] = ..., switch_uid: _Optional[int] = ..., num_ports: _Optional[int] = ..., health: _Optional[_Union[SwitchHealth, str]] = ...) -> None: ...

class GetSwitchInfoListRequest(_message.Message):
    __slots__ = ("context", "loc", "num_switches", "gateway_id")
    CONTEXT_FIELD_NUMBER: _ClassVar[int]
    LOC_FIELD_NUMBER: _ClassVar[int]
    NUM_SWITCHES_FIELD_NUMBER: _ClassVar[int]
    GATEWAY_ID_FIELD_NUMBER: _ClassVar[int]
    context: Context
    loc: Location
    num_switches: int
    gateway_id: str
    def __init__(self, context: _Optional[_Union[Context, _Mapping]] = ..., loc: _Optional[_Union[Location, _Mapping]] = ..., num_switches: _Optional[int] = ..., gateway_id: _Optional[str] = ...) -> None: ...

class GetSwitchInfoListResponse(_message.Message):
    __slots__ = ("server_header", "context", "switch_info_list")
    SERVER_HEADER_FIELD_NUMBER: _ClassVar[int]
    CONTEXT_FIELD_NUMBER: _ClassVar[int]
    SWITCH_INFO_LIST_FIELD_NUMBER: _ClassVar[int]
    server_header: ServerHeader
    context: Context
    switch_info_list: _containers.RepeatedCompositeFieldContainer[SwitchInfo]
    def __init__(self, server_header: _Optional[_Union[ServerHeader, _Mapping]] = ..., context: _Optional[_Union[Context, _Mapping]] = ..., switch_info_list: _Optional[_Iterable[_Union[SwitchInfo, _Mapping]]] = ...) -> None: ...

class Partition(_message.Message):
    __slots__ = ("partition_id", "num_gpus")
    PARTITION_ID_FIELD_NUMBER: _ClassVar[int]
    NUM_GPUS_FIELD_NUMBER: _ClassVar[int]
    partition_id: PartitionId
    num_gpus: int
    def __init__(self, partition_id: _Optional[_Union[PartitionId, _Mapping]] = ..., num_gpus: _Optional[int] = ...) -> None: ...

class GetPartitionCountRequest(_message.Message):
    __slots__ = ("context", "info_attr", "num_gpus", "num_nodes", "health", "gateway_id")
    CONTEXT_FIELD_NUMBER: _ClassVar[int]
    INFO_ATTR_FIELD_NUMBER: _ClassVar[int]
    NUM_GPUS_FIELD_NUMBER: _ClassVar[int]
    NUM_NODES_FIELD_NUMBER: _ClassVar[int]
    HEALTH_FIELD_NUMBER: _ClassVar[int]
    GATEWAY_ID_FIELD_NUMBER: _ClassVar[int]
    context: Context
    info_attr: PartitionInfoAttr
    num_gpus: int
    num_nodes: int
    health: PartitionHealth
    gateway_id: str
    def __init__(self, context: _Optional[_Union[Context, _Mapping]] = ..., info_attr: _Optional[_Union[PartitionInfoAttr, str]] = ..., num_gpus: _Optional[int] = ..., num_nodes: _Optional[int] = ..., health: _Optional[_Union[PartitionHealth, str]] = ..., gateway_id: _Optional[str] = ...) -> None: ...

class GetPartitionCountResponse(_message.Message):
    __slots__ = ("server_header", "context", "num_partitions")
    SERVER_HEADER_FIELD_NUMBER: _ClassVar[int]
    CONTEXT_FIELD_NUMBER: _ClassVar[int]
    NUM_PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    server_header: ServerHeader
    context: Context
    num_partitions: int
    def __init__(self, server_header: _Optional[_Union[ServerHeader, _Mapping]] = ..., context: _Optional[_Union[Context, _Mapping]] = ..., num_partitions: _Optional[int] = ...) -> None: ...

class GetPartitionIdListRequest(_message.Message):
    __slots__ = ("context", "info_attr", "num_gpus", "num_nodes", "num_partitions", "health", "gateway_id")
    CONTEXT_FIELD_NUMBER: _ClassVar[int]
    INFO_ATTR_FIELD_NUMBER: _ClassVar[int]
    NUM_GPUS_FIELD_NUMBER: _ClassVar[int]
    NUM_NODES_FIELD_NUMBER: _ClassVar[int]
    NUM_PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    HEALTH_FIELD_NUMBER: _ClassVar[int]
    GATEWAY_ID_FIELD_NUMBER: _ClassVar[int]
    context: Context
    info_attr: PartitionInfoAttr
    num_gpus: int
    num_nodes: int
    num_partitions: int
    health: PartitionHealth
    gateway_id: str
    def __init__(self, context: _Optional[_Union[Context, _Mapping]] = ..., info_attr: _Optional[_Union[PartitionInfoAttr, str]] = ..., num_gpus: _Optional[int] = ..., num_nodes: _Optional[int] = ..., num_partitions: _Optional[int] = ..., health: _Optional[_Union[PartitionHealth, str]] = ..., gateway_id: _Optional[str] = ...) -> None: ...

class GetPartitionIdListResponse(_message.Message):
    __slots__ = ("server_header", "context", "partition_list")
    SERVER_HEADER_FIELD_NUMBER: _ClassVar[int]
    CONTEXT_FIELD_NUMBER: _ClassVar[int]
    PARTITION_LIST_FIELD_NUMBER: _ClassVar[int]
    server_header: ServerHeader
    context: Context
    partition_list: _containers.RepeatedCompositeFieldContainer[Partition]
    def __init__(self, server_header: _Optional[_Union[ServerHeader, _Mapping]] = ..., context: _Optional[_Union[Context, _Mapping]] = ..., partition_list: _Optional[_Iterable[_Union[Partition, _Mapping]]] = ...) -> None: ...

class TopologyInfo(_message.Message):
    __slots__ = ("device_topo_info",)
    DEVICE_TOPO_INFO_FIELD_NUMBER: _ClassVar[int]
    device_topo_info: _containers.RepeatedCompositeFieldContainer[DeviceTopoInfo]
    def __init__(self, device_topo_info: _Optional[_Iterable[_Union[DeviceTopoInfo, _Mapping]]] = ...) -> None: ...

class PartitionGpu(_message.Message):
    __slots__ = ("device_uid", "location_info")
    DEVICE_UID_FIELD_NUMBER: _ClassVar[int]
    LOCATION_INFO_FIELD_NUMBER: _ClassVar[int]
    device_uid: int
    location_info: LocationInfo
    def __init__(self, device_uid: _Optional[int] = ..., location_info: _Optional[_Union[LocationInfo, _Mapping]] = ...) -> None: ...

class PartitionReport(_message.Message):
    __slots__ = ("partition_id", "gpus")
    PARTITION_ID_FIELD_NUMBER: _ClassVar[int]
    GPUS_FIELD_NUMBER: _ClassVar[int]
    partition_id: PartitionId
    gpus: _containers.RepeatedCompositeFieldContainer[PartitionGpu]
    def __init__(self, partition_id: _Optional[_Union[PartitionId, _Mapping]] = ..., gpus: _Optional[_Iterable[_Union[PartitionGpu, _Mapping]]] = ...) -> None: ...

class PartitionsReport(_message.Message):
    __slots__ = ("partitions",)
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    partitions: _containers.RepeatedCompositeFieldContainer[PartitionReport]
    def __init__(self, partitions: _Optional[_Iterable[_Union[PartitionReport, _Mapping]]] = ...) -> None: ...

class GetStateReportRequest(_message.Message):
    __slots__ = ("context", "gateway_id", "report_type")
    CONTEXT_FIELD_NUMBER: _ClassVar[int]
    GATEWAY_ID_FIELD_NUMBER: _ClassVar[int]
    REPORT_TYPE_FIELD_NUMBER: _ClassVar[int]
    context: Context
    gateway_id: str
    report_type: ReportType
    def __init__(self, context: _Optional[_Union[Context, _Mapping]] = ..., gateway_id: _Optional[str] = ..., report_type: _Optional[_Union[ReportType, str]] = ...) -> None: ...

class GetStateReportResponse(_message.Message):
    __slots__ = ("server_header", "context", "device_topo_info", "partitions")
    SERVER_HEADER_FIELD_NUMBER: _ClassVar[int]
    CONTEXT_FIELD_NUMBER: _ClassVar[int]
    DEVICE_TOPO_INFO_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    server_header: ServerHeader
    context: Context
    device_topo_info: TopologyInfo
    partitions: PartitionsReport
    def __init__(self, server_header: _Optional[_Union[ServerHeader, _Mapping]] = ..., context: _Optional[_Union[Context, _Mapping]] = ..., device_topo_info: _Optional[_Union[TopologyInfo, _Mapping]] = ..., partitions: _Optional[_Union[PartitionsReport, _Mapping]] = ...) -> None: ...

"""Status and kind vocabularies shared by the API, the services and the reconciler.

Values are the reference's wire strings (spec/nico-rest.md); tables hold them as text with CHECKs.
"""

from __future__ import annotations

from enum import StrEnum


class SiteStatus(StrEnum):
    PENDING = "Pending"
    REGISTERED = "Registered"
    ERROR = "Error"


class InstanceTypeStatus(StrEnum):
    PENDING = "Pending"
    REGISTERING = "Registering"
    READY = "Ready"
    DELETING = "Deleting"
    ERROR = "Error"


class AllocationStatus(StrEnum):
    PENDING = "Pending"
    REGISTERED = "Registered"
    DELETING = "Deleting"
    ERROR = "Error"


class ResourceType(StrEnum):
    INSTANCE_TYPE = "InstanceType"
    IP_BLOCK = "IPBlock"


class ConstraintType(StrEnum):
    RESERVED = "Reserved"
    ON_DEMAND = "OnDemand"
    PREEMPTIBLE = "Preemptible"


class MachineStatus(StrEnum):
    INITIALIZING = "Initializing"
    READY = "Ready"
    RESET = "Reset"
    MAINTENANCE = "Maintenance"
    IN_USE = "InUse"
    ERROR = "Error"
    DECOMMISSIONED = "Decommissioned"
    UNKNOWN = "Unknown"


class CapabilityType(StrEnum):
    CPU = "CPU"
    MEMORY = "Memory"
    GPU = "GPU"
    STORAGE = "Storage"
    NETWORK = "Network"
    INFINIBAND = "InfiniBand"
    DPU = "DPU"


class VpcStatus(StrEnum):
    PENDING = "Pending"
    PROVISIONING = "Provisioning"
    CONFIGURING = "Configuring"
    READY = "Ready"
    ERROR = "Error"
    DELETING = "Deleting"


class NetworkVirtualizationType(StrEnum):
    ETHERNET_VIRTUALIZER = "ETHERNET_VIRTUALIZER"
    FNN = "FNN"


class SubnetStatus(StrEnum):
    PENDING = "Pending"
    PROVISIONING = "Provisioning"
    READY = "Ready"
    DELETING = "Deleting"
    DELETED = "Deleted"
    ERROR = "Error"


class LogicalPartitionStatus(StrEnum):
    PENDING = "Pending"
    PROVISIONING = "Provisioning"
    CONFIGURING = "Configuring"
    READY = "Ready"
    DELETING = "Deleting"
    ERROR = "Error"


class InstanceStatus(StrEnum):
    PENDING = "Pending"
    PROVISIONING = "Provisioning"
    CONFIGURING = "Configuring"
    READY = "Ready"
    UPDATING = "Updating"
    REPAIRING = "Repairing"
    REBOOTING = "Rebooting"
    TERMINATING = "Terminating"
    ERROR = "Error"


class InterfaceStatus(StrEnum):
    """Status of an instance's Ethernet interface."""

    PENDING = "Pending"
    PROVISIONING = "Provisioning"
    READY = "Ready"
    DELETING = "Deleting"
    ERROR = "Error"


class NvLinkInterfaceStatus(StrEnum):
    PENDING = "Pending"
    PROVISIONING = "Provisioning"
    READY = "Ready"
    DELETING = "Deleting"
    ERROR = "Error"


class FabricOperation(StrEnum):
    """Operation kinds, named as the reference's ``*_changes_applied_total{operation}`` label."""

    CREATE = "create"
    UPDATE = "update"
    REMOVE = "remove"
    REMOVE_DEFAULT_PARTITION = "remove_default_partition"


class IntentState(StrEnum):
    PENDING = "pending"
    COMPLETED = "completed"
    FAILED = "failed"
    TIMEDOUT = "timedout"
    ADOPTED = "adopted"
    ABANDONED = "abandoned"

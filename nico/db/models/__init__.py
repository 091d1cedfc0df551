"""ORM models, one module per aggregate. Importing this package registers every table."""

from nico.db.models.allocation import Allocation, AllocationConstraint
from nico.db.models.capacity import DomainCapacity, DomainCapacityDelta
from nico.db.models.fabric import FabricCredential, FabricIntent, NvlinkNmxcEndpoint
from nico.db.models.feed import FeedEvent
from nico.db.models.instance import Instance, InstanceInterface, InstanceTypeCount, NvlinkInterface
from nico.db.models.inventory import Gpu, InstanceType, Machine, MachineCapability, NvlinkDomain
from nico.db.models.limits import FabricRateBucket
from nico.db.models.network import Subnet, Vpc
from nico.db.models.org import InfrastructureProvider, Tenant, TenantSite
from nico.db.models.partition import LogicalPartition, PhysicalPartition
from nico.db.models.site import Site
from nico.db.models.status import StatusDetail

__all__ = [
    "Allocation",
    "AllocationConstraint",
    "DomainCapacity",
    "DomainCapacityDelta",
    "FabricCredential",
    "FabricIntent",
    "FabricRateBucket",
    "FeedEvent",
    "Gpu",
    "InfrastructureProvider",
    "Instance",
    "InstanceInterface",
    "InstanceType",
    "InstanceTypeCount",
    "LogicalPartition",
    "Machine",
    "MachineCapability",
    "NvlinkDomain",
    "NvlinkInterface",
    "NvlinkNmxcEndpoint",
    "PhysicalPartition",
    "Site",
    "StatusDetail",
    "Subnet",
    "Tenant",
    "TenantSite",
    "Vpc",
]

"""The instance's wire models: create, batch create, update and delete requests, and the Instance
object, built from an :class:`~nico.instance.views.InstanceView` (the one Python source of its shape)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Annotated, Any

from pydantic import BeforeValidator, ConfigDict, Field

from nico.api.parsing import (
    NAME_LENGTH,
    REQUIRED,
    USER_DATA_MAX,
    FieldErrors,
    description_problem,
    labels_problem,
    name_problem,
    user_data_problem,
    uuid_problem,
)
from nico.api.schemas.common import (
    DESCRIPTION_SCHEMA,
    LABELS_BOUND,
    LABELS_SCHEMA,
    NAME_SCHEMA,
    OPTIONAL_UUID_SCHEMA,
    UUID_SCHEMA,
    Deprecation,
    MaxItems,
    RequestModel,
    ResponseModel,
    StatusDetail,
    declared,
    nullable,
    omit_if_none,
)
from nico.api.schemas.instance_type import InstanceTypeSummary
from nico.api.schemas.nvlink_interface import NVLinkInterface, NVLinkInterfaceRequests
from nico.api.schemas.org import InfrastructureProviderSummary, TenantSummary
from nico.api.schemas.site import SiteSummary
from nico.api.schemas.vpc import UNSUPPORTED, VpcSummary
from nico.instance.views import Document, InstanceView, InterfaceRecord
from nico.inventory.schemas import Machine

MAX_INTERFACES = 16
BATCH_MIN, BATCH_MAX = 2, 18  # 18 = the largest GB200 NVLink domain
PREFIX_LENGTH = "Name prefix must contain at least 2 characters and a maximum of 240 characters"
HEALTH_CATEGORIES = ("Hardware", "Network", "Performance", "Other")

# Fields nico does not implement (no OS images, SSH key groups, NSGs, InfiniBand, DPU services or
# secondary VPCs): a non-empty value is refused rather than silently dropped.
UNSUPPORTED_FIELDS = {
    "operating_system_id": "operatingSystemId",
    "ssh_key_group_ids": "sshKeyGroupIds",
    "network_security_group_id": "networkSecurityGroupId",
    "infiniband_interfaces": "infinibandInterfaces",
    "dpu_extension_service_deployments": "dpuExtensionServiceDeployments",
    "secondary_vpc_ids": "secondaryVpcIds",
}

UNSUPPORTED_SCHEMA = {"type": "null", "description": "not supported by nico: a non-empty value answers 400"}
IPXE_SCHEMA = {
    "type": "string",
    "pattern": "^[^\\u0000]*[^\\s\\u0000][^\\u0000]*$",  # not only whitespace, no NUL
    "description": "required: nico boots by iPXE only",
}
USER_DATA_SCHEMA = {"type": "string", "maxLength": USER_DATA_MAX}
# check_unsupported refuses a non-empty value only
UNSUPPORTED_TEXT_SCHEMA = {
    "type": ["string", "null"],
    "maxLength": 0,
    "description": "not supported by nico: a non-empty value answers 400",
}
UNSUPPORTED_LIST_SCHEMA = {
    "type": ["array", "null"],
    "maxItems": 0,
    "description": "not supported by nico: a non-empty value answers 400",
}
# rebooting is not supported: true answers 400
NO_REBOOT_SCHEMA = {
    "type": ["boolean", "null"],
    "enum": [False, None],
    "description": f"Rebooting {UNSUPPORTED}",
}
TENANT_ID_SCHEMA = {
    **OPTIONAL_UUID_SCHEMA,
    "deprecated": True,
    "description": "Deprecated (the org's tenant is used); when given it must be the org's tenant's id, "
    "anything else answers 400 `TenantID in request is not valid`",
}

DEPRECATIONS = (
    Deprecation(
        attribute="sshkeygroups",
        replacedby="sshKeyGroups",
        effective="2025-09-04T00:00:00Z",
        notice=(
            "\"'sshkeygroups' has been deprecated in favor of 'sshKeyGroups'. "
            'Please take action immediately"'
        ),
    ),
)


def _first_item_only(value: Any) -> Any:
    return value[:1] if isinstance(value, list) else value


# A list nico refuses whenever it is not empty: its first item is all the check needs, so only that one
# is validated, whatever the length.
FIRST_ONLY = BeforeValidator(_first_item_only)


class InterfaceRequest(RequestModel):
    model_config = ConfigDict(json_schema_extra={"required": ["subnetId"]})

    subnet_id: Annotated[str | None, declared(UUID_SCHEMA)] = None
    vpc_prefix_id: Annotated[str | None, declared(UNSUPPORTED_SCHEMA)] = None
    is_physical: bool | None = None
    ip_address: Annotated[str | None, declared(UNSUPPORTED_SCHEMA)] = None


class InstanceFields(RequestModel):
    """What single and batch creation share."""

    description: Annotated[str | None, declared(DESCRIPTION_SCHEMA)] = None
    tenant_id: Annotated[str | None, declared(TENANT_ID_SCHEMA)] = None
    instance_type_id: Annotated[str | None, declared(UUID_SCHEMA)] = None
    vpc_id: Annotated[str | None, declared(UUID_SCHEMA)] = None
    interfaces: Annotated[
        list[InterfaceRequest] | None,
        MaxItems(MAX_INTERFACES, "a maximum of {limit} Interfaces can be specified"),
    ] = Field(
        default=None,
        json_schema_extra={
            "type": "array",  # not null: at least one
            "minItems": 1,
            "maxItems": MAX_INTERFACES,
            "maxContains": 1,  # only one physical
            "contains": {"required": ["isPhysical"], "properties": {"isPhysical": {"const": True}}},
        },
    )
    nv_link_interfaces: NVLinkInterfaceRequests = None
    operating_system_id: Annotated[str | None, declared(UNSUPPORTED_SCHEMA)] = None
    ipxe_script: Annotated[str | None, declared(IPXE_SCHEMA)] = None
    user_data: Annotated[str | None, declared(USER_DATA_SCHEMA)] = None
    phone_home_enabled: bool | None = None
    always_boot_with_custom_ipxe: bool | None = None
    labels: Annotated[dict[str, str] | None, LABELS_BOUND, declared(LABELS_SCHEMA)] = None
    ssh_key_group_ids: Annotated[list[str] | None, FIRST_ONLY, declared(UNSUPPORTED_SCHEMA)] = None
    network_security_group_id: Annotated[str | None, declared(UNSUPPORTED_SCHEMA)] = None
    infiniband_interfaces: Annotated[
        list[dict[str, Any]] | None, FIRST_ONLY, declared(UNSUPPORTED_SCHEMA)
    ] = None
    dpu_extension_service_deployments: Annotated[
        list[dict[str, Any]] | None, FIRST_ONLY, declared(UNSUPPORTED_SCHEMA)
    ] = None
    secondary_vpc_ids: Annotated[list[str] | None, FIRST_ONLY, declared(UNSUPPORTED_SCHEMA)] = None

    def check_shared(self, errors: FieldErrors, *, batch: bool) -> None:
        errors.add("description", description_problem(self.description))
        errors.add("userData", user_data_problem(self.user_data))
        errors.add("tenantId", uuid_problem(self.tenant_id, required=False))
        errors.add("vpcId", uuid_problem(self.vpc_id))
        check_interfaces(self.interfaces, errors, batch=batch)
        for item in self.nv_link_interfaces or ():
            item.check(errors)
        check_boot(self.operating_system_id, self.ipxe_script, errors)
        errors.add("labels", labels_problem(self.labels))
        check_unsupported(self, errors)

    @property
    def subnet_ids(self) -> list[uuid.UUID]:
        return [uuid.UUID(i.subnet_id) for i in self.interfaces or () if i.subnet_id]


class InstanceCreateRequest(InstanceFields):
    model_config = ConfigDict(
        json_schema_extra={
            "required": ["name", "vpcId", "ipxeScript", "interfaces"],
            # exactly one of the two (check)
            "oneOf": [{"required": ["instanceTypeId"]}, {"required": ["machineId"]}],
        }
    )

    name: Annotated[str | None, declared(NAME_SCHEMA)] = None
    machine_id: Annotated[str | None, declared({"type": "string", "minLength": 1})] = None
    allow_unhealthy_machine: bool | None = None

    def check(self, errors: FieldErrors) -> None:
        errors.add("name", name_problem(self.name))
        if self.instance_type_id and self.machine_id:
            errors.add(
                "machineId",
                "only one of `instanceTypeId` or `machineId` can be specified in request, not both",
            )
        elif not self.instance_type_id and not self.machine_id:
            errors.add("instanceTypeId", "either `instanceTypeId` or `machineId` must be specified")
        else:
            errors.add("instanceTypeId", uuid_problem(self.instance_type_id, required=False))
        self.check_shared(errors, batch=False)


class BatchInstanceCreateRequest(InstanceFields):
    model_config = ConfigDict(
        json_schema_extra={
            "required": ["namePrefix", "count", "instanceTypeId", "vpcId", "ipxeScript", "interfaces"]
        }
    )

    name_prefix: Annotated[str | None, declared({**NAME_SCHEMA, "maxLength": 240})] = None
    count: Annotated[
        int | None, declared({"type": "integer", "minimum": BATCH_MIN, "maximum": BATCH_MAX})
    ] = None
    topology_optimized: bool | None = None  # absent or null: true

    def check(self, errors: FieldErrors) -> None:
        prefix = self.name_prefix
        if not prefix:
            errors.add("namePrefix", NAME_LENGTH)
        elif not 2 <= len(prefix) <= 240:
            errors.add("namePrefix", PREFIX_LENGTH)
        else:
            errors.add("namePrefix", name_problem(prefix))
        if not self.count:
            errors.add("count", REQUIRED)
        elif self.count < BATCH_MIN:
            errors.add("count", f"Count must be at least {BATCH_MIN}")
        elif self.count > BATCH_MAX:
            errors.add("count", f"Count cannot exceed {BATCH_MAX}")
        errors.add("instanceTypeId", uuid_problem(self.instance_type_id))
        self.check_shared(errors, batch=True)

    @property
    def optimized(self) -> bool:
        return self.topology_optimized is not False


class InstanceUpdateRequest(RequestModel):
    name: Annotated[str | None, declared(nullable(NAME_SCHEMA))] = None
    description: Annotated[str | None, declared(nullable(DESCRIPTION_SCHEMA))] = None
    labels: Annotated[dict[str, str] | None, LABELS_BOUND, declared(LABELS_SCHEMA)] = None
    trigger_reboot: Annotated[bool | None, declared(NO_REBOOT_SCHEMA)] = None
    reboot_with_custom_ipxe: Annotated[bool | None, declared(NO_REBOOT_SCHEMA)] = None
    apply_updates_on_reboot: Annotated[bool | None, declared(NO_REBOOT_SCHEMA)] = None
    operating_system_id: Annotated[str | None, declared(UNSUPPORTED_TEXT_SCHEMA)] = None
    ipxe_script: Annotated[str | None, declared(nullable(IPXE_SCHEMA))] = None
    user_data: Annotated[str | None, declared(nullable(USER_DATA_SCHEMA))] = None
    phone_home_enabled: bool | None = None
    always_boot_with_custom_ipxe: bool | None = None
    secondary_vpc_ids: Annotated[list[str] | None, FIRST_ONLY, declared(UNSUPPORTED_LIST_SCHEMA)] = None
    interfaces: Annotated[
        list[InterfaceRequest] | None,
        FIRST_ONLY,
        declared({"type": "null", "description": f"Updating Interfaces {UNSUPPORTED}"}),
    ] = None
    infiniband_interfaces: Annotated[
        list[dict[str, Any]] | None, FIRST_ONLY, declared(UNSUPPORTED_LIST_SCHEMA)
    ] = None
    dpu_extension_service_deployments: Annotated[
        list[dict[str, Any]] | None, FIRST_ONLY, declared(UNSUPPORTED_LIST_SCHEMA)
    ] = None
    nv_link_interfaces: NVLinkInterfaceRequests = None
    ssh_key_group_ids: Annotated[list[str] | None, FIRST_ONLY, declared(UNSUPPORTED_LIST_SCHEMA)] = None
    network_security_group_id: Annotated[str | None, declared(UNSUPPORTED_TEXT_SCHEMA)] = None

    def check(self, errors: FieldErrors) -> None:
        errors.add("name", name_problem(self.name, required=False))
        errors.add("description", description_problem(self.description))
        errors.add("userData", user_data_problem(self.user_data))
        errors.add("labels", labels_problem(self.labels))
        updating = any(
            getattr(self, field) is not None
            for field in type(self).model_fields
            if field not in ("trigger_reboot", "reboot_with_custom_ipxe", "apply_updates_on_reboot")
        )
        if self.trigger_reboot and updating:
            errors.add(
                "triggerReboot",
                "reboot cannot be triggered if Instance attributes are being updated in the same request",
            )
        elif self.trigger_reboot or self.reboot_with_custom_ipxe or self.apply_updates_on_reboot:
            errors.add("triggerReboot", f"Rebooting Instances {UNSUPPORTED}")
        if self.interfaces is not None:
            errors.add("interfaces", f"Updating Interfaces {UNSUPPORTED}")
        if self.ipxe_script is not None and not self.ipxe_script.strip():
            errors.add("ipxeScript", "cannot be empty when `operatingSystemId` is not specified")
        for item in self.nv_link_interfaces or ():
            item.check(errors)
        check_unsupported(self, errors)


class MachineHealthIssue(RequestModel):
    category: str | None = None
    summary: str | None = None
    details: str | None = None


class InstanceDeleteRequest(RequestModel):
    machine_health_issue: MachineHealthIssue | None = None
    is_repair_tenant: bool | None = None

    def check(self, errors: FieldErrors) -> None:
        issue = self.machine_health_issue
        if issue is None:
            return
        if issue.category not in HEALTH_CATEGORIES:
            errors.add("category", f"must be one of {', '.join(HEALTH_CATEGORIES)}")
        if not issue.summary:
            errors.add("summary", REQUIRED)
        elif len(issue.summary) > 1024:
            errors.add("summary", "the length must be no more than 1024")


def check_interfaces(items: list[InterfaceRequest] | None, errors: FieldErrors, *, batch: bool) -> None:
    """Ethernet interfaces: 1..16, each on a subnet (nico has no VPC prefixes), at most one physical."""
    if not items:
        errors.add("interfaces", "at least one Interface must be specified")
        return
    if len(items) > MAX_INTERFACES:
        errors.add("interfaces", f"a maximum of {MAX_INTERFACES} Interfaces can be specified")
    for item in items:
        if batch and item.ip_address is not None:
            errors.add("interfaces", "batch instance create does not support `ipAddress` on interfaces")
        elif item.ip_address is not None:
            errors.add("interfaces", f"`ipAddress` on interfaces {UNSUPPORTED}")
        elif item.vpc_prefix_id:
            errors.add("interfaces", f"VPC Prefixes {UNSUPPORTED}, specify `subnetId`")
        else:
            problem = uuid_problem(item.subnet_id)
            errors.add("interfaces", f"subnetId: {problem}" if problem else None)
    if sum(1 for item in items if item.is_physical) > 1:
        errors.add("interfaces", "only one Interface can be physical")


def check_boot(operating_system_id: str | None, ipxe_script: str | None, errors: FieldErrors) -> None:
    if operating_system_id:
        return  # refused as unsupported
    if ipxe_script is None:
        errors.add("operatingSystemId", "either `operatingSystemId` or `ipxeScript` must be specified")
    elif not ipxe_script.strip():
        errors.add("ipxeScript", "cannot be empty when `operatingSystemId` is not specified")


def check_unsupported(body: RequestModel, errors: FieldErrors) -> None:
    for field, key in UNSUPPORTED_FIELDS.items():
        if getattr(body, field, None):
            errors.add(key, UNSUPPORTED)


class InstanceInterface(ResponseModel):
    id: uuid.UUID
    instance_id: uuid.UUID
    subnet_id: uuid.UUID | None
    vpc_prefix_id: uuid.UUID | None = None
    is_physical: bool
    device: str | None = None
    device_instance: int | None = None
    virtual_function_id: int | None = None
    mac_address: str | None = None
    ip_addresses: list[str] = Field(default_factory=list)
    status: str
    created: datetime
    updated: datetime

    @classmethod
    def of(cls, view: InterfaceRecord) -> InstanceInterface:
        return cls(
            id=view.id,
            instance_id=view.instance_id,
            subnet_id=view.subnet_id,
            is_physical=view.is_physical,
            status=view.status,
            created=view.created,
            updated=view.updated,
        )


class Instance(ResponseModel):
    id: uuid.UUID
    name: str
    description: str | None
    controller_instance_id: uuid.UUID
    tenant_id: uuid.UUID
    tenant: TenantSummary | None = Field(default=None, exclude_if=omit_if_none)
    infrastructure_provider_id: uuid.UUID
    infrastructure_provider: InfrastructureProviderSummary | None = Field(
        default=None, exclude_if=omit_if_none
    )
    site_id: uuid.UUID
    site: SiteSummary | None = Field(default=None, exclude_if=omit_if_none)
    instance_type_id: uuid.UUID | None
    instance_type: InstanceTypeSummary | None = Field(default=None, exclude_if=omit_if_none)
    vpc_id: uuid.UUID
    vpc: VpcSummary | None = Field(default=None, exclude_if=omit_if_none)
    secondary_vpc_ids: list[uuid.UUID] = Field(default_factory=list)
    machine_id: str | None
    machine: Machine | None = Field(default=None, exclude_if=omit_if_none)
    operating_system_id: uuid.UUID | None = None
    ipxe_script: str | None
    always_boot_with_custom_ipxe: bool
    phone_home_enabled: bool
    user_data: str | None
    labels: dict[str, Any] | None
    is_update_pending: bool = False
    serial_console_url: str | None
    network_security_group_id: uuid.UUID | None = None
    network_security_group_propagation_details: dict[str, Any] | None = None
    network_security_group_inherited: bool = False
    tpm_ek_certificate: str | None = None
    status: str
    interfaces: list[InstanceInterface]
    infiniband_interfaces: list[dict[str, Any]] = Field(default_factory=list)
    dpu_extension_service_deployments: list[dict[str, Any]] = Field(default_factory=list)
    nv_link_interfaces: list[NVLinkInterface]
    # nico extension: the one clique all the instance's NVLink interfaces are in once Ready, else null.
    nv_link_clique_id: str | None = None
    ssh_key_group_ids: list[uuid.UUID] | None = None
    ssh_key_groups: list[dict[str, Any]] = Field(default_factory=list)
    status_history: list[StatusDetail]
    created: datetime
    updated: datetime
    deprecations: tuple[Deprecation, ...] = DEPRECATIONS

    @classmethod
    def of(cls, view: InstanceView) -> Instance:
        related = view.relations
        host = view.serial_console_hostname
        return cls.model_validate(
            {
                "id": view.id,
                "name": view.name,
                "description": view.description,
                "controller_instance_id": view.id,
                "tenant_id": view.tenant_id,
                "tenant": TenantSummary.of(related.tenant) if related.tenant is not None else None,
                "infrastructure_provider_id": view.infrastructure_provider_id,
                "infrastructure_provider": (
                    InfrastructureProviderSummary.of(related.provider)
                    if related.provider is not None
                    else None
                ),
                "site_id": view.site_id,
                "site": SiteSummary.of(related.site) if related.site is not None else None,
                "instance_type_id": view.instance_type_id,
                "instance_type": (
                    InstanceTypeSummary.of(related.instance_type)
                    if related.instance_type is not None
                    else None
                ),
                "vpc_id": view.vpc_id,
                "vpc": VpcSummary.of(related.vpc) if related.vpc is not None else None,
                "machine_id": view.machine_id,
                "machine": Machine.of(related.machine) if related.machine is not None else None,
                "ipxe_script": view.ipxe_script,
                "always_boot_with_custom_ipxe": view.always_boot_with_custom_ipxe,
                "phone_home_enabled": view.phone_home_enabled,
                "user_data": view.user_data,
                "labels": view.labels,
                "serial_console_url": f"ssh://{view.id}@{host}" if host else None,
                "status": view.status,
                "interfaces": view.interfaces,
                "nv_link_interfaces": view.nvlink_interfaces,
                "nv_link_clique_id": instance_clique(view.nvlink_interfaces),
                "status_history": view.status_history,
                "created": view.created,
                "updated": view.updated,
                "deprecations": DEPRECATIONS,  # given: the default would be deep-copied per instance
            }
        )


def instance_clique(interfaces: Sequence[Document]) -> str | None:
    """The instance's clique: every NVLink interface Ready and in the same clique."""
    cliques = {i.get("nv_link_clique_id") for i in interfaces}
    if not interfaces or len(cliques) != 1 or any(i.get("status") != "Ready" for i in interfaces):
        return None
    return cliques.pop()

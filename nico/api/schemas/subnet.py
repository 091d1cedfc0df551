"""Subnet bodies. nico does no IP address management: prefixes and gateways stay null."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated

from pydantic import Field

from nico.api.parsing import FieldErrors, description_problem, name_problem, uuid_problem
from nico.api.schemas.common import (
    DESCRIPTION_SCHEMA,
    NAME_SCHEMA,
    OPTIONAL_UUID_SCHEMA,
    UUID_SCHEMA,
    RequestModel,
    ResponseModel,
    StatusDetail,
    declared,
    nullable,
    omit_if_none,
    required,
)
from nico.api.schemas.site import SiteSummary
from nico.api.schemas.vpc import VpcSummary
from nico.services.subnet import SubnetView


class Subnet(ResponseModel):
    id: uuid.UUID
    name: str
    description: str | None
    site_id: uuid.UUID
    site: SiteSummary | None = Field(default=None, exclude_if=omit_if_none)
    vpc_id: uuid.UUID
    vpc: VpcSummary | None = Field(default=None, exclude_if=omit_if_none)
    controller_network_segment_id: uuid.UUID | None
    ipv4_prefix: str | None
    ipv4_block_id: uuid.UUID | None
    ipv4_gateway: str | None
    ipv6_prefix: str | None
    ipv6_block_id: uuid.UUID | None
    ipv6_gateway: str | None
    prefix_length: int | None
    routing_type: str | None
    status: str
    mtu: int | None
    status_history: list[StatusDetail]
    created: datetime
    updated: datetime

    @classmethod
    def of(cls, view: SubnetView) -> Subnet:
        row = view.subnet
        return cls(
            id=row.id,
            name=row.name,
            description=row.description,
            site_id=row.site_id,
            site=SiteSummary.of(view.site) if view.site else None,
            vpc_id=row.vpc_id,
            vpc=VpcSummary.of(view.vpc) if view.vpc else None,
            controller_network_segment_id=row.id,
            ipv4_prefix=row.ipv4_prefix,
            ipv4_block_id=row.ipv4_block_id,
            ipv4_gateway=row.ipv4_gateway,
            ipv6_prefix=None,
            ipv6_block_id=None,
            ipv6_gateway=None,
            prefix_length=row.prefix_length,
            routing_type=row.routing_type,
            status=row.status,
            mtu=row.mtu,
            status_history=StatusDetail.many(view.history),
            created=row.created,
            updated=row.updated,
        )


class SubnetCreateRequest(RequestModel):
    model_config = required("name", "vpcId")

    name: Annotated[str | None, declared(NAME_SCHEMA)] = None
    description: Annotated[str | None, declared(nullable(DESCRIPTION_SCHEMA))] = None
    vpc_id: Annotated[str | None, declared(UUID_SCHEMA)] = None
    ipv4_block_id: Annotated[str | None, declared(OPTIONAL_UUID_SCHEMA)] = Field(
        default=None, description="Optional in nico (no IP address management)."
    )
    ipv6_block_id: Annotated[
        str | None, declared({"type": "null", "description": "IPv6 is not supported"})
    ] = None
    prefix_length: Annotated[
        int | None, declared({"type": ["integer", "null"], "minimum": 8, "maximum": 30})
    ] = Field(default=None, description="Optional in nico; 8..30 when given.")
    ip_block_size: int | None = None

    def check(self, errors: FieldErrors) -> None:
        errors.add("name", name_problem(self.name))
        errors.add("description", description_problem(self.description))
        errors.add("vpcId", uuid_problem(self.vpc_id))
        errors.add("ipv4BlockId", uuid_problem(self.ipv4_block_id, required=False))
        if self.ipv6_block_id is not None:
            errors.add("ipv6BlockId", "IPv6 Subnet creation is not supported at this time")
        if self.prefix_length is not None:
            if self.prefix_length < 8:
                errors.add("prefixLength", "prefixLength must be at least 8")
            elif self.prefix_length > 30:
                errors.add("prefixLength", "prefixLength must be at most 30")


class SubnetUpdateRequest(RequestModel):
    name: Annotated[str | None, declared(nullable(NAME_SCHEMA))] = None
    description: Annotated[str | None, declared(nullable(DESCRIPTION_SCHEMA))] = None

    def check(self, errors: FieldErrors) -> None:
        errors.add("name", name_problem(self.name, required=False))
        errors.add("description", description_problem(self.description))

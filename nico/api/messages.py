"""The reference's request-rejection messages, in one table (spec §1.2 and each resource's section).

A malformed id in a URL answers 400 with the resource's own ``*_ID`` message; a body that breaks a field
rule answers 400 with its operation's ``*_INVALID`` message and the ``{field: message}`` map.
"""

from __future__ import annotations

from nico.inventory import records

# Ids in URLs.
ALLOCATION_ID = "Invalid Allocation ID in URL"
ALLOCATION_CONSTRAINT_ID = "Invalid Allocation Constraint ID in URL"
INSTANCE_ID = "Invalid Instance ID in URL"
INSTANCE_ID_OF_INTERFACES = "Invalid Instance ID: {value} specified in request"
INSTANCE_TYPE_ID = "Invalid Instance Type ID in URL"
PARTITION_ID = "Invalid NVLink Logical Partition ID in URL"
PARTITION_ID_GET = "NVLink Logical Partition ID specified in URL is not valid"
SITE_ID = "Invalid Site ID in URL"
SUBNET_ID = "Invalid Subnet ID in URL"
VPC_ID = "Invalid VPC ID in URL"
VPC_ID_UPDATE = "Invalid VPC ID in request"

# Bodies that break a field rule.
ALLOCATION_CREATE_INVALID = "Error validating Allocation creation request data"
ALLOCATION_UPDATE_INVALID = "Error validating Allocation update request data"
ALLOCATION_CONSTRAINT_UPDATE_INVALID = "Error validating Allocation Constraint update request data"
ALLOCATION_CONSTRAINT_PARSE_ERROR = "Failed to parse request data, invalid JSON structure"
BATCH_INSTANCE_CREATE_INVALID = "Error validating batch instance creation request data"
INSTANCE_CREATE_INVALID = "Error validating Instance creation request data"
INSTANCE_UPDATE_INVALID = "Failed to validate Instance update request data"
INSTANCE_DELETE_INVALID = "Failed to validate Instance deletion request data"
INSTANCE_TYPE_CREATE_INVALID = "Error validating Instance Type creation request data"
INSTANCE_TYPE_UPDATE_INVALID = "Error validating Instance Type update request data"
MACHINE_ASSOCIATION_CREATE_INVALID = (
    "Error validating Machine/Instance Type Association creation request data"
)
MACHINE_REGISTRATION_INVALID = records.VALIDATION_MESSAGE  # the service's own checks answer it too
MACHINE_UPDATE_INVALID = "Error validating Machine update request data"
PARTITION_CREATE_INVALID = "Error validating NVLink Logical Partition request creation data"
PARTITION_UPDATE_INVALID = "Error validating NVLink Logical Partition update request data"
SITE_CREATE_INVALID = "Error validating Site creation request data"
SITE_UPDATE_INVALID = "Error validating Site update request data"
SUBNET_CREATE_INVALID = "Error validating Subnet creation request data"
SUBNET_UPDATE_INVALID = "Error validating Subnet update request data"
VPC_CREATE_INVALID = "Error validating VPC creation request data"
VPC_UPDATE_INVALID = "Error validating VPC update request data"

"""OpenAPI document: request bodies are parsed by hand (to keep the reference's check order), so
their schemas are declared here and merged into the generated document."""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from pydantic import BaseModel, Field

from nico.api.rendering import DELETION_ACCEPTED

_BODY_MODELS: dict[str, type[BaseModel]] = {}


class ErrorEnvelope(BaseModel):
    """Every non-2xx answer (spec §1.2)."""

    source: str = Field(description="The API's name (setting `api.name`).")
    message: str = Field(description="The reference's text for the failure.")
    data: Any = Field(
        default=None,
        description="null, or for a rejected request a flat `{field: message}` map of the first failure per "
        "field (`__all__` for the request as a whole).",
    )


ERROR_TEXTS = {
    "400": "Malformed id, query parameter or body, or a rule of the operation broken",
    "401": "No or invalid bearer token",
    "403": "The token's roles do not allow this operation in this org",
    "404": "A resource in the path or the request does not exist (for the caller)",
    "409": "The request conflicts with the current state (name clash, capacity, a concurrent change)",
    "413": "Request body over `api.max_body_bytes` (1 MiB by default; machine registration: "
    "`api.max_registration_body_bytes`, 10 MiB)",
    "414": "Request target over `api.max_request_line_bytes` (8 KiB by default)",
    "431": "Request headers over `api.max_header_bytes` (64 KiB by default) or one header over "
    "`api.max_header_line_bytes` (32 KiB)",
    "500": "Unexpected error",
    "503": "The database is unavailable, retry shortly",
}
ENVELOPE_REF = {"$ref": "#/components/schemas/ErrorEnvelope"}

TENANT, PROVIDER = "TENANT_ADMIN", "PROVIDER_ADMIN"


@dataclass(frozen=True)
class Refusal:
    """Why an operation may refuse a request that its declaration accepts: a rule OpenAPI cannot
    express (the state of the data, the caller's role). The operation's error response says so, and
    the API fuzz test allows exactly these statuses on exactly this operation (tests/api/fuzzing.py)."""

    reason: str
    status: str = "400"
    roles: frozenset[str] = frozenset({TENANT, PROVIDER})  # the callers it applies to


# By operation id. Everything a request carries on its own (ids, formats, lengths, ranges, required
# fields, enums) is declared in the document instead; these are the rules left.
REFUSALS: dict[str, tuple[Refusal, ...]] = {
    "create-tenant": (Refusal("deprecated by the reference: always 400 `endpoint has been deprecated`"),),
    "update-current-tenant": (
        Refusal("deprecated by the reference: always 400 `endpoint has been deprecated`"),
    ),
    "get-all-machine": (
        Refusal(
            "a tenant must give `siteId` (`Site ID must be specified in query when retrieving Machines as a "
            "privileged Tenant`), a provider need not",
            roles=frozenset({TENANT}),
        ),
        Refusal("`hasInstanceType=false` with `instanceTypeId`; `hasInstance` without `siteId`"),
    ),
    "get-all-nvlink-logical-partition": (Refusal("`siteId` names no site"),),
    "export-nvlink-topology": (
        Refusal(
            "`pageNumber` or `pageSize` with a format that is one document (slurm-topology-conf, "
            "slurm-topology-yaml, kueue-topology): only kubernetes-labels and kubectl-labels come in pages"
        ),
    ),
    "get-all-vpc": (Refusal("a `nvLinkLogicalPartitionId` that is not the tenant's partition"),),
    "get-all-subnet": (Refusal("`siteId` names no site; `vpcId` names another tenant's VPC"),),
    "get-all-allocation": (Refusal("a `siteId` that names no site"),),
    "get-all-instance-type": (Refusal("`siteId` names no site"),),
    "update-site": (
        Refusal(
            "a tenant holding the site may set none of its fields (`value is not configurable by Tenant`)"
        ),
        Refusal(
            "serial console settings need a Registered site; native networking stays on while FNN VPCs exist"
        ),
    ),
    "delete-site": (Refusal("the site still has tenant resources (VPCs, subnets, instances, partitions)"),),
    "create-vpc": (
        Refusal(
            "the site does not exist, is not Registered, lacks native networking (FNN) or NVLink partitions "
            "(a default partition)"
        ),
    ),
    "update-vpc": (Refusal("a default partition on a site without NVLink partitions, or not the VPC's"),),
    "delete-vpc": (Refusal("the VPC still has subnets or instances"),),
    "create-subnet": (
        Refusal(
            "the VPC does not exist, is not the tenant's, not Ready or not Ethernet; the site not Registered"
        ),
    ),
    "update-subnet": (Refusal("the subnet's site is not Registered"),),
    "delete-subnet": (Refusal("instances still use the subnet"),),
    "create-nvlink-logical-partition": (
        Refusal("the site is not Registered, lacks NVLink partitions, or is not the tenant's"),
    ),
    "update-nvlink-logical-partition": (Refusal("the partition's site is not Registered"),),
    "delete-nvlink-logical-partition": (
        Refusal("instances still use the partition; its site is not Registered"),
    ),
    "create-instance": (
        Refusal(
            "a `tenantId` (deprecated) other than the org's tenant; the VPC, instance type, machine, "
            "subnet or partition does not exist or is in the wrong state (the reference's 400s, spec §5.2)"
        ),
    ),
    "batch-create-instance": (
        Refusal(
            "a `tenantId` (deprecated) other than the org's tenant; the VPC, instance type, subnet or "
            "partition does not exist or is in the wrong state (the reference's 400s, spec §5.3)"
        ),
    ),
    "update-instance": (
        Refusal("the site is not Registered; a partition that does not exist or does not fit"),
    ),
    "create-allocation": (
        Refusal("the site, tenant or instance type does not exist or is not the provider's"),
    ),
    "update-allocation": (Refusal("the allocation is not the provider's"),),
    "delete-allocation": (Refusal("the tenant would keep fewer machines than it has active instances"),),
    "update-allocation-constraint": (
        Refusal("the tenant would keep fewer machines than it has active instances, or too few are free"),
    ),
    "create-instance-type": (
        Refusal(
            "the site does not exist or is not the provider's; two machine capabilities share a type and "
            "name (JSON Schema cannot say that items differ)"
        ),
    ),
    "update-instance-type": (
        Refusal("two machine capabilities share a type and name (JSON Schema cannot say that items differ)"),
        Refusal("machine capabilities cannot change while machines are associated", status="412"),
    ),
    "delete-instance-type": (Refusal("instances or allocations still use the instance type"),),
    "create-instance-type-machine-association": (
        Refusal("a machine is not Ready or Reset, or not at the instance type's site"),
    ),
    "delete-instance-type-machine-association": (Refusal("an instance still uses the machine"),),
    "register-machines": (
        Refusal(
            "the instance type is not at the site; the request gives a machine id, tray, GPU uid or a "
            "machine's GPU device id twice, or one machine's GPUs different names (JSON Schema cannot say "
            "that items differ or agree)"
        ),
    ),
    "update-machine": (
        Refusal(
            "the machine is in use, not Ready or Reset, at another or an unregistered site, or leaving its "
            "instance type would break the allocation constraints"
        ),
    ),
    "delete-machine": (Refusal("the machine is still on its site, or in use by an instance"),),
}


def error_statuses(path: str, method: str, operation: dict[str, Any], tenant_prefix: str) -> list[str]:
    """The error statuses an operation can answer, derived from what it declares: every tenant route
    authenticates (401, 403), reads an org and ids (400, 404) and the database (500, 503); writes can
    conflict (409); a body can be too large (413), a target or the headers too (414, 431: answered by
    the server's protocol, nico.api.http_limits)."""
    if not path.startswith(tenant_prefix):
        return ["503"] if path == "/readyz" else []
    statuses = ["400", "401", "403", "404", "414", "431", "500", "503"]
    if method in ("post", "patch", "put", "delete"):
        statuses.append("409")
    if "requestBody" in operation or method in ("post", "patch", "put"):
        statuses.append("413")
    return sorted(statuses)


def declare_errors(schema: dict[str, Any], tenant_prefix: str) -> None:
    """Every operation lists the error statuses it can answer, each with the envelope; FastAPI's 422
    (which nico never answers: validation failures are 400) is removed."""
    components = schema.setdefault("components", {}).setdefault("schemas", {})
    components["ErrorEnvelope"] = ErrorEnvelope.model_json_schema()
    for name in ("HTTPValidationError", "ValidationError"):
        components.pop(name, None)
    for path, item in schema["paths"].items():
        for method, operation in item.items():
            if not path.startswith(tenant_prefix):
                operation["security"] = []  # health, readiness and metrics need no token
            body = operation.get("requestBody")
            if body is not None and "required" not in body:
                # parsing reads an absent body as {} (parsing.read_body): a PATCH without one changes nothing
                body["required"] = method != "patch"
            responses = operation.setdefault("responses", {})
            responses.pop("422", None)
            for status in error_statuses(path, method, operation, tenant_prefix):
                responses.setdefault(status, {"description": ERROR_TEXTS[status]})
            for refusal in REFUSALS.get(operation.get("operationId", ""), ()):
                response = responses.setdefault(refusal.status, {"description": ""})
                response["description"] += f". Also to a request valid by this document: {refusal.reason}"
            for status, response in responses.items():
                if status >= "400":  # a route's own extra statuses (412, say) carry the envelope too
                    response["content"] = {"application/json": {"schema": ENVELOPE_REF}}
            accepted = responses.get("202")
            if method == "delete" and accepted is not None:  # rendering.deletion_accepted: plain text
                accepted["content"] = {
                    "text/plain": {"schema": {"type": "string", "const": DELETION_ACCEPTED}}
                }


def json_body(model: type[BaseModel], *, required: bool | None = None) -> dict[str, Any]:
    """``openapi_extra`` for a route whose JSON body is ``model``. ``required`` defaults to true, false for
    a PATCH (an absent body reads as {}, see :func:`declare_errors`); a PATCH whose empty body is refused
    says ``required=True``."""
    _BODY_MODELS[model.__name__] = model
    ref = {"$ref": f"#/components/schemas/{model.__name__}"}
    body: dict[str, Any] = {"content": {"application/json": {"schema": ref}}}
    if required is not None:
        body["required"] = required
    return {"requestBody": body}


NO_NUL = "^[^\\u0000]*$"
ANY_JSON = "JsonWithoutNul"


def any_json_schema() -> dict[str, Any]:
    """What an unknown key of a body may carry: binding ignores it, but refuses NUL anywhere."""
    ref = {"$ref": f"#/components/schemas/{ANY_JSON}"}
    return {
        "description": "Any JSON value without NUL in a string or key.",
        "anyOf": [
            {"type": ["null", "boolean", "number"]},
            {"type": "string", "pattern": NO_NUL},
            {"type": "array", "items": ref},
            {"type": "object", "propertyNames": {"pattern": NO_NUL}, "additionalProperties": ref},
        ],
    }


def forbid_nul(schema: Any) -> None:
    """Every string and object key of a request body schema declared free of NUL: binding refuses NUL
    anywhere in a body (PostgreSQL cannot store it, :func:`nico.api.parsing.text_problem`)."""
    if isinstance(schema, list):
        for item in schema:
            forbid_nul(item)
        return
    if not isinstance(schema, dict):
        return
    kinds = schema.get("type")
    kinds = kinds if isinstance(kinds, list) else [kinds]
    if "default" in schema and schema["default"] is None and "type" in schema and "null" not in kinds:
        del schema["default"]  # a declared non-nullable field: null is no example of it
    if "string" in kinds and not {"pattern", "format", "enum", "const"} & schema.keys():
        schema["pattern"] = NO_NUL
    if "object" in kinds:
        names = schema.setdefault("propertyNames", {})
        names.setdefault("pattern", NO_NUL)
        if schema.get("additionalProperties", True) is True:  # unknown keys: ignored, but never NUL
            schema["additionalProperties"] = {"$ref": f"#/components/schemas/{ANY_JSON}"}
    for key in ("properties", "$defs"):
        for child in schema.get(key, {}).values():
            forbid_nul(child)
    for key in ("items", "additionalProperties", "anyOf", "oneOf", "allOf"):
        forbid_nul(schema.get(key))


def build_openapi(app: FastAPI) -> dict[str, Any]:
    if app.openapi_schema:
        return app.openapi_schema
    schema = get_openapi(
        title=app.title,
        version=app.version,
        description=app.description,
        routes=app.routes,
        tags=app.openapi_tags,
    )
    components = schema.setdefault("components", {}).setdefault("schemas", {})
    components[ANY_JSON] = any_json_schema()
    for name, model in sorted(_BODY_MODELS.items()):
        body = copy.deepcopy(
            model.model_json_schema(by_alias=True, ref_template="#/components/schemas/{model}")
        )
        forbid_nul(body)
        for def_name, definition in body.pop("$defs", {}).items():
            components.setdefault(def_name, definition)
        components[name] = body
    declare_errors(schema, getattr(app.state, "tenant_prefix", "/v2/org/"))
    schema.setdefault("components", {})["securitySchemes"] = {
        "bearerAuth": {"type": "http", "scheme": "bearer", "bearerFormat": "JWT"}
    }
    schema["security"] = [{"bearerAuth": []}]
    app.openapi_schema = schema
    return schema

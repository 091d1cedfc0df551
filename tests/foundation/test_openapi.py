"""openapi.yaml is generated from the app (``nico openapi``); this fails when it drifts."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import yaml

from nico.api.openapi import REFUSALS
from nico.api.openapi_yaml import render_yaml

COMMITTED = Path(__file__).resolve().parents[2] / "openapi.yaml"
# libyaml's loader where PyYAML has it: the pure-Python one takes about a second for this document.
LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@functools.cache
def committed() -> dict[str, Any]:
    """The committed document, parsed once for the module's tests (which only read it)."""
    document: dict[str, Any] = yaml.load(COMMITTED.read_text(), Loader=LOADER)
    return document


def test_committed_openapi_matches_the_app() -> None:
    assert COMMITTED.read_text() == render_yaml(), "openapi.yaml is stale: run `nico openapi`"


def test_every_route_has_an_operation_id_and_every_reference_resolves() -> None:
    document = committed()
    schemas = set(document["components"]["schemas"])
    refs: set[str] = set()

    def walk(node: object) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                if key == "$ref":
                    refs.add(value.rsplit("/", 1)[-1])
                else:
                    walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(document)
    assert refs <= schemas, refs - schemas
    for path, operations in document["paths"].items():
        if not path.startswith("/v2/"):
            continue
        for method, operation in operations.items():
            assert operation.get("operationId"), (method, path)


def test_every_operation_declares_its_error_statuses_with_the_envelope_and_none_advertises_422() -> None:
    """What each operation can answer (derived from what it declares: every tenant route authenticates,
    reads an org and ids and the database; writes can conflict; bodies can be too large) is declared,
    each error with the ``ErrorEnvelope`` schema; FastAPI's 422 (never answered) appears nowhere."""
    document = committed()
    assert "HTTPValidationError" not in document["components"]["schemas"]
    envelope = document["components"]["schemas"]["ErrorEnvelope"]
    assert envelope["required"] == ["source", "message"] and set(envelope["properties"]) == {
        "source",
        "message",
        "data",
    }
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            responses = operation["responses"]
            assert "422" not in responses, (method, path)
            if not path.startswith("/v2/"):
                assert operation["security"] == [], (method, path)
                continue
            wanted = {"400", "401", "403", "404", "500", "503"}
            if method in ("post", "patch", "put", "delete"):
                wanted.add("409")
            if "requestBody" in operation:
                wanted.add("413")
            assert wanted <= set(responses), (method, path, wanted - set(responses))
            for status in wanted:
                schema = responses[status]["content"]["application/json"]["schema"]
                assert schema == {"$ref": "#/components/schemas/ErrorEnvelope"}, (method, path, status)


def test_list_operations_declare_their_paging_parameters() -> None:
    document = committed()
    for path in ("/v2/org/{org}/nico/nvlink-logical-partition", "/v2/org/{org}/nico/instance"):
        parameters = {p["name"]: p["schema"] for p in document["paths"][path]["get"]["parameters"]}
        assert parameters["pageSize"].items() >= {"type": "integer", "minimum": 0, "maximum": 100}.items()
        assert parameters["pageNumber"]["maximum"] == 2**31 - 1
        assert "NAME_ASC" in parameters["orderBy"]["enum"]
        assert parameters["includeRelation"]["items"]["enum"]


def test_resource_ids_in_paths_are_declared_uuids_and_machine_ids_are_not() -> None:
    """The server answers 400 ``Invalid ... ID in URL`` to a path id that is not a UUID, so the document
    declares each one ``format: uuid``; machine ids (and the association reference, a machine id or an
    old association id) are plain strings."""
    document = committed()
    plain = {"org", "machineId", "machineAssociationId"}
    seen = set()
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            for parameter in operation.get("parameters", []):
                if parameter["in"] != "path":
                    continue
                seen.add(parameter["name"])
                is_uuid = parameter["schema"].get("format") == "uuid"
                assert is_uuid == (parameter["name"] not in plain), (method, path, parameter)
    assert {"instanceId", "siteId", "vpcId", "nvLinkLogicalPartitionId", "machineId"} <= seen


def test_refusals_name_operations_of_the_document_and_say_why_there() -> None:
    """Each rule OpenAPI cannot express (REFUSALS, which the fuzz test allows per operation) names an
    operation of the document, whose error response tells a client about it."""
    document = committed()
    operations = {
        operation["operationId"]: operation
        for item in document["paths"].values()
        for operation in item.values()
        if "operationId" in operation
    }
    for operation_id, refusals in REFUSALS.items():
        assert operation_id in operations, operation_id
        for refusal in refusals:
            assert refusal.reason in operations[operation_id]["responses"][refusal.status]["description"]


def test_query_parameters_the_server_always_needs_are_required() -> None:
    document = committed()
    for path in (
        "/machine/gpu/stats",
        "/machine/instance-type/stats",
        "/machine/instance-type/stats/summary",
        "/tenant/instance-type/stats",
    ):
        parameters = {
            p["name"]: p for p in document["paths"]["/v2/org/{org}/nico" + path]["get"]["parameters"]
        }
        assert parameters["siteId"]["required"] is True, path
        assert parameters["siteId"]["schema"]["format"] == "uuid", path

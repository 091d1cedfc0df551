"""openapi.yaml is generated from the app (``nico openapi``); this fails when it drifts."""

from __future__ import annotations

from pathlib import Path

import yaml

from nico.api.openapi import render_yaml

COMMITTED = Path(__file__).resolve().parents[2] / "openapi.yaml"


def test_committed_openapi_matches_the_app() -> None:
    assert COMMITTED.read_text() == render_yaml(), "openapi.yaml is stale: run `nico openapi`"


def test_every_route_has_an_operation_id_and_every_reference_resolves() -> None:
    document = yaml.safe_load(COMMITTED.read_text())
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

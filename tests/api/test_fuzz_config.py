"""The schemathesis configuration the API fuzz test writes: the rules OpenAPI cannot express are
allowed per operation and per role, never for the whole run."""

from __future__ import annotations

import tomllib

from nico.api.openapi import PROVIDER, REFUSALS, TENANT
from tests.api import fuzzing
from tests.api.fuzz_hooks import as_json_integers


def test_each_refusal_is_allowed_on_its_operation_for_its_roles_only() -> None:
    for role in (TENANT, PROVIDER):
        config = tomllib.loads(fuzzing.config_text("some-org", role))
        assert config["parameters"] == {"path.org": "some-org"}
        assert "checks" not in config  # nothing for every operation
        allowed = {
            entry["include-operation-id"]: entry["checks"]["positive_data_acceptance"]["expected-statuses"]
            for entry in config["operations"]
            if "include-operation-id" in entry
        }
        for operation_id, refusals in REFUSALS.items():
            mine = {refusal.status for refusal in refusals if role in refusal.roles}
            if not mine:
                assert operation_id not in allowed, (role, operation_id)
                continue
            assert set(allowed[operation_id]) == {*fuzzing.ACCEPTED, *mine}, (role, operation_id)
    # The machine list has a refusal for tenants only (no siteId) beside one for every caller.
    machine_list = REFUSALS["get-all-machine"]
    assert {r.roles for r in machine_list} == {frozenset({TENANT}), frozenset({TENANT, PROVIDER})}


def test_integers_go_out_as_json_integers_and_nothing_else_changes() -> None:
    body = {"count": 18.0, "ratio": 1.5, "items": [{"n": 2.0, "s": "2.0"}], "flag": True, "huge": 1e300}
    assert as_json_integers(body) == {
        "count": 18,
        "ratio": 1.5,
        "items": [{"n": 2, "s": "2.0"}],
        "flag": True,
        "huge": 1e300,
    }
    assert isinstance(as_json_integers(body)["count"], int)

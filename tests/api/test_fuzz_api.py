"""schemathesis, every phase (stateful included) and every check, against the committed openapi.yaml on
a running app, with a tenant token and a provider token: no failure on any check."""

from __future__ import annotations

import pytest

from nico.api.auth import issue_dev_token
from nico.config import Settings
from tests.api import fuzzing
from tests.support import factories as f

MAX_EXAMPLES = 3  # per operation and phase: about a minute per token on two cores


@pytest.mark.parametrize("role", ["TENANT_ADMIN", "PROVIDER_ADMIN"])
async def test_schemathesis_finds_nothing(role: str, settings: Settings, world: f.NvlinkSite) -> None:
    org = world.tenant.org if role == "TENANT_ADMIN" else world.provider.org
    with fuzzing.serving(settings) as url:
        token = issue_dev_token(settings, org=org, roles=[role])
        outcome = fuzzing.run(url, token, org, max_examples=MAX_EXAMPLES)
    print(f"{role}: {outcome.cases} cases, checks {outcome.checks}, failures {outcome.failures}")
    assert outcome.cases > 0, outcome.messages
    assert outcome.failures == {}, "\n".join(outcome.messages)

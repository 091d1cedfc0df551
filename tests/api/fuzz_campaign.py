"""schemathesis against the committed openapi.yaml on a running nico (uvicorn on loopback, a fresh
PostgreSQL database with one NVLink site), every phase and every check, with a tenant token and a
provider token; prints the cases and the failures per check. ``test_fuzz_api.py`` runs the same
harness (``fuzzing``) with few examples; this is the long campaign, run by hand:

    python tests/api/fuzz_campaign.py --max-examples 8   # at least 5,000 cases over both tokens
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from nico.api.app import build_context
from nico.api.auth import issue_dev_token
from nico.config import load_settings
from nico.db import migrate
from tests.api import fuzzing
from tests.support import db as testdb
from tests.support import factories as f

SECRET = "fuzz-secret-0123456789abcdef-0123456789"


async def seed(settings: object, url: str) -> tuple[str, str]:
    ctx = build_context(settings, url)  # type: ignore[arg-type]
    try:
        async with ctx.sessions() as session:
            world = await f.nvlink_site(session, racks=2, trays=4)
            orgs = world.tenant.org, world.provider.org
            await session.commit()
            return orgs
    finally:
        await ctx.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--max-examples", type=int, default=8, help="per operation and phase")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    url = testdb.create_database("nico_fuzz")
    try:
        migrate.upgrade(url)
        with tempfile.TemporaryDirectory(prefix="nico-fuzz-data-") as data:
            settings = load_settings(database_url=url, data_dir=data, auth={"hs256_secret": SECRET})
            tenant_org, provider_org = asyncio.run(seed(settings, url))
            total_cases, failures = 0, 0
            with fuzzing.serving(settings) as base:
                for role, org in (("TENANT_ADMIN", tenant_org), ("PROVIDER_ADMIN", provider_org)):
                    token = issue_dev_token(settings, org=org, roles=[role])
                    outcome = fuzzing.run(
                        base, token, org, role=role, max_examples=args.max_examples, seed=args.seed
                    )
                    total_cases += outcome.cases
                    print(f"\n{role} ({org}): {outcome.cases} cases, exit code {outcome.exit_code}")
                    print(f"  {'check':32} {'ran':>7} {'failed':>7}")
                    for name in sorted(outcome.checks):
                        failed = outcome.failures.get(name, 0)
                        failures += failed
                        print(f"  {name:32} {outcome.checks[name]:>7} {failed:>7}")
                    for message in outcome.messages:
                        print("  -", message)
            print(f"\ntotal: {total_cases} cases, {failures} failing checks")
            return 0 if failures == 0 else 1
    finally:
        testdb.drop_database(url)


if __name__ == "__main__":
    raise SystemExit(main())

"""The commands that talk to a running API (``export``, ``wait-ready``): NICO_ORG, NICO_URL and
NICO_TOKEN stand for their options; an API that cannot be reached is one line naming the URL; a
refusal is the server's own message, exit 1 (not a usage error), in ``--watch`` too."""

from __future__ import annotations

import asyncio
import os
import sys

import pytest
from typer.testing import CliRunner

from nico.cli import app
from nico.config import Settings
from tests.api.conftest import ORG
from tests.support import factories as f
from tests.support.auth import bearer
from tests.support.net import free_port
from tests.support.replica import replica

pytestmark = pytest.mark.usefixtures("db")
EXPORT = ["export", "--format", "slurm-topology-conf"]


def token(settings: Settings, org: str, *roles: str) -> str:
    return bearer(settings, org, *roles)["Authorization"].removeprefix("Bearer ")


async def run(args: list[str], env: dict[str, str | None]) -> tuple[int, str, str]:
    result = await asyncio.to_thread(CliRunner().invoke, app, args, env=env)
    return result.exit_code, result.stdout, result.stderr


async def test_nico_org_url_and_token_stand_for_the_options(
    settings: Settings, database_url: str, world: f.NvlinkSite
) -> None:
    async with replica(settings, database_url) as url:
        env: dict[str, str | None] = {"NICO_ORG": ORG, "NICO_URL": url, "NICO_TOKEN": token(settings, ORG)}
        code, out, err = await run(EXPORT, env)
        assert code == 0, err
        assert out.startswith("# Slurm topology.conf")
        code, out, err = await run(["wait-ready", "--timeout", "0"], env)
        assert code == 1 and "timeout: 0 instances exist, fewer than --min 1" in err
        code, out, err = await run(EXPORT, env | {"NICO_ORG": None})
        assert code == 2 and "--org" in err


async def test_an_api_that_cannot_be_reached_is_named(settings: Settings) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    env: dict[str, str | None] = {"NICO_URL": url, "NICO_TOKEN": token(settings, ORG)}
    code, out, err = await run([*EXPORT, "--org", ORG], env)
    assert (code, out) == (1, "")
    assert len(err.splitlines()) == 1
    assert err.startswith(f"error: cannot reach {url}/v2/org/{ORG}/nico/nvlink-topology/export")
    code, out, err = await run(["wait-ready", "--org", ORG], env)
    assert code == 1 and f"cannot reach {url}" in err


async def test_a_refusal_is_the_servers_message_and_exit_1(
    settings: Settings, database_url: str, world: f.NvlinkSite
) -> None:
    async with replica(settings, database_url) as url:
        env: dict[str, str | None] = {"NICO_URL": url, "NICO_TOKEN": token(settings, "another-org")}
        code, out, err = await run([*EXPORT, "--org", ORG], env)
        assert (code, out) == (1, "")
        assert len(err.splitlines()) == 1 and "Usage" not in err
        assert err.startswith(f"error: GET {url}/v2/org/{ORG}/nico/nvlink-topology/export?")
        assert ": 403 " in err
        code, out, err = await run(["wait-ready", "--org", ORG], env)
        assert code == 1 and ": 403 " in err

        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "nico.cli", *EXPORT, "--org", ORG, "--watch",
            env={**os.environ, **{k: v for k, v in env.items() if v is not None}},
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        try:
            stdout, stderr = await asyncio.wait_for(process.communicate(), 60)
        finally:
            if process.returncode is None:
                process.kill()
        assert (process.returncode, stdout) == (1, b"")
        assert stderr.decode().startswith(f"error: GET {url}/v2/org/{ORG}/nico/nvlink-topology/events")
        assert b": 403 " in stderr

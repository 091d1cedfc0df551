"""Bearer tokens: HS256 development keys, RS256 PEM keys, ES256 JWKS; the 401/403 texts of spec §1.6."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import httpx
import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from typer.testing import CliRunner

from nico.api.app import create_app
from nico.api.auth import TokenVerifier, issue_dev_token, normalize_role
from nico.api.context import AppContext
from nico.cli import app as cli
from nico.config import Settings, load_settings
from tests.conftest import TEST_SECRET
from tests.support.auth import bearer

PATH = "/v2/org/acme/nico/tenant/current"


def token(settings: Settings, **claims: object) -> str:
    now = int(time.time())
    body = {
        "iss": "nico-dev",
        "aud": "nico",
        "sub": "u",
        "exp": now + 60,
        "org": "acme",
        "roles": ["TENANT_ADMIN"],
    }
    body.update(claims)
    return jwt.encode(
        {k: v for k, v in body.items() if v is not None},
        TEST_SECRET,
        algorithm="HS256",
    )


@pytest.mark.parametrize(
    ("header", "message"),
    [
        (None, "Request is missing authorization header"),
        ("Basic abc", "Invalid Authorization header format"),
        ("Bearer", "Invalid Authorization header format"),
        ("Bearer not.a.jwt", "Error parsing the token claims"),
    ],
)
async def test_malformed_authorization_is_401(
    client: httpx.AsyncClient, header: str | None, message: str
) -> None:
    headers = {"Authorization": header} if header else {}
    response = await client.get(PATH, headers=headers)
    assert response.status_code == 401
    assert response.json() == {"source": "nico", "message": message, "data": None}


async def test_wrong_issuer_signature_audience_or_expiry_is_401(
    client: httpx.AsyncClient, settings: Settings
) -> None:
    now = int(time.time())
    bad = [
        token(settings, iss="someone-else"),
        token(settings, iss=None),
        token(settings, aud="other-audience"),
        token(settings, exp=now - 3600),
        jwt.encode({"iss": "nico-dev", "aud": "nico", "exp": now + 60, "org": "acme"}, "wrong-key", "HS256"),
    ]
    for value in bad:
        response = await client.get(PATH, headers={"Authorization": f"Bearer {value}"})
        assert response.status_code == 401, value
        assert response.json()["message"] == "Invalid authorization token in request"


async def test_membership_then_role_checks_are_403(client: httpx.AsyncClient, settings: Settings) -> None:
    other_org = await client.get(PATH, headers=bearer(settings, "someone-else"))
    assert other_org.status_code == 403
    assert other_org.json()["message"] == "Failed to validate membership for org: acme"
    provider_only = await client.get(PATH, headers=bearer(settings, "acme", "PROVIDER_ADMIN"))
    assert provider_only.status_code == 403
    assert provider_only.json()["message"] == "User does not have Tenant Admin role with org"


def test_legacy_role_names() -> None:
    assert normalize_role("TENANT_ADMIN") == "TENANT_ADMIN"
    assert normalize_role("NICO_TENANT_ADMIN") == "TENANT_ADMIN"
    assert normalize_role("FORGE_PROVIDER_ADMIN") == "PROVIDER_ADMIN"
    assert normalize_role("A_B_TENANT_ADMIN") is None
    assert normalize_role("tenant_admin") is None


async def test_legacy_role_is_accepted_and_roles_may_be_space_separated(
    client: httpx.AsyncClient, settings: Settings
) -> None:
    legacy = await client.get(
        PATH, headers={"Authorization": f"Bearer {token(settings, roles=['NICO_TENANT_ADMIN'])}"}
    )
    assert legacy.status_code == 200
    spaced = await client.get(
        PATH, headers={"Authorization": f"Bearer {token(settings, roles='X TENANT_ADMIN')}"}
    )
    assert spaced.status_code == 200


async def test_tenant_current_is_created_once_even_when_raced(
    client: httpx.AsyncClient, settings: Settings
) -> None:
    headers = bearer(settings, "acme")
    responses = await asyncio.gather(*(client.get(PATH, headers=headers) for _ in range(8)))
    assert {r.status_code for r in responses} == {200}
    assert len({r.json()["id"] for r in responses}) == 1
    body = responses[0].json()
    assert body["org"] == "acme"
    assert body["capabilities"] == {"targetedInstanceCreation": False}
    assert set(body) == {"id", "org", "orgDisplayName", "capabilities", "created", "updated"}


async def test_deprecated_tenant_endpoints(client: httpx.AsyncClient, settings: Settings) -> None:
    headers = bearer(settings, "acme")
    post = await client.post("/v2/org/acme/nico/tenant", headers=headers)
    assert post.status_code == 400
    assert post.json()["message"] == "POST '/org/:orgName/nico/tenant' endpoint has been deprecated"
    patch = await client.patch(PATH, headers=headers)
    assert patch.json()["message"] == "PATCH '/org/:orgName/nico/tenant/current' endpoint has been deprecated"


async def test_infrastructure_provider_current(client: httpx.AsyncClient, settings: Settings) -> None:
    path = "/v2/org/prov/nico/infrastructure-provider/current"
    denied = await client.get(path, headers=bearer(settings, "prov", "TENANT_ADMIN"))
    assert denied.status_code == 403
    assert denied.json()["message"] == "User does not have Provider Admin role with org"
    first = await client.get(path, headers=bearer(settings, "prov", "PROVIDER_VIEWER"))
    second = await client.get(path, headers=bearer(settings, "prov", "PROVIDER_ADMIN"))
    assert first.status_code == second.status_code == 200
    assert first.json()["id"] == second.json()["id"]


async def test_metadata_needs_only_a_valid_token(client: httpx.AsyncClient, settings: Settings) -> None:
    response = await client.get("/v2/org/anything/nico/metadata", headers=bearer(settings, "elsewhere"))
    assert response.status_code == 200
    assert set(response.json()) == {"version", "buildTime"}
    assert (await client.get("/v2/org/anything/nico/metadata")).status_code == 401


async def test_nico_token_is_accepted_by_a_server_on_the_same_data_directory(
    tmp_path: Path, app_context: AppContext, database_url: str, db: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NICO_DATA_DIR", str(tmp_path))
    result = CliRunner().invoke(cli, ["token", "--org", "acme", "--role", "TENANT_ADMIN"])
    assert result.exit_code == 0, result.output
    value = result.stdout.strip()
    assert f"created a new signing key {tmp_path}" in " ".join(result.stderr.split())  # says so, once
    again = CliRunner().invoke(cli, ["token", "--org", "acme"])
    assert again.exit_code == 0 and "signing key" not in again.stderr, again.output
    dev = load_settings(database_url=database_url, data_dir=tmp_path)
    ctx = AppContext(dev, app_context.engine, app_context.sessions, TokenVerifier(dev), app_context.registry)
    app = create_app(dev, context=ctx)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as c:
        ok = await c.get(PATH, headers={"Authorization": f"Bearer {value}"})
    assert ok.status_code == 200, ok.text
    other = load_settings(database_url=database_url, data_dir=tmp_path / "elsewhere")
    assert issue_dev_token(other, org="acme", roles=["TENANT_ADMIN"]) != value


def _pem_settings(tmp_path: Path, database_url: str, **auth: object) -> Settings:
    return load_settings(database_url=database_url, data_dir=tmp_path, auth=auth)


async def test_rs256_with_a_pem_public_key(
    tmp_path: Path, app_context: AppContext, database_url: str, db: str
) -> None:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    (tmp_path / "pub.pem").write_bytes(pem)
    prod = _pem_settings(
        tmp_path,
        database_url,
        issuer="https://idp.example",
        audience="nico-prod",
        algorithms=["RS256"],
        public_key_path=str(tmp_path / "pub.pem"),
        org_claim="ext.org",
        roles_claim="ext.roles",
    )
    ctx = AppContext(
        prod, app_context.engine, app_context.sessions, TokenVerifier(prod), app_context.registry
    )
    app = create_app(prod, context=ctx)
    claims = {
        "iss": "https://idp.example",
        "aud": "nico-prod",
        "sub": "alice",
        "exp": int(time.time()) + 60,
        "ext": {"org": "acme", "roles": ["TENANT_ADMIN"]},
    }
    good = jwt.encode(claims, key, algorithm="RS256")
    hs = jwt.encode(claims, TEST_SECRET, algorithm="HS256")  # algorithm not allowed here
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as c:
        assert (await c.get(PATH, headers={"Authorization": f"Bearer {good}"})).status_code == 200
        refused = await c.get(PATH, headers={"Authorization": f"Bearer {hs}"})
        assert refused.status_code == 401


@pytest.fixture
def jwks_server() -> Iterator[tuple[str, ec.EllipticCurvePrivateKey]]:
    key = ec.generate_private_key(ec.SECP256R1())
    jwk = json.loads(jwt.algorithms.ECAlgorithm.to_jwk(key.public_key()))
    jwk.update({"kid": "k1", "use": "sig", "alg": "ES256"})
    body = json.dumps({"keys": [jwk]}).encode()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = HTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}/jwks.json", key
    server.shutdown()


async def test_es256_with_keys_from_a_jwks_url(
    tmp_path: Path,
    app_context: AppContext,
    database_url: str,
    db: str,
    jwks_server: tuple[str, ec.EllipticCurvePrivateKey],
) -> None:
    url, key = jwks_server
    prod = _pem_settings(
        tmp_path,
        database_url,
        issuer="https://idp.example",
        audience="nico",
        algorithms=["ES256"],
        jwks_url=url,
    )
    ctx = AppContext(
        prod, app_context.engine, app_context.sessions, TokenVerifier(prod), app_context.registry
    )
    app = create_app(prod, context=ctx)
    claims = {
        "iss": "https://idp.example",
        "aud": "nico",
        "sub": "bob",
        "exp": int(time.time()) + 60,
        "org": "acme",
        "roles": ["TENANT_ADMIN"],
    }
    good = jwt.encode(claims, key, algorithm="ES256", headers={"kid": "k1"})
    other = jwt.encode(
        claims, ec.generate_private_key(ec.SECP256R1()), algorithm="ES256", headers={"kid": "k1"}
    )
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as c:
        assert (await c.get(PATH, headers={"Authorization": f"Bearer {good}"})).status_code == 200
        assert (await c.get(PATH, headers={"Authorization": f"Bearer {other}"})).status_code == 401

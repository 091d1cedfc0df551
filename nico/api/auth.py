"""Bearer-token authentication (PyJWT) and the role checks of spec/nico-rest.md §1.6.

Development tokens are HS256, signed with ``auth.hs256_secret`` or, when that is unset, with a key
generated once in the data directory (so ``nico token``, ``nico serve`` and ``nico demo`` agree).
Production tokens are RS256/ES256, verified with a PEM public key or keys from a JWKS URL. The issuer
and audience are always checked. The org and its roles come from configurable claims.
"""

from __future__ import annotations

import os
import secrets
import time
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jwt

from nico.config import LEGACY_ROLE_PREFIXES, AuthConfig, Settings
from nico.services.errors import ServiceError

TENANT_ADMIN = "TENANT_ADMIN"
PROVIDER_ADMIN = "PROVIDER_ADMIN"
PROVIDER_VIEWER = "PROVIDER_VIEWER"
KNOWN_ROLES = frozenset({TENANT_ADMIN, PROVIDER_ADMIN, PROVIDER_VIEWER})

DEV_SECRET_FILE = "dev-jwt-secret"


def unauthorized(message: str) -> ServiceError:
    return ServiceError(401, message)


def normalize_role(role: str, legacy_prefixes: Sequence[str] = LEGACY_ROLE_PREFIXES) -> str | None:
    """``TENANT_ADMIN`` as is; a legacy name (``NICO_TENANT_ADMIN``) with one of ``legacy_prefixes``
    (``auth.legacy_role_prefixes``) stripped. Any other prefix grants nothing: an identity provider's
    ``PENDING_PROVIDER_ADMIN`` is not ``PROVIDER_ADMIN``."""
    if role in KNOWN_ROLES:
        return role
    for prefix in legacy_prefixes:
        if role.startswith(prefix) and role[len(prefix) :] in KNOWN_ROLES:
            return role[len(prefix) :]
    return None


@dataclass(frozen=True)
class Principal:
    """Who is calling: token subject, and for each org they belong to, their (normalised) roles."""

    subject: str
    orgs: dict[str, frozenset[str]] = field(default_factory=dict)
    org_display_names: dict[str, str] = field(default_factory=dict)
    expires_at: float = float("inf")

    def roles_in(self, org: str) -> frozenset[str]:
        return self.orgs.get(org, frozenset())

    def require_member(self, org: str, *, with_suffix: bool = True) -> frozenset[str]:
        if org not in self.orgs:
            suffix = f": {org}" if with_suffix else ""
            raise ServiceError(403, f"Failed to validate membership for org{suffix}")
        return self.orgs[org]

    def require_tenant_admin(self, org: str) -> None:
        if TENANT_ADMIN not in self.require_member(org):
            raise ServiceError(403, "User does not have Tenant Admin role with org")

    def require_provider_admin(self, org: str) -> None:
        if PROVIDER_ADMIN not in self.require_member(org):
            raise ServiceError(403, "User does not have Provider Admin role with org")

    def require_provider_or_tenant(self, org: str) -> tuple[bool, bool]:
        """Membership, then a provider role (admin or viewer) or the tenant admin role: the reference's
        "provider or tenant" reads. Returns (provider side, tenant side)."""
        roles = self.require_member(org, with_suffix=False)
        provider, tenant = bool(roles & {PROVIDER_ADMIN, PROVIDER_VIEWER}), TENANT_ADMIN in roles
        if not (provider or tenant):
            raise ServiceError(403, "User does not have Provider or Tenant role with org")
        return provider, tenant

    def is_provider(self, org: str) -> bool:
        return bool(self.roles_in(org) & {PROVIDER_ADMIN, PROVIDER_VIEWER})


def _claim(claims: dict[str, Any], path: str) -> Any:
    value: Any = claims
    for part in path.split("."):
        if not isinstance(value, dict) or part not in value:
            return None
        value = value[part]
    return value


def _role_set(raw: Any, legacy_prefixes: Sequence[str]) -> frozenset[str]:
    if isinstance(raw, str):
        items = raw.split()
    elif isinstance(raw, list):
        items = [item for item in raw if isinstance(item, str)]
    else:
        return frozenset()
    return frozenset(role for role in (normalize_role(item, legacy_prefixes) for item in items) if role)


def principal_from_claims(claims: dict[str, Any], config: AuthConfig) -> Principal:
    """Map claims to a principal.

    The org claim is a string or a list of strings; the roles claim is a list, a space-separated
    string (roles in every listed org), or an object mapping org -> roles.
    """
    org_raw = _claim(claims, config.org_claim)
    roles_raw = _claim(claims, config.roles_claim)
    orgs: dict[str, frozenset[str]] = {}
    if isinstance(roles_raw, dict):
        for org, roles in roles_raw.items():
            orgs[str(org)] = _role_set(roles, config.legacy_role_prefixes)
    else:
        names = [org_raw] if isinstance(org_raw, str) else org_raw if isinstance(org_raw, list) else []
        roles = _role_set(roles_raw, config.legacy_role_prefixes)
        for name in names:
            if isinstance(name, str) and name:
                orgs[name] = roles
    display = _claim(claims, config.org_display_name_claim)
    display_names = dict.fromkeys(orgs, display) if isinstance(display, str) else {}
    return Principal(
        subject=str(claims.get("sub") or ""),
        orgs=orgs,
        org_display_names=display_names,
        expires_at=float(claims.get("exp") or float("inf")),
    )


def dev_secret(data_dir: Path) -> str:
    """The development HS256 key of this data directory, created on first use (mode 0600)."""
    path = data_dir / DEV_SECRET_FILE
    try:
        return path.read_text().strip()
    except FileNotFoundError:
        data_dir.mkdir(parents=True, exist_ok=True)
        secret = secrets.token_hex(32)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            os.write(fd, secret.encode())
        finally:
            os.close(fd)
        return secret
    except FileExistsError:  # pragma: no cover - lost a race with another process
        return path.read_text().strip()


def hs256_key(settings: Settings) -> str:
    return settings.auth.hs256_secret or dev_secret(settings.data_dir)


def issue_dev_token(
    settings: Settings,
    *,
    org: str,
    roles: list[str],
    subject: str = "dev-user",
    ttl_seconds: int = 7 * 24 * 3600,
    org_display_name: str | None = None,
) -> str:
    """A signed HS256 token for development, accepted by ``nico serve`` on the same data directory."""
    if "HS256" not in settings.auth.algorithms:
        raise ValueError("development tokens need HS256 in auth.algorithms")
    now = int(time.time())
    claims: dict[str, Any] = {
        "iss": settings.auth.issuer,
        "aud": settings.auth.audience,
        "sub": subject,
        "iat": now,
        "exp": now + ttl_seconds,
    }
    _set_claim(claims, settings.auth.org_claim, org)
    _set_claim(claims, settings.auth.roles_claim, roles)
    if org_display_name:
        _set_claim(claims, settings.auth.org_display_name_claim, org_display_name)
    return jwt.encode(claims, hs256_key(settings), algorithm="HS256")


def _set_claim(claims: dict[str, Any], path: str, value: Any) -> None:
    parts = path.split(".")
    target = claims
    for part in parts[:-1]:
        target = target.setdefault(part, {})
    target[parts[-1]] = value


class TokenVerifier:
    """Checks bearer tokens; verified tokens are cached until they expire."""

    def __init__(self, settings: Settings, cache_size: int = 4096) -> None:
        self.config = settings.auth
        self.algorithms = list(self.config.algorithms)
        self._hs_key = hs256_key(settings) if "HS256" in self.algorithms else None
        self._public_key: str | None = (
            self.config.public_key_path.read_text() if self.config.public_key_path else None
        )
        self._jwks = jwt.PyJWKClient(self.config.jwks_url, cache_keys=True) if self.config.jwks_url else None
        self._cache: OrderedDict[str, Principal] = OrderedDict()
        self._cache_size = cache_size

    @property
    def uses_network(self) -> bool:
        """True when verification may fetch keys (JWKS), so callers should not run it on the loop."""
        return self._jwks is not None

    def principal(self, authorization: str | None) -> Principal:
        if not authorization:
            raise unauthorized("Request is missing authorization header")
        scheme, _, token = authorization.partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token or " " in token:
            raise unauthorized("Invalid Authorization header format")
        cached = self._cache.get(token)
        if cached is not None:
            if cached.expires_at > time.time() - self.config.leeway_seconds:
                self._cache.move_to_end(token)
                return cached
            del self._cache[token]
        principal = self._verify(token)
        self._cache[token] = principal
        if len(self._cache) > self._cache_size:
            self._cache.popitem(last=False)
        return principal

    def _verify(self, token: str) -> Principal:
        try:
            header = jwt.get_unverified_header(token)
            unverified = jwt.decode(token, options={"verify_signature": False})
        except jwt.PyJWTError:
            raise unauthorized("Error parsing the token claims") from None
        if unverified.get("iss") != self.config.issuer:
            raise unauthorized("Invalid authorization token in request")
        algorithm = header.get("alg")
        if algorithm not in self.algorithms:
            raise unauthorized("Invalid authorization token in request")
        key: Any
        if algorithm == "HS256":
            key = self._hs_key
        elif self._jwks is not None:
            try:
                key = self._jwks.get_signing_key_from_jwt(token).key
            except jwt.PyJWTError:
                raise unauthorized("Invalid authorization token in request") from None
        else:
            key = self._public_key
        if key is None:
            raise unauthorized("Invalid authorization token in request")
        try:
            claims = jwt.decode(
                token,
                key,
                algorithms=[algorithm],
                audience=self.config.audience,
                issuer=self.config.issuer,
                leeway=self.config.leeway_seconds,
                options={"require": ["exp", "iss", "aud"]},
            )
        except jwt.PyJWTError:
            raise unauthorized("Invalid authorization token in request") from None
        if any(not _is_number(claims[name]) for name in NUMERIC_CLAIMS if name in claims):
            raise unauthorized("Invalid authorization token in request")
        return principal_from_claims(claims, self.config)


# RFC 7519 §2 NumericDate: a JSON number. PyJWT reads these with ``int()``, which also takes "4102444800".
NUMERIC_CLAIMS = ("exp", "nbf", "iat")


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)

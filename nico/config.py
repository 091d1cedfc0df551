"""Settings: ``NICO_*`` environment variables over an optional TOML file (``NICO_CONFIG``).

The TOML file accepts the reference's ``[nvlink_config]`` section (spec/nvlink-core.md §4) with the
same keys and duration syntax, plus nico's own ``[api]``, ``[auth]`` and ``[database]`` sections.
Environment variables win over the file; nested keys use a double underscore, for example
``NICO_NVLINK_CONFIG__MONITOR_RUN_INTERVAL=30s`` or ``NICO_AUTH__ISSUER=https://idp``.

A bad value stops start-up with :class:`ConfigError`, whose message names the key and the form
that was expected.
"""

from __future__ import annotations

import os
import re
import tomllib
from datetime import timedelta
from pathlib import Path
from typing import Annotated, Any, Literal

import platformdirs
from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict


class ConfigError(Exception):
    """A configuration value is missing or malformed; the message is meant for the operator."""


_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|us|µs|ns|s|m|h|d)")
_UNIT_SECONDS = {
    "ns": 1e-9,
    "us": 1e-6,
    "µs": 1e-6,
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
    "d": 86400.0,
}
DURATION_FORM = 'a duration such as "60s", "1m", "1m30s", "500ms" or bare seconds such as "33"'


def parse_duration(value: Any) -> timedelta:
    """Parse the reference's ``duration_str`` syntax: ``"60s"``, ``"1m"``, ``"1m30s"``, bare ``"33"``."""
    if isinstance(value, timedelta):
        return value
    if isinstance(value, bool):
        raise ValueError(DURATION_FORM)
    if isinstance(value, int | float):
        if value < 0:
            raise ValueError(DURATION_FORM)
        return timedelta(seconds=value)
    if not isinstance(value, str):
        raise ValueError(DURATION_FORM)
    text = value.strip().replace(" ", "")
    if not text:
        raise ValueError(DURATION_FORM)
    if re.fullmatch(r"\d+(?:\.\d+)?", text):
        return timedelta(seconds=float(text))
    pos, seconds = 0, 0.0
    for match in _DURATION_PART.finditer(text):
        if match.start() != pos:
            raise ValueError(DURATION_FORM)
        seconds += float(match.group(1)) * _UNIT_SECONDS[match.group(2)]
        pos = match.end()
    if pos != len(text):
        raise ValueError(DURATION_FORM)
    return timedelta(seconds=seconds)


Duration = Annotated[timedelta, BeforeValidator(parse_duration)]


def _positive(value: timedelta) -> timedelta:
    if value <= timedelta(0):
        raise ValueError(DURATION_FORM + " greater than zero")
    return value


PositiveDuration = Annotated[Duration, BeforeValidator(lambda v: _positive(parse_duration(v)))]


class NvLinkConfig(BaseModel):
    """The reference's ``[nvlink_config]`` section, plus nico's reconciler knobs."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = True
    monitor_run_interval: PositiveDuration = timedelta(seconds=60)
    nmx_m_operation_timeout: PositiveDuration = timedelta(seconds=10)
    nmx_m_endpoint: str | None = None
    # Accepted for compatibility (the reference requires it whenever the section exists); for NMX-M it
    # disables certificate verification, for NMX-C it is ignored in favour of the explicit TLS settings.
    allow_insecure: bool = False
    nmx_c_tls_ca_cert_path: Path | None = None
    nmx_c_tls_client_cert_path: Path | None = None
    nmx_c_tls_client_key_path: Path | None = None
    nmx_c_tls_authority: str | None = None
    # nico additions
    backend: Literal["nmxc", "nmxm"] = "nmxc"
    fabric_call_timeout: PositiveDuration = timedelta(seconds=5)
    reconcile_concurrency: int = Field(default=8, ge=1, le=256)
    notify_debounce: Duration = timedelta(milliseconds=5)
    # Every Nth full pass (and the first) compares every GPU and audits the fabric's GPU inventory;
    # the others compare a digest of each domain's fabric with the one recorded when it last settled.
    deep_pass_every: int = Field(default=10, ge=1)
    retry_backoff_max: PositiveDuration = timedelta(seconds=30)
    # Where a GPU in no tenant partition lives: "domain" (the domain default 32766, never deleted) or
    # "tray" (the reference's 2026 model: tray_partition_<slot>; the domain default is deleted).
    # "domain" by default so an upgrade changes nothing on the fabric; "tray" is opted into.
    default_partition_mode: Literal["domain", "tray"] = "domain"
    # NMX-C endpoints to discover (backend nmxc): each is asked Hello for the domain it serves, so one
    # list covers racks of several domains (minipods: one endpoint per domain behind one chassis
    # serial). Endpoints registered per chassis serial are asked too and used first for their domain.
    nmxc_endpoints: list[str] = Field(default_factory=list)
    # "observe": every pass reads the fabric, plans and reports, but sends no fabric change and
    # records no intent (a live site's first days, `nico admin nvlink-plan` shows what "active" would
    # do); "active": passes change the fabric. Read at start: switching takes a restart.
    mode: Literal["active", "observe"] = "active"
    # Partitions nico did not make (NICo, Base Command Manager, an operator): "keep" never deletes
    # them nor takes their GPUs out, and their GPUs are held (never placed, never sent home);
    # "evict" takes the GPUs nico manages out of them, deleting those left with none.
    foreign_partitions: Literal["keep", "evict"] = "keep"
    # An instance the fabric moved less than this ago is moved again no sooner than this after: its
    # domain's next pass waits, and the changes asked for meanwhile coalesce into it (a tenant moving
    # one instance back and forth cannot make its domain's fabric work unbounded).
    instance_change_interval: PositiveDuration = timedelta(seconds=1)
    # Whether placement may pick a machine whose GPUs report anything but HEALTHY (DEGRADED, NO_NVLINK,
    # ...). Applied by the reconciler's health read (machine.held_unhealthy), which placement and the
    # capacity counts both obey.
    place_on_unhealthy: bool = False

    @field_validator("nmx_m_endpoint")
    @classmethod
    def _endpoint_has_scheme(cls, value: str | None) -> str | None:
        if value is not None and not re.match(r"^https?://[^/]+", value):
            raise ValueError('a base URL with scheme, such as "https://nmx-m.example:8443"')
        return value

    @model_validator(mode="after")
    def _key_needs_cert(self) -> NvLinkConfig:
        if (self.nmx_c_tls_client_key_path is None) != (self.nmx_c_tls_client_cert_path is None):
            raise ValueError(
                "nmx_c_tls_client_cert_path and nmx_c_tls_client_key_path to be set together (mTLS)"
            )
        return self


class ApiConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    host: str = "127.0.0.1"
    port: int = Field(default=8080, ge=0, le=65535)
    name: str = Field(default="nico", pattern=r"^[a-z][a-z0-9-]*$")
    route_version: str = Field(default="v2", pattern=r"^v[0-9]+$")
    placement_event_retention_seconds: int = Field(default=86400, ge=60)
    placement_event_heartbeat_seconds: float = Field(default=15.0, gt=0, le=300)
    emit_deprecated_partition_key: bool = True
    # Request limits (nico.api.http_limits, nico.api.front); docs/configuration.md says why each.
    max_header_bytes: int = Field(default=64 * 1024, ge=4096)
    max_header_line_bytes: int = Field(default=32 * 1024, ge=1024)
    max_request_line_bytes: int = Field(default=8 * 1024, ge=1024)
    max_query_parameters: int = Field(default=128, ge=16)
    header_timeout_seconds: float = Field(default=10.0, gt=0, le=300)
    max_body_bytes: int = Field(default=1024 * 1024, ge=64 * 1024)
    max_registration_body_bytes: int = Field(default=10 * 1024 * 1024, ge=64 * 1024)


class ExportConfig(BaseModel):
    """The scheduler feed's Kubernetes labels (``nico export``, ``nico label-sync``, the export API)."""

    model_config = ConfigDict(extra="forbid")

    # Which key carries a node's clique: GPU Feature Discovery and the NVIDIA DRA driver write
    # nvidia.com/gpu.clique themselves, so beside either nico keeps to its own key (docs/schedulers.md).
    clique_label: Literal["nvidia.com/gpu.clique", "nvlink.nico.io/clique"] = "nvidia.com/gpu.clique"


class QuotaLimits(BaseModel):
    """One org's limits at each site, where they differ from the ``[quotas]`` defaults."""

    model_config = ConfigDict(extra="forbid")

    logical_partitions: int | None = Field(default=None, ge=0)
    nvlink_changes_in_flight: int | None = Field(default=None, ge=0)


class QuotaConfig(BaseModel):
    """``[quotas]``: what one tenant may hold and ask of the fabric at one site (docs/configuration.md).

    ``logical_partitions``: 64 by default, what one NVL72 domain holds: its multicast budget (1024
    groups) at the default 16 groups per partition, and NMX-C's ``max_num_partitions`` (64). The
    partitions of one tenant that share its instances' domains cannot outnumber that.
    ``nvlink_changes_in_flight``: instances of the tenant whose NVLink change the fabric has not yet
    settled (created, changed or being deleted); 144 by default, what the reconciler works on at once
    (``reconcile_concurrency`` 8 domains of 18 trays). ``fabric_requests_per_second`` and
    ``fabric_request_burst``: the tenant's token bucket of fabric-changing requests, shared by every
    API replica (kept in PostgreSQL)."""

    model_config = ConfigDict(extra="forbid")

    logical_partitions: int = Field(default=64, ge=0)
    nvlink_changes_in_flight: int = Field(default=144, ge=0)
    fabric_requests_per_second: float = Field(default=5.0, gt=0)
    fabric_request_burst: int = Field(default=50, ge=1)
    orgs: dict[str, QuotaLimits] = Field(default_factory=dict)

    def partitions_for(self, org: str) -> int:
        """The org's limit of logical partitions at each site."""
        found = self.orgs.get(org)
        if found is None or found.logical_partitions is None:
            return self.logical_partitions
        return found.logical_partitions

    def changes_for(self, org: str) -> int:
        """The org's limit of instances with an NVLink change in flight at each site."""
        found = self.orgs.get(org)
        if found is None or found.nvlink_changes_in_flight is None:
            return self.nvlink_changes_in_flight
        return found.nvlink_changes_in_flight


def _default_algorithms() -> list[Literal["HS256", "RS256", "ES256"]]:
    return ["HS256"]


# The reference accepts its former role names, NICO_TENANT_ADMIN and FORGE_TENANT_ADMIN (spec §1.6).
LEGACY_ROLE_PREFIXES = ("NICO_", "FORGE_")
HS256_SECRET_MIN_BYTES = 32  # RFC 7518 §3.2: a key at least as long as the hash output


def _default_legacy_prefixes() -> list[str]:
    return list(LEGACY_ROLE_PREFIXES)


class AuthConfig(BaseModel):
    """How bearer tokens are checked.

    Development: HS256 with ``hs256_secret`` (or, when unset, a key generated once in the data
    directory). Production: RS256/ES256 with ``public_key_path`` (PEM) or ``jwks_url``.
    """

    model_config = ConfigDict(extra="forbid")

    issuer: str = "nico-dev"
    audience: str = "nico"
    hs256_secret: str | None = None
    public_key_path: Path | None = None
    jwks_url: str | None = None
    algorithms: list[Literal["HS256", "RS256", "ES256"]] = Field(default_factory=_default_algorithms)
    org_claim: str = "org"
    roles_claim: str = "roles"
    org_display_name_claim: str = "org_display_name"
    leeway_seconds: int = Field(default=30, ge=0)
    legacy_role_prefixes: list[str] = Field(default_factory=_default_legacy_prefixes)

    @field_validator("hs256_secret")
    @classmethod
    def _long_enough(cls, value: str | None) -> str | None:
        if value is not None and len(value.encode()) < HS256_SECRET_MIN_BYTES:
            raise ValueError(f"at least {HS256_SECRET_MIN_BYTES} bytes")
        return value


class Settings(BaseSettings):
    """All of nico's settings. Build with :func:`load_settings`, not directly."""

    model_config = SettingsConfigDict(
        env_prefix="NICO_", env_nested_delimiter="__", extra="forbid", case_sensitive=False
    )

    database_url: str | None = None
    data_dir: Path = Field(default_factory=lambda: Path(platformdirs.user_data_dir("nico")))
    config: Path | None = None
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    db_pool_size: int = Field(default=10, ge=1, le=200)
    api: ApiConfig = Field(default_factory=ApiConfig)
    auth: AuthConfig = Field(default_factory=AuthConfig)
    nvlink_config: NvLinkConfig = Field(default_factory=NvLinkConfig)
    export: ExportConfig = Field(default_factory=ExportConfig)
    quotas: QuotaConfig = Field(default_factory=QuotaConfig)

    @field_validator("database_url")
    @classmethod
    def _url_form(cls, value: str | None) -> str | None:
        if value in (None, ""):
            return None
        assert value is not None
        if not re.match(r"^postgres(?:ql)?(?:\+psycopg)?://", value):
            raise ValueError('a PostgreSQL URL such as "postgresql://user:pass@host:5432/nico"')
        return value

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return (init_settings, env_settings, _TomlSource(settings_cls))


class _TomlSource(PydanticBaseSettingsSource):
    """Reads the file named by ``NICO_CONFIG`` (if any)."""

    def __init__(self, settings_cls: type[BaseSettings]) -> None:
        super().__init__(settings_cls)
        path = os.environ.get("NICO_CONFIG")
        self._data: dict[str, Any] = _read_toml(Path(path)) if path else {}

    def get_field_value(self, field: Any, field_name: str) -> tuple[Any, str, bool]:
        return self._data.get(field_name), field_name, False

    def __call__(self) -> dict[str, Any]:
        return dict(self._data)


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as fh:
            return tomllib.load(fh)
    except FileNotFoundError:
        raise ConfigError(f"NICO_CONFIG: file {str(path)!r} does not exist") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"NICO_CONFIG: {str(path)!r} is not valid TOML: {exc}") from None


def _explain(exc: ValidationError) -> str:
    first = exc.errors()[0]
    key = ".".join(str(p) for p in first["loc"]) or "settings"
    message = first["msg"]
    message = message.removeprefix("Value error, ")
    if first["type"] == "extra_forbidden":
        return f"{key}: unknown setting"
    if first["type"] == "literal_error":
        return f"{key}: {message}, got {first.get('input')!r}"
    if key.endswith("secret"):  # never print a secret, not even a refused one
        return f"{key}: invalid value; expected {message}"
    return f"{key}: invalid value {first.get('input')!r}; expected {message}"


def load_settings(**overrides: Any) -> Settings:
    """Build settings from the environment and ``NICO_CONFIG``; raise :class:`ConfigError` if bad."""
    try:
        return Settings(**overrides)
    except ValidationError as exc:
        raise ConfigError(_explain(exc)) from None

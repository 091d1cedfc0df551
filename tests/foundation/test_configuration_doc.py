"""docs/configuration.md documents every setting: one row per field of ``Settings`` and its sections,
with the TOML key, the environment variable and the default the code really has."""

from __future__ import annotations

import re
from datetime import timedelta
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from nico.config import ApiConfig, AuthConfig, ExportConfig, NvLinkConfig, QuotaConfig, Settings

DOC = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"
SECTIONS: dict[str, type[BaseModel]] = {
    "api": ApiConfig,
    "auth": AuthConfig,
    "nvlink_config": NvLinkConfig,
    "export": ExportConfig,
    "quotas": QuotaConfig,
}
ROW = re.compile(
    r"^\| `(?P<toml>[^`]+)` \| `(?P<env>NICO_[A-Z0-9_]+)` \| (?P<default>[^|]+?) \| (?P<meaning>.+) \|$"
)


def rows() -> dict[str, dict[str, str]]:
    found = {}
    for line in DOC.read_text().splitlines():
        match = ROW.match(line)
        if match:
            found[match["env"]] = match.groupdict()
    return found


def rendered(value: Any) -> str:
    """A default as the doc writes it."""
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, timedelta):
        ms = round(value.total_seconds() * 1000)
        return f"`{ms // 1000}s`" if ms % 1000 == 0 else f"`{ms}ms`"
    if isinstance(value, list):
        return "`[" + ", ".join(f'"{v}"' for v in value) + "]`"
    return f"`{value}`"


def expected() -> dict[str, tuple[str, Any]]:
    """Environment variable -> (TOML key, default) of every setting."""
    settings: dict[str, tuple[str, Any]] = {}
    for name, field in Settings.model_fields.items():
        model = SECTIONS.get(name)
        if model is None:
            settings[f"NICO_{name.upper()}"] = (name, field.get_default(call_default_factory=True))
            continue
        for key, sub in model.model_fields.items():
            settings[f"NICO_{name.upper()}__{key.upper()}"] = (
                f"[{name}] {key}",
                sub.get_default(call_default_factory=True),
            )
    return settings


def test_every_setting_has_a_row_with_its_toml_key_and_default() -> None:
    documented, wanted = rows(), expected()
    assert set(wanted) - set(documented) == set(), "settings missing from docs/configuration.md"
    assert set(documented) - set(wanted) == set(), (
        "docs/configuration.md documents settings that do not exist"
    )
    for env, (toml, default) in wanted.items():
        row = documented[env]
        assert row["toml"] == toml, env
        if env == "NICO_DATA_DIR":  # per user and platform
            assert "per-user" in row["default"]
        else:
            assert row["default"] == rendered(default), env
        assert len(row["meaning"]) > 20, f"{env}: say what it means"


def test_the_sections_are_all_the_nested_models() -> None:
    nested = {
        name
        for name, field in Settings.model_fields.items()
        if isinstance(field.annotation, type) and issubclass(field.annotation, BaseModel)
    }
    assert nested == set(SECTIONS)

"""Settings from NICO_* and the TOML file; every bad value stops start-up with one clear message."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from typer.testing import CliRunner

from nico.cli import app as cli
from nico.config import ConfigError, load_settings, parse_duration


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    for key in list(os.environ):
        if key.startswith("NICO_"):
            monkeypatch.delenv(key)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("60s", 60),
        ("1m", 60),
        ("33", 33),
        ("1m30s", 90),
        ("500ms", 0.5),
        ("2h", 7200),
        (" 5s ", 5),
        (1.5, 1.5),
    ],
)
def test_durations_in_the_reference_syntax(text: str, seconds: float) -> None:
    assert parse_duration(text) == timedelta(seconds=seconds)


@pytest.mark.parametrize("text", ["", "abc", "5 parsecs", "1x", "-3", "s5", "1m-2s", True])
def test_malformed_durations_are_rejected(text: object) -> None:
    with pytest.raises(ValueError):
        parse_duration(text)


def _write(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "nico.toml"
    path.write_text(body)
    return path


def test_toml_nvlink_config_section_with_reference_keys(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _write(
        tmp_path,
        """
[nvlink_config]
enabled = true
monitor_run_interval = "30s"
nmx_m_operation_timeout = "1m"
nmx_m_endpoint = "https://nmx-m.example:8443"
allow_insecure = true
nmx_c_tls_ca_cert_path = "/etc/nico/ca.pem"
nmx_c_tls_client_cert_path = "/etc/nico/client.pem"
nmx_c_tls_client_key_path = "/etc/nico/client.key"
nmx_c_tls_authority = "nmx-c.example"
""",
    )
    monkeypatch.setenv("NICO_CONFIG", str(path))
    settings = load_settings()
    nv = settings.nvlink_config
    assert nv.enabled is True
    assert nv.monitor_run_interval == timedelta(seconds=30)
    assert nv.nmx_m_operation_timeout == timedelta(minutes=1)
    assert nv.nmx_m_endpoint == "https://nmx-m.example:8443"
    assert nv.allow_insecure is True
    assert nv.nmx_c_tls_authority == "nmx-c.example"
    assert str(nv.nmx_c_tls_client_key_path) == "/etc/nico/client.key"


def test_environment_wins_over_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = _write(tmp_path, '[nvlink_config]\nmonitor_run_interval = "30s"\n[api]\nport = 9000\n')
    monkeypatch.setenv("NICO_CONFIG", str(path))
    monkeypatch.setenv("NICO_NVLINK_CONFIG__MONITOR_RUN_INTERVAL", "5")
    settings = load_settings()
    assert settings.nvlink_config.monitor_run_interval == timedelta(seconds=5)
    assert settings.api.port == 9000


def test_defaults_without_any_configuration() -> None:
    settings = load_settings()
    assert settings.database_url is None
    assert settings.nvlink_config.monitor_run_interval == timedelta(seconds=60)
    assert settings.nvlink_config.nmx_m_operation_timeout == timedelta(seconds=10)
    assert settings.nvlink_config.allow_insecure is False
    assert settings.api.name == "nico"


@pytest.mark.parametrize(
    ("toml", "key", "hint"),
    [
        ('[nvlink_config]\nmonitor_run_interval = "soon"', "nvlink_config.monitor_run_interval", '"60s"'),
        (
            '[nvlink_config]\nnmx_m_operation_timeout = "0s"',
            "nvlink_config.nmx_m_operation_timeout",
            "greater",
        ),
        ('[nvlink_config]\nnmx_m_endpoint = "localhost"', "nvlink_config.nmx_m_endpoint", "with scheme"),
        ('[nvlink_config]\nenabled = "maybe"', "nvlink_config.enabled", "boolean"),
        ('[nvlink_config]\nbackend = "nvswitch"', "nvlink_config.backend", "'nmxc' or 'nmxm'"),
        ('[nvlink_config]\nnmx_c_tls_client_cert_path = "/c.pem"', "nvlink_config", "together"),
        ('[nvlink_config]\nmonitor_interval = "60s"', "nvlink_config.monitor_interval", "unknown setting"),
        ('[api]\nport = "http"', "api.port", "integer"),
        ('database_url = "mysql://x"', "database_url", "PostgreSQL URL"),
    ],
)
def test_bad_values_name_the_key_and_expected_form(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, toml: str, key: str, hint: str
) -> None:
    monkeypatch.setenv("NICO_CONFIG", str(_write(tmp_path, toml)))
    with pytest.raises(ConfigError) as caught:
        load_settings()
    message = str(caught.value)
    assert message.startswith(key), message
    assert hint in message, message
    assert "\n" not in message


def test_bad_environment_value_is_reported_with_its_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NICO_NVLINK_CONFIG__MONITOR_RUN_INTERVAL", "later")
    with pytest.raises(ConfigError, match=r"^nvlink_config\.monitor_run_interval: invalid value 'later'"):
        load_settings()


def test_missing_and_invalid_config_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NICO_CONFIG", str(tmp_path / "absent.toml"))
    with pytest.raises(ConfigError, match="does not exist"):
        load_settings()
    monkeypatch.setenv("NICO_CONFIG", str(_write(tmp_path, "[nvlink_config\n")))
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_settings()


def test_cli_stops_with_one_message_and_status_2(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NICO_CONFIG", str(_write(tmp_path, '[nvlink_config]\nmonitor_run_interval = "x"')))
    result = CliRunner().invoke(cli, ["serve"])
    assert result.exit_code == 2
    assert "nvlink_config.monitor_run_interval" in result.output
    assert "Traceback" not in result.output

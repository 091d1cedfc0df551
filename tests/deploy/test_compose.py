"""docker-compose.yml and the Dockerfile, checked against the code (no Docker engine runs here): every
service has an image or a build, every nico command is a real subcommand whose options parse, every
NICO_ variable is a real setting, ports agree between commands, published ports and Prometheus
targets, dependencies exist and put the migration first, and the seed registers exactly the NMX-C
endpoints the simulator serves."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import typer
import yaml
from pydantic import BaseModel
from typer.core import TyperGroup

from nico.cli import app
from nico.config import Settings

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
SERVICES: dict[str, dict[str, Any]] = COMPOSE["services"]
NICO = {name: s for name, s in SERVICES.items() if s.get("command", [None])[0] == "nico"}
# Variables nico reads outside Settings, with the module that reads them.
NON_SETTINGS = {"NICO_MIGRATIONS_DIR": ROOT / "nico" / "db" / "migrate.py"}
BUILT_FROM = ("pyproject.toml", "setup.py", "README.md", "nico", "migrations")  # what `pip install .` reads


def parse(argv: list[str]) -> tuple[str, dict[str, Any]]:
    """The subcommand path and its parsed parameters, as `nico` would parse ``argv`` (errors raise)."""
    command: Any = typer.main.get_command(app)
    parent = typer.Context(command, info_name="nico")
    path, args = [], argv[1:]
    while isinstance(command, TyperGroup):
        name, found, args = command.resolve_command(parent, args)
        assert found is not None and name is not None, f"{argv}: no such nico command"
        path.append(name)
        command, parent = found, typer.Context(found, info_name=name, parent=parent)
    ctx = command.make_context(path[-1], list(args), parent=parent.parent)
    return " ".join(path), dict(ctx.params)


def setting_exists(variable: str) -> bool:
    model: type[BaseModel] = Settings
    parts = variable.removeprefix("NICO_").lower().split("__")
    for i, part in enumerate(parts):
        field = model.model_fields.get(part)
        if field is None:
            return False
        annotation = field.annotation
        if i < len(parts) - 1:
            if not (isinstance(annotation, type) and issubclass(annotation, BaseModel)):
                return False
            model = annotation
    return True


def test_every_service_has_an_image_or_a_build_and_existing_dependencies() -> None:
    assert set(SERVICES) == {
        "postgres",
        "migrate",
        "api-1",
        "api-2",
        "reconciler-1",
        "reconciler-2",
        "nmxc-sim",
        "nmxm-sim",
        "seed",
        "prometheus",
    }
    for name, service in SERVICES.items():
        assert service.get("image") or service.get("build"), name
        for needed in service.get("depends_on", {}):
            assert needed in SERVICES, f"{name} depends on unknown {needed}"
    assert "healthcheck" in SERVICES["postgres"]
    assert SERVICES["migrate"]["depends_on"] == {"postgres": {"condition": "service_healthy"}}
    for name in ("api-1", "api-2", "reconciler-1", "reconciler-2", "seed"):
        assert SERVICES[name]["depends_on"]["migrate"] == {"condition": "service_completed_successfully"}, (
            name
        )
    for name in ("migrate", "seed"):
        assert SERVICES[name]["restart"] == "no", f"{name} is one-shot"


def test_every_nico_command_and_option_is_real() -> None:
    commands = {name: parse(service["command"])[0] for name, service in NICO.items()}
    assert commands == {
        "migrate": "migrate",
        "api-1": "serve",
        "api-2": "serve",
        "reconciler-1": "reconcile",
        "reconciler-2": "reconcile",
        "nmxc-sim": "sim nmxc",
        "nmxm-sim": "sim nmxm",
        "seed": "demo seed",
    }
    for name in ("api-1", "api-2"):
        assert parse(NICO[name]["command"])[1]["no_reconciler"] is True
    with pytest.raises(Exception, match="No such option"):
        parse(["nico", "serve", "--no-such-option"])  # the check can fail
    with pytest.raises(Exception, match="No such command"):
        parse(["nico", "serve-everything"])
    with pytest.raises(Exception, match="valid integer"):
        parse(["nico", "reconcile", "--metrics-port", "nine"])


def test_environment_variables_are_real_settings() -> None:
    assert not setting_exists("NICO_NO_SUCH_SETTING") and not setting_exists("NICO_API__NOPE")
    variables = {key for service in NICO.values() for key in service.get("environment", {})}
    dockerfile = (ROOT / "Dockerfile").read_text()
    variables |= set(re.findall(r"\b(NICO_[A-Z0-9_]+)=", dockerfile))
    assert "NICO_DATABASE_URL" in variables
    for variable in variables:
        if variable in NON_SETTINGS:
            assert variable in NON_SETTINGS[variable].read_text()
        else:
            assert setting_exists(variable), f"{variable} is not a nico setting"


def test_the_image_installs_the_package_with_its_migrations_and_no_workaround() -> None:
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert dockerfile.startswith("#") and "FROM python:3.11-slim" in dockerfile
    copied = {source for line in re.findall(r"^COPY (.+)$", dockerfile, re.M) for source in line.split()[:-1]}
    assert copied == set(BUILT_FROM), "the image copies what the wheel is built from"
    assert "pip install --no-cache-dir ." in dockerfile
    assert "NICO_MIGRATIONS_DIR" not in dockerfile, "the wheel carries the migrations"
    assert "setup.py" in copied and '"nico._migrations": "migrations"' in (ROOT / "setup.py").read_text()
    assert (ROOT / "migrations" / "env.py").exists()
    assert re.search(r"^USER \d+$", dockerfile, re.M), "a numeric user, for runAsNonRoot"


def test_the_database_url_names_the_postgres_service_and_its_credentials() -> None:
    postgres = SERVICES["postgres"]["environment"]
    for name, service in NICO.items():
        url = service["environment"]["NICO_DATABASE_URL"]
        assert url == (
            f"postgresql://{postgres['POSTGRES_USER']}:{postgres['POSTGRES_PASSWORD']}"
            f"@postgres:5432/{postgres['POSTGRES_DB']}"
        ), name
        assert len(service["environment"]["NICO_AUTH__HS256_SECRET"]) >= 32


def published(service: dict[str, Any]) -> set[int]:
    return {int(str(p).split(":")[-1]) for p in service.get("ports", [])}


def test_ports_agree_between_commands_published_ports_and_prometheus() -> None:
    metrics: set[str] = set()
    api_ports = set()
    for name in ("api-1", "api-2"):
        _, params = parse(NICO[name]["command"])
        assert params["host"] == "0.0.0.0"
        assert published(SERVICES[name]) == {params["port"]}
        api_ports.add(params["port"])
        metrics.add(f"{name}:{params['port']}")
    assert len(api_ports) == 2, "the API replicas listen on distinct ports"
    for name in ("reconciler-1", "reconciler-2"):
        _, params = parse(NICO[name]["command"])
        assert params["metrics_host"] == "0.0.0.0" and params["metrics_port"]
        assert published(SERVICES[name]) == {params["metrics_port"]}
        metrics.add(f"{name}:{params['metrics_port']}")
    prometheus = SERVICES["prometheus"]
    mounted = {v.split(":")[1]: ROOT / v.split(":")[0] for v in prometheus["volumes"]}
    config_path = mounted["/etc/prometheus/prometheus.yml"]
    config = yaml.safe_load(config_path.read_text())
    targets = {
        t for job in config["scrape_configs"] for group in job["static_configs"] for t in group["targets"]
    }
    assert targets == metrics, "Prometheus scrapes every nico process, and nothing else"
    for rules in config["rule_files"]:
        assert rules in mounted and mounted[rules].exists()
    promtool = shutil.which("promtool")
    if promtool:  # the Debian prometheus package ships it (CI installs it)
        for rules in config["rule_files"]:
            checked = subprocess.run(
                [promtool, "check", "rules", str(mounted[rules])], capture_output=True, text=True
            )
            assert checked.returncode == 0, checked.stdout + checked.stderr


def test_the_seed_registers_the_endpoints_the_simulators_serve() -> None:
    _, sim = parse(NICO["nmxc-sim"]["command"])
    assert sim["host"] == "0.0.0.0"
    served = {f"http://nmxc-sim:{sim['port'] + i}" for i in range(sim["racks"])}
    exposed = {int(p) for p in SERVICES["nmxc-sim"]["expose"]}
    assert exposed == {sim["port"] + i for i in range(sim["racks"])}
    _, seed = parse(NICO["seed"]["command"])
    assert set(seed["nmxc_endpoint"]) == served
    assert SERVICES["seed"]["depends_on"]["nmxc-sim"] == {"condition": "service_started"}
    _, nmxm = parse(NICO["nmxm-sim"]["command"])
    assert nmxm["host"] == "0.0.0.0" and {int(p) for p in SERVICES["nmxm-sim"]["expose"]} == {nmxm["port"]}


def test_the_stack_loads_the_alerts_the_metrics_reference_documents() -> None:
    documented = re.search(
        r"## Example alerts\s*```yaml\n(.*?)```", (ROOT / "docs" / "metrics.md").read_text(), re.S
    )
    assert documented
    assert yaml.safe_load((ROOT / "deploy" / "alerts.yml").read_text()) == yaml.safe_load(documented.group(1))

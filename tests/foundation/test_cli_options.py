"""The CLI's common options mean the same on every command:

* every ``show``, ``list`` or ``browse`` command takes ``--format table|json|yaml``;
* ``--org``, ``--url`` and ``--token`` read ``NICO_ORG``, ``NICO_URL`` and ``NICO_TOKEN`` (the
  variables the demo prints), except an org that filters a site-wide listing (:mod:`nico.cli.options`);
* ``nico --version`` prints the version, from the package as from the installed command.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jwt
import pytest
import typer
import typer.main
from typer.core import TyperGroup
from typer.testing import CliRunner

import nico
from nico.cli import app
from nico.cli.output import Format

TWINS = {"--org": "NICO_ORG", "--url": "NICO_URL", "--token": "NICO_TOKEN"}
# A token for another system has a twin of its own: NICO_TOKEN is this nico's.
OTHER_TWINS = {("nico admin import", "token"): "NICO_SOURCE_TOKEN"}
LISTINGS = {"show", "list", "browse"}
FILTERS = {  # an org that narrows an operator's site-wide listing: no twin (an exported org would hide rows)
    ("nico admin logical-partition show", "org"),
    ("nico admin lp show", "org"),
    ("nico admin nvl-partition show", "tenant_org"),
    ("nico admin nvp show", "tenant_org"),
    ("nico admin quota show", "org"),
}


def commands(group: TyperGroup, path: str) -> Iterator[tuple[str, Any]]:
    """Every command and group under ``group`` (aliases too), with its full path: a group's own
    options (``nico admin --cloud-unsafe-op``, ``nico demo --org``) are options too."""
    ctx = typer.Context(group)
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        assert command is not None
        yield f"{path} {name}", command
        if isinstance(command, TyperGroup):
            yield from commands(command, f"{path} {name}")


ALL = list(commands(typer.main.get_group(app), "nico"))


def test_the_walk_sees_the_commands() -> None:
    paths = {path for path, _ in ALL}
    assert {"nico token", "nico export", "nico admin lp create", "nico admin machine list"} <= paths


@pytest.mark.parametrize(("path", "command"), [c for c in ALL if c[0].rsplit(" ", 1)[1] in LISTINGS], ids=str)
def test_every_listing_takes_table_json_and_yaml(path: str, command: Any) -> None:
    option = next((p for p in command.params if "--format" in p.opts), None)
    assert option is not None, f"{path} has no --format"
    assert option.type_descriptor.annotation is Format, path
    assert {f.value for f in Format} == {"table", "json", "yaml"}


def test_every_org_url_and_token_option_has_its_twin() -> None:
    wrong = []
    for path, command in ALL:
        for param in command.params:
            for flag, usual in TWINS.items():
                twin = OTHER_TWINS.get((path, param.name or ""), usual)
                if flag in param.opts and (path, param.name) not in FILTERS and param.envvar != twin:
                    wrong.append(f"{path} {flag}: envvar {param.envvar!r}, not {twin}")
    assert wrong == []
    for path, name in FILTERS:
        command = dict(ALL)[path]
        assert next(p for p in command.params if p.name == name).envvar is None, path


def test_token_takes_the_org_from_nico_org(tmp_path: Path) -> None:
    env = {"NICO_ORG": "env-org", "NICO_DATA_DIR": str(tmp_path)}
    result = CliRunner().invoke(app, ["token"], env=env)
    assert result.exit_code == 0, result.output
    claims = jwt.decode(result.stdout.strip(), options={"verify_signature": False})
    assert "env-org" in json.dumps(claims)
    result = CliRunner().invoke(app, ["token", "--org", "flag-org"], env=env)
    claims = jwt.decode(result.stdout.strip(), options={"verify_signature": False})
    assert "flag-org" in json.dumps(claims) and "env-org" not in json.dumps(claims)
    result = CliRunner().invoke(app, ["token"], env={"NICO_ORG": None, "NICO_DATA_DIR": str(tmp_path)})
    assert result.exit_code == 2 and "--org" in result.output


def test_version() -> None:
    result = CliRunner().invoke(app, ["--version"])
    assert (result.exit_code, result.stdout) == (0, f"nico {nico.__version__}\n")
    done = subprocess.run(
        [sys.executable, "-m", "nico.cli", "--version"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert (done.returncode, done.stdout) == (0, f"nico {nico.__version__}\n")

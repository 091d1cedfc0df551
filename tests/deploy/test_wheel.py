"""nico as a user installs it: the wheel built from this checkout, installed into a fresh virtualenv in
a temporary directory outside the checkout, then ``nico demo`` (which migrates with the migrations
shipped in the wheel, no NICO_MIGRATIONS_DIR) and the README's walkthrough against it, run from that
directory with only the virtualenv's ``bin`` on PATH."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.demo.test_walkthrough import walkthrough_after_exports
from tests.support.demo_process import DemoProcess

pytestmark = pytest.mark.e2e
ROOT = Path(__file__).resolve().parents[2]
INSTALL_TIMEOUT = 600


def run(*argv: str | Path, cwd: Path, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(
        [str(a) for a in argv], cwd=cwd, env=env, capture_output=True, text=True, timeout=INSTALL_TIMEOUT
    )
    assert done.returncode == 0, f"{argv}:\n{done.stdout}\n{done.stderr}"
    return done.stdout


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh virtualenv (outside the checkout) with the wheel built from the checkout installed."""
    work = tmp_path_factory.mktemp("wheel-install")
    assert not work.resolve().is_relative_to(ROOT)
    dist = work / "dist"
    run(sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", dist, ROOT, cwd=work)
    (wheel,) = dist.glob("nico-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "nico/_migrations/env.py" in names and "nico/_migrations/script.py.mako" in names
    assert any(n.startswith("nico/_migrations/versions/0001_") for n in names)
    venv = work / "venv"
    run(sys.executable, "-m", "venv", venv, cwd=work)
    run(venv / "bin" / "python", "-m", "pip", "install", "-q", wheel, cwd=work)
    return venv


def test_the_installed_wheel_runs_the_demo_and_the_walkthrough_from_any_directory(
    installed: Path, tmp_path: Path
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("NICO_")}
    env["PATH"] = f"{installed / 'bin'}{os.pathsep}/usr/bin{os.pathsep}/bin"
    env.pop("PYTHONPATH", None)
    nico = installed / "bin" / "nico"
    # The installed package, not this checkout, answers (the checkout is not on its path).
    where = run(
        installed / "bin" / "python", "-c", "import nico; print(nico.__file__)", cwd=elsewhere, env=env
    )
    assert str(installed) in where

    demo = DemoProcess(tmp_path / "data", "--racks", "1", env=env, command=(str(nico),), cwd=elsewhere)
    demo.env["PATH"] = env["PATH"]
    demo.start()
    try:
        assert "Traceback" not in demo.output() and "pg_ctl" not in demo.output(), demo.output()
        walkthrough_after_exports(demo, env, cwd=elsewhere)
    finally:
        assert demo.stop() == 0, demo.output()

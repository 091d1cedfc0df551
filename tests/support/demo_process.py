"""``nico demo`` as a subprocess on a free loopback port with its own data directory: started, waited
for (its banner, with a deadline), stopped with Ctrl-C (SIGINT) and checked to have stopped cleanly."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from tests.support.net import free_port

STARTUP_DEADLINE = 60.0
STOP_DEADLINE = 30.0
BANNER_END = "Ctrl-C stops the demo"  # the banner's last line


def demo_env(data_dir: Path) -> dict[str, str]:
    """The environment of the demo and of the commands run against it: its data directory, the
    embedded database, and this interpreter's ``nico`` first on PATH."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("NICO_")}
    env["NICO_DATA_DIR"] = str(data_dir)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["COLUMNS"] = "120"
    return env


class DemoProcess:
    def __init__(
        self,
        data_dir: Path,
        *args: str,
        port: int | None = None,
        env: dict[str, str] | None = None,
        command: tuple[str, ...] = (sys.executable, "-m", "nico.cli"),
        cwd: Path | None = None,
    ) -> None:
        self.data_dir = data_dir
        self.command = command
        self.cwd = cwd
        self.port = port or free_port()
        self.args = args
        self.env = {**demo_env(data_dir), **(env or {})}
        self.stdout: list[str] = []
        self.stderr: list[str] = []
        self._ready = threading.Event()
        self._process: subprocess.Popen[str] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def token(self) -> str:
        """The tenant token the banner printed."""
        for line in self.stdout:
            found = re.match(r"\s*token\s+(\S+)", line)
            if found:
                return found.group(1)
        raise AssertionError(f"no token in the banner: {self.stdout}")

    def start(self) -> DemoProcess:
        self._process = subprocess.Popen(
            [*self.command, "demo", "--port", str(self.port), *self.args],
            env=self.env,
            cwd=self.cwd,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        threading.Thread(
            target=self._read, args=(self._process.stdout, self.stdout, True), daemon=True
        ).start()
        threading.Thread(
            target=self._read, args=(self._process.stderr, self.stderr, False), daemon=True
        ).start()
        deadline = time.monotonic() + STARTUP_DEADLINE
        while not self._ready.wait(0.05):
            if self._process.poll() is not None or time.monotonic() > deadline:
                self.kill()
                raise AssertionError(f"nico demo did not start:\n{self.output()}")
        return self

    def _read(self, stream: object, into: list[str], banner: bool) -> None:
        for line in stream:  # type: ignore[attr-defined]
            into.append(line)
            if banner and BANNER_END in line:
                self._ready.set()

    @property
    def pid(self) -> int:
        assert self._process is not None
        return self._process.pid

    def output(self) -> str:
        return "".join(self.stdout) + "\n--- stderr ---\n" + "".join(self.stderr)

    def stop(self) -> int:
        """Ctrl-C, then the exit status (killed and failed after a deadline)."""
        assert self._process is not None
        self._process.send_signal(signal.SIGINT)
        try:
            return self._process.wait(STOP_DEADLINE)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(f"nico demo did not stop on Ctrl-C:\n{self.output()}") from None

    def kill(self) -> None:
        if self._process is not None and self._process.poll() is None:
            self._process.kill()
            self._process.wait()

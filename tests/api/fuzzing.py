"""schemathesis against the committed ``openapi.yaml`` on a running app (uvicorn on loopback), shared by
``tests/api/test_fuzz_api.py`` and ``tests/api/fuzz_campaign.py``."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import uvicorn

from nico.api.app import create_app
from nico.api.http_limits import limited_protocol
from nico.api.openapi import REFUSALS
from nico.config import Settings
from tests.support.net import free_port

ROOT = Path(__file__).resolve().parents[2]
SPEC = ROOT / "openapi.yaml"
HOOKS = Path(__file__).with_name("fuzz_hooks.py")  # integers as JSON integers
ALL_PHASES = "examples,coverage,fuzzing,stateful"


@contextlib.contextmanager
def serving(settings: Settings) -> Iterator[str]:
    """The app on a loopback port in a thread of its own (its own event loop and engine), served as
    ``nico serve`` serves it (the request limits of ``nico.api.http_limits``): its URL."""
    port = free_port()
    config = uvicorn.Config(
        create_app(settings),
        host="127.0.0.1",
        port=port,
        log_level="warning",
        lifespan="on",
        http=limited_protocol(settings),
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name="fuzz-server", daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 30
        while not server.started:  # a condition with a deadline
            assert thread.is_alive() and time.monotonic() < deadline, "the fuzz server did not start"
            time.sleep(0.01)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)


# What positive_data_acceptance expects of a request valid by the document (schemathesis' default).
ACCEPTED = ("2xx", "3xx", "401", "403", "404", "409", "429", "5xx")
# Paths whose other methods reach a sibling route with a path parameter, as the reference's router does:
# PATCH or DELETE /instance/type is PATCH or DELETE /instance/{instanceId} with the id "type", which
# answers 400 `Invalid Instance ID in URL`, not 405.
SHADOWED_PATHS = ("/instance/type", "/instance/batch")


def config_text(org: str, role: str) -> str:
    """schemathesis.toml: the org in every path; per operation, the statuses a valid request may also
    get (``nico.api.openapi.REFUSALS``, each with its reason) and the paths whose undeclared methods
    are routed elsewhere (:data:`SHADOWED_PATHS`)."""
    lines = [f'hooks = "{HOOKS}"', "", "[parameters]", f'"path.org" = "{org}"']
    for operation_id, refusals in sorted(REFUSALS.items()):
        mine = [refusal for refusal in refusals if role in refusal.roles]
        if not mine:
            continue
        statuses = ", ".join(f'"{status}"' for status in sorted({*ACCEPTED, *(r.status for r in mine)}))
        lines += ["", *(f"# {refusal.status}: {refusal.reason}" for refusal in mine)]
        lines += [
            "[[operations]]",
            f'include-operation-id = "{operation_id}"',
            f"checks.positive_data_acceptance.expected-statuses = [{statuses}]",
        ]
    for path in SHADOWED_PATHS:
        lines += [
            "",
            f"# other methods on {path} are routed to the route with a path parameter next to it",
            "[[operations]]",
            f'include-path = "/v2/org/{{org}}/nico{path}"',
            "checks.unsupported_method.enabled = false",
        ]
    return "\n".join(lines) + "\n"


@dataclass
class Outcome:
    cases: int = 0
    failures: dict[str, int] = field(default_factory=dict)  # check name -> failing cases
    checks: dict[str, int] = field(default_factory=dict)  # check name -> cases it ran on
    messages: list[str] = field(default_factory=list)
    exit_code: int = 0


def run(
    url: str,
    token: str,
    org: str,
    *,
    role: str,
    max_examples: int,
    phases: str = ALL_PHASES,
    seed: int = 1,
) -> Outcome:
    """One schemathesis run in ``org`` with a ``role`` token and the configuration of
    :func:`config_text`; the counts from its NDJSON event stream. Every check runs (schemathesis'
    default: all but max_response_time, which needs a limit); ``--checks=all`` is not given, as it
    would override the per-operation settings."""
    cli = shutil.which("schemathesis", path=str(Path(sys.executable).parent)) or "schemathesis"
    with tempfile.TemporaryDirectory(prefix="nico-fuzz-") as tmp:
        events = Path(tmp) / "events.ndjson"
        config = Path(tmp) / "schemathesis.toml"
        config.write_text(config_text(org, role))
        command = [
            cli,
            f"--config-file={config}",
            "run",
            str(SPEC),
            f"--url={url}",
            f"--header=Authorization: Bearer {token}",
            f"--phases={phases}",
            f"--max-examples={max_examples}",
            f"--seed={seed}",
            "--mode=all",
            "--workers=1",
            "--continue-on-failure",
            "--generation-deterministic",
            "--report=ndjson",
            f"--report-ndjson-path={events}",
            "--no-color",
        ]
        done = subprocess.run(  # in the temporary directory: schemathesis keeps a cache in its cwd
            command, capture_output=True, text=True, env={**os.environ, "NO_COLOR": "1"}, check=False, cwd=tmp
        )
        outcome = parse_events(events) if events.exists() else Outcome()
        outcome.exit_code = done.returncode
        if done.returncode not in (0, 1) or not events.exists():
            outcome.messages.append(done.stdout[-4000:] + done.stderr[-4000:])
        return outcome


def parse_events(path: Path) -> Outcome:
    outcome = Outcome()
    for line in path.read_text().splitlines():
        event: dict[str, Any] = json.loads(line)
        for kind, body in event.items():
            if kind != "ScenarioFinished":
                continue
            recorder = body.get("recorder", {})
            outcome.cases += len(recorder.get("cases", {}))
            for checks in recorder.get("checks", {}).values():
                for check in checks:
                    name = check.get("name", "?")
                    outcome.checks[name] = outcome.checks.get(name, 0) + 1
                    if str(check.get("status", "")).lower() == "failure":
                        outcome.failures[name] = outcome.failures.get(name, 0) + 1
                        failure = check.get("failure_info") or {}
                        text = json.dumps(failure)[:600]
                        if sum(m.startswith(f"{name}:") for m in outcome.messages) < 5:  # a few per check
                            outcome.messages.append(f"{name}: {text}")
    return outcome

"""deploy/grafana/nico-nvlink.json is a dashboard Grafana imports (ids, grid, one Prometheus datasource
variable), every panel's PromQL parses (promtool, offline), and deploy/alerts.yml passes ``promtool
check rules``. tests/e2e/test_dashboard_queries.py runs the same queries against a demo."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
DASHBOARD = ROOT / "deploy" / "grafana" / "nico-nvlink.json"
ALERTS = ROOT / "deploy" / "alerts.yml"
# Grafana's own variables, as the dashboard's queries use them, given values Prometheus reads.
GRAFANA_VARIABLES = {"$__rate_interval": "5m"}


def panels(dashboard: dict[str, Any]) -> list[dict[str, Any]]:
    """Every panel, those inside collapsed rows too."""
    out = []
    for panel in dashboard["panels"]:
        out.append(panel)
        out.extend(panel.get("panels", []))
    return out


def queries(dashboard: dict[str, Any]) -> dict[str, str]:
    """``panel title / refId`` -> the PromQL Prometheus would run."""
    out = {}
    for panel in panels(dashboard):
        for target in panel.get("targets", []):
            expr = target["expr"]
            for variable, value in GRAFANA_VARIABLES.items():
                expr = expr.replace(variable, value)
            out[f"{panel['title']} / {target['refId']}"] = expr
    return out


def load() -> dict[str, Any]:
    dashboard: dict[str, Any] = json.loads(DASHBOARD.read_text())
    return dashboard


def promtool() -> str:
    binary = shutil.which("promtool")
    assert binary, "promtool is required (Debian package prometheus; .ci/run installs it)"
    return binary


def test_the_dashboard_is_one_grafana_can_import() -> None:
    dashboard = load()
    assert dashboard["uid"] and dashboard["title"] and isinstance(dashboard["schemaVersion"], int)
    (variable,) = dashboard["templating"]["list"]
    assert variable["type"] == "datasource" and variable["query"] == "prometheus"
    every = panels(dashboard)
    assert len({p["id"] for p in every}) == len(every)
    for panel in every:
        grid = panel["gridPos"]
        assert grid["x"] + grid["w"] <= 24 and grid["h"] > 0, panel["title"]
        if panel["type"] == "row":
            continue
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, panel["title"]
        assert panel["targets"] and panel["description"], panel["title"]
        assert len({t["refId"] for t in panel["targets"]}) == len(panel["targets"]), panel["title"]
    titles = " ".join(p["title"].lower() for p in every)
    for subject in ("convergence", "errors per endpoint", "partitions", "gpus by health", "home", "free"):
        assert subject in titles, subject
    assert "stranded" in titles or "fragment" in titles


def test_every_panel_query_parses(tmp_path: Path) -> None:
    """Each query as a recording rule: ``promtool check rules`` parses PromQL without a server."""
    rules = [{"record": f"panel:query:{n}", "expr": expr} for n, expr in enumerate(queries(load()).values())]
    path = tmp_path / "panels.yml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "panels", "rules": rules}]}))
    checked = subprocess.run([promtool(), "check", "rules", str(path)], capture_output=True, text=True)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert f"SUCCESS: {len(rules)} rules found" in checked.stdout + checked.stderr


def test_a_broken_query_is_caught(tmp_path: Path) -> None:
    path = tmp_path / "panels.yml"
    broken = [{"record": "panel:query:0", "expr": "sum by (le (rate(x[5m]))"}]
    path.write_text(yaml.safe_dump({"groups": [{"name": "panels", "rules": broken}]}))
    assert subprocess.run([promtool(), "check", "rules", str(path)], capture_output=True).returncode != 0


def test_the_alerts_pass_promtool() -> None:
    checked = subprocess.run([promtool(), "check", "rules", str(ALERTS)], capture_output=True, text=True)
    assert checked.returncode == 0, checked.stdout + checked.stderr

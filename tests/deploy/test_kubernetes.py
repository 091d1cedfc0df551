"""deploy/kubernetes/, checked against the Kubernetes schemas (kubernetes-validate, strict) and against
the code, as test_compose.py checks docker-compose.yml: every nico command parses, ports agree between
commands, containers, probes, Services and the ServiceMonitor, every NICO_ variable is a setting, the
ConfigMap's TOML loads as nico's configuration with the files it names mounted from the Secrets, and
the PrometheusRule carries deploy/alerts.yml."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import typer
import yaml

from nico.cli import app as cli
from nico.config import load_settings
from tests.deploy.test_compose import parse, setting_exists

ROOT = Path(__file__).resolve().parents[2]
K8S = ROOT / "deploy" / "kubernetes"
KUBERNETES_VERSION = "1.37.0"
CUSTOM_KINDS = {"ServiceMonitor", "PrometheusRule"}  # Prometheus Operator CRDs: no upstream schema
APPLIED_APART = {"secrets.example.yaml", "nmxm-credentials-job.yaml", "ingress.example.yaml"}


def documents(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


MANIFESTS = sorted(p for p in K8S.glob("*.yaml") if p.name != "kustomization.yaml")
ALL = [(p.name, d) for p in MANIFESTS for d in documents(p)]


def of_kind(kind: str) -> dict[str, dict[str, Any]]:
    return {d["metadata"]["name"]: d for _, d in ALL if d["kind"] == kind}


DEPLOYMENTS = of_kind("Deployment")
JOBS = of_kind("Job")
SECRETS = of_kind("Secret")
WORKLOADS = {**DEPLOYMENTS, **JOBS}


def container(workload: dict[str, Any]) -> dict[str, Any]:
    (only,) = workload["spec"]["template"]["spec"]["containers"]
    return only


def argv(c: dict[str, Any]) -> list[str]:
    return [*c["command"], *c.get("args", [])]


@pytest.mark.parametrize(
    ("name", "doc"), ALL, ids=[f"{n}:{d['kind']}/{d['metadata']['name']}" for n, d in ALL]
)
def test_every_manifest_is_valid_against_the_kubernetes_schemas(name: str, doc: dict[str, Any]) -> None:
    if doc["kind"] in CUSTOM_KINDS:
        assert doc["apiVersion"] == "monitoring.coreos.com/v1"
        return
    kubernetes_validate.validate(doc, KUBERNETES_VERSION, strict=True)
    assert doc["metadata"].get("namespace", "nico") == "nico" and doc["metadata"]["name"], name


def test_the_validator_rejects_a_broken_manifest() -> None:
    broken = yaml.safe_load((K8S / "api-deployment.yaml").read_text())
    broken["spec"]["replicas"] = "two"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, KUBERNETES_VERSION, strict=True)


def test_the_kustomization_lists_every_manifest_but_the_ones_applied_apart() -> None:
    kustomization = yaml.safe_load((K8S / "kustomization.yaml").read_text())
    assert kustomization["namespace"] == "nico"
    assert set(kustomization["resources"]) == {p.name for p in MANIFESTS} - APPLIED_APART
    assert {d["kind"] for _, d in ALL} >= {
        "Namespace", "ConfigMap", "Secret", "Job", "Deployment", "Service", "PodDisruptionBudget",
        "NetworkPolicy", "ServiceMonitor", "PrometheusRule",
    }  # fmt: skip


def test_every_nico_command_parses_and_the_ports_agree() -> None:
    commands = {name: parse(argv(container(w))) for name, w in WORKLOADS.items()}
    assert {name: c[0] for name, c in commands.items()} == {
        "nico-migrate": "migrate",
        "nico-nmxm-credentials": "admin credential add-nmx-m",
        "nico-api": "serve",
        "nico-reconciler": "reconcile",
        "nico-label-sync": "label-sync",
    }
    api, reconciler = container(DEPLOYMENTS["nico-api"]), container(DEPLOYMENTS["nico-reconciler"])
    serve = commands["nico-api"][1]
    assert serve["no_reconciler"] is True and serve["host"] == "0.0.0.0"
    assert {p["name"]: p["containerPort"] for p in api["ports"]} == {"http": serve["port"]}
    reconcile = commands["nico-reconciler"][1]
    assert reconcile["metrics_host"] == "0.0.0.0"
    assert {p["name"]: p["containerPort"] for p in reconciler["ports"]} == {
        "metrics": reconcile["metrics_port"]
    }
    # The probes hit the routes the API serves, on its port.
    assert api["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "http"}
    assert api["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "http"}
    routes = "".join(p.read_text() for p in (ROOT / "nico" / "api").rglob("*.py"))
    for path in ("/readyz", "/healthz", "/metrics"):
        assert f'"{path}"' in routes, path
    assert reconciler["livenessProbe"]["httpGet"]["port"] == "metrics"


def test_services_service_monitor_and_budgets_select_real_pods_and_ports() -> None:
    ports_of = {name: {p["name"] for p in container(d).get("ports", [])} for name, d in DEPLOYMENTS.items()}
    labels_of = {name: d["spec"]["template"]["metadata"]["labels"] for name, d in DEPLOYMENTS.items()}

    def selected(selector: dict[str, str]) -> set[str]:
        return {n for n, labels in labels_of.items() if selector.items() <= labels.items()}

    service_ports = set()
    for name, service in of_kind("Service").items():
        (pod,) = selected(service["spec"]["selector"])
        for port in service["spec"]["ports"]:
            assert port["targetPort"] in ports_of[pod], (name, port)
            service_ports.add(port["name"])
    monitor = next(iter(of_kind("ServiceMonitor").values()))
    assert {e["port"] for e in monitor["spec"]["endpoints"]} == service_ports == {"http", "metrics"}
    for budget in of_kind("PodDisruptionBudget").values():
        (pod,) = selected(budget["spec"]["selector"]["matchLabels"])
        assert budget["spec"]["minAvailable"] < DEPLOYMENTS[pod]["spec"]["replicas"] == 2


def test_pods_run_non_root_read_only_with_requests_and_limits() -> None:
    dockerfile = (ROOT / "Dockerfile").read_text()
    user = int(re.search(r"^USER (\d+)$", dockerfile, re.M).group(1))  # type: ignore[union-attr]
    for name, workload in WORKLOADS.items():
        pod = workload["spec"]["template"]["spec"]
        assert pod["securityContext"]["runAsNonRoot"] is True and pod["securityContext"]["runAsUser"] == user
        c = container(workload)
        assert c["securityContext"]["readOnlyRootFilesystem"] is True, name
        assert c["securityContext"]["allowPrivilegeEscalation"] is False, name
        assert set(c["resources"]) == {"requests", "limits"}, name
        writable = {m["mountPath"] for m in c["volumeMounts"] if not m.get("readOnly")}
        env = {e["name"]: e for e in c["env"]}
        assert env["NICO_DATA_DIR"]["value"] in writable and "/tmp" in writable, name


def option_envvars(args: list[str]) -> set[str]:
    """The environment variables the command's own options read (``NICO_URL``, ``NICO_TOKEN``)."""
    command: Any = typer.main.get_command(cli)
    for name in parse(args)[0].split():
        command = command.commands[name]
    return {p.envvar for p in command.params if isinstance(p.envvar, str)}


def test_environment_names_are_settings_or_used_by_the_command_and_secrets_exist() -> None:
    for name, workload in WORKLOADS.items():
        c = container(workload)
        for variable in c["env"]:
            if variable["name"].startswith("NICO_"):
                known = setting_exists(variable["name"]) or variable["name"] in option_envvars(argv(c))
                assert known, f"{name}: {variable['name']} is neither a setting nor an option's variable"
            else:
                assert f"$({variable['name']})" in c.get("args", []), f"{name}: {variable['name']} unused"
            ref = variable.get("valueFrom", {}).get("secretKeyRef")
            if ref:
                assert ref["key"] in SECRETS[ref["name"]]["stringData"], (name, ref)
        for volume in workload["spec"]["template"]["spec"]["volumes"]:
            if "secret" in volume:
                assert volume["secret"]["secretName"] in SECRETS, (name, volume)
        assert container(workload)["env"][0] == {"name": "NICO_CONFIG", "value": "/etc/nico/nico.toml"}


def test_the_configmap_is_nico_configuration_and_names_files_the_secrets_mount(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = of_kind("ConfigMap")["nico-config"]["data"]["nico.toml"]
    assert "[nvlink_config]" in text
    config = tmp_path / "nico.toml"
    config.write_text(text)
    monkeypatch.setenv("NICO_CONFIG", str(config))
    for variable in [v for v in os.environ if v.startswith("NICO_") and v != "NICO_CONFIG"]:
        monkeypatch.delenv(variable)
    settings = load_settings()  # raises ConfigError on an unknown key or a bad value
    files = {
        "nico-api": [settings.auth.public_key_path],
        "nico-reconciler": [
            settings.nvlink_config.nmx_c_tls_ca_cert_path,
            settings.nvlink_config.nmx_c_tls_client_cert_path,
            settings.nvlink_config.nmx_c_tls_client_key_path,
        ],
    }
    for name, paths in files.items():
        pod = DEPLOYMENTS[name]["spec"]["template"]["spec"]
        mounts = {m["name"]: m["mountPath"] for m in container(DEPLOYMENTS[name])["volumeMounts"]}
        secret_of = {v["name"]: v["secret"]["secretName"] for v in pod["volumes"] if "secret" in v}
        for path in paths:
            assert path is not None
            (volume,) = [v for v, where in mounts.items() if path.parent == Path(where)]
            assert path.name in SECRETS[secret_of[volume]]["stringData"], path
    for workload in WORKLOADS.values():
        mounts = {m["mountPath"]: m for m in container(workload)["volumeMounts"]}
        assert mounts["/etc/nico/nico.toml"]["subPath"] == "nico.toml"


def test_the_prometheus_rule_carries_deploy_alerts() -> None:
    rule = next(iter(of_kind("PrometheusRule").values()))
    assert rule["spec"] == yaml.safe_load((ROOT / "deploy" / "alerts.yml").read_text())


def test_the_label_sync_may_patch_nodes_and_its_cursor_and_nothing_else() -> None:
    deployment = DEPLOYMENTS["nico-label-sync"]
    pod = deployment["spec"]["template"]["spec"]
    account = pod["serviceAccountName"]
    assert pod["automountServiceAccountToken"] is True and account in of_kind("ServiceAccount")
    assert deployment["spec"]["replicas"] == 1
    (cluster_role,) = of_kind("ClusterRole").values()
    assert cluster_role["rules"] == [
        {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "patch"]}
    ]
    command, params = parse(argv(container(deployment)))
    assert command == "label-sync" and params["kube_url"] is None  # in-cluster
    (role,) = of_kind("Role").values()
    assert role["rules"] == [
        {
            "apiGroups": [""],
            "resources": ["configmaps"],
            "resourceNames": [params["state_configmap"]],
            "verbs": ["get", "patch"],
        }
    ]
    assert params["state_configmap"] in of_kind("ConfigMap")  # the Role cannot create it
    bindings = [*of_kind("ClusterRoleBinding").values(), *of_kind("RoleBinding").values()]
    assert {(b["roleRef"]["kind"], b["roleRef"]["name"]) for b in bindings} == {
        ("ClusterRole", cluster_role["metadata"]["name"]),
        ("Role", role["metadata"]["name"]),
    }
    for binding in bindings:
        assert binding["subjects"] == [{"kind": "ServiceAccount", "name": account, "namespace": "nico"}]


def test_the_ingress_serves_the_api_service_over_tls_for_every_host() -> None:
    (ingress,) = of_kind("Ingress").values()
    service = of_kind("Service")["nico-api"]
    hosts = set()
    for rule in ingress["spec"]["rules"]:
        hosts.add(rule["host"])
        for path in rule["http"]["paths"]:
            backend = path["backend"]["service"]
            assert backend["name"] == "nico-api" and path["path"] == "/"
            assert backend["port"]["name"] in {p["name"] for p in service["spec"]["ports"]}
    (tls,) = ingress["spec"]["tls"]
    assert set(tls["hosts"]) == hosts and tls["secretName"]
    assert tls["secretName"] in (ROOT / "docs" / "deploy-kubernetes.md").read_text()


def test_the_nmxc_tls_secret_is_optional_and_only_the_reconciler_mounts_it() -> None:
    """A site on NMX-M alone has no NMX-C TLS material: the reconciler starts without the Secret."""
    for name, workload in WORKLOADS.items():
        for volume in workload["spec"]["template"]["spec"]["volumes"]:
            if volume.get("secret", {}).get("secretName") == "nico-nmxc-tls":
                assert name == "nico-reconciler" and volume["secret"]["optional"] is True, name

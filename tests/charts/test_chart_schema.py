"""`helm lint --strict` on every scenario, and values.schema.json refusing bad values with a clear message."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import jsonschema  # type: ignore[import-untyped]
import pytest
import yaml

from tests.charts.helm_chart import (
    CHART,
    CI_VALUES,
    PINNED_VALUES,
    of_kind,
    render,
    render_error,
    run_helm,
)
from verifier.base._errors import InputError
from verifier.registry.config import load_registry_config

pytestmark = pytest.mark.helm

SCHEMA = json.loads((CHART / "values.schema.json").read_text())


def lint_clean(result: subprocess.CompletedProcess[str]) -> None:
    """Lint passed, and no template refused the values: helm lint only logs a `fail` at level INFO."""
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 chart(s) failed" in result.stdout
    assert "funcMap fail" not in result.stderr, result.stderr


def test_lint_strict_with_the_defaults_and_the_required_digest() -> None:
    lint_clean(run_helm("lint", "--strict", str(CHART), "--values", str(PINNED_VALUES)))
    # The bare defaults lack the digest: the chart refuses them (and lint says so, if only at INFO).
    assert "image.digest is required" in run_helm("lint", "--strict", str(CHART)).stderr


@pytest.mark.parametrize("values", CI_VALUES, ids=lambda path: path.name)
def test_lint_strict_with_each_ci_scenario(values: Path) -> None:
    """Each ci file is complete on its own (chart-testing installs them one by one): digest included."""
    lint_clean(run_helm("lint", "--strict", str(CHART), "--values", str(values)))


def test_lint_reports_schema_violations() -> None:
    result = run_helm("lint", "--strict", str(CHART), "--set", "webhook.timeoutSeconds=45")
    assert result.returncode != 0
    assert "at '/webhook/timeoutSeconds': maximum: got 45, want 30" in result.stdout + result.stderr


@pytest.mark.parametrize(
    ("set_json", "message"),
    [
        ({"webhook.timeoutSeconds": 45}, "at '/webhook/timeoutSeconds': maximum: got 45, want 30"),
        ({"webhook.timeoutSeconds": 0}, "at '/webhook/timeoutSeconds': minimum: got 0, want 1"),
        ({"webhook.timeoutSeconds": "5"}, "at '/webhook/timeoutSeconds': got string, want integer"),
        (
            {"webhook.failurePolicy": "Sometimes"},
            "at '/webhook/failurePolicy': value must be one of 'Fail', 'Ignore'",
        ),
        ({"webhok": {"name": "x"}}, "at '': additional properties 'webhok' not allowed"),
        ({"webhook.sideEffects": "Some"}, "at '/webhook': additional properties 'sideEffects' not allowed"),
        ({"replicaCount": "two"}, "at '/replicaCount': got string, want integer"),
        ({"replicaCount": 0}, "at '/replicaCount': minimum: got 0, want 1"),
        ({"image.digest": "sha256:abc"}, "at '/image/digest': 'sha256:abc' does not match pattern"),
        (
            {"certificates.mode": "selfSigned"},
            "at '/certificates/mode': value must be one of 'helm', 'certManager', 'external'",
        ),
        (
            {"decisionLog.type": "mysql"},
            "at '/decisionLog/type': value must be one of 'sqlite', 'postgresql'",
        ),
        ({"webhook.name": "trtguard"}, "at '/webhook/name': 'trtguard' does not match pattern"),
        (
            {"webhook.namespaceSelector.matchExpressions": [{"key": "a", "operator": "Maybe"}]},
            "at '/webhook/namespaceSelector/matchExpressions/0/operator': value must be one of",
        ),
        (
            {"webhook.matchConditions": [{"name": f"c{i}", "expression": "true"} for i in range(65)]},
            "at '/webhook/matchConditions': maxItems: got 65, want 64",
        ),
        ({"server.port": 443}, "at '/server/port': minimum: got 443, want 1,024"),
        ({"resources.limits.gpu": 1}, "at '/resources/limits': additional properties 'gpu' not allowed"),
        ({"securityContext.runAsUser": 0}, "at '/securityContext/runAsUser': minimum: got 0, want 1"),
        (
            {"registry.config": {"credentials_file": "/x"}},
            "at '/registry/config': additional properties 'credentials_file' not allowed",
        ),
        ({"image.allowTag": "yes"}, "at '/image/allowTag': got string, want boolean"),
        (
            {"decisionLog.sqlite.sizeLimit": "lots"},
            "at '/decisionLog/sqlite/sizeLimit': 'lots' does not match",
        ),
        (
            {"metrics.prometheusRule.decisionLog.capacity": "1e3"},
            "at '/metrics/prometheusRule/decisionLog/capacity': '1e3' does not match",
        ),
        (
            {"metrics.prometheusRule.decisionLog.threshold": 1.5},
            "at '/metrics/prometheusRule/decisionLog/threshold': maximum: got 1.5, want 1",
        ),
        (
            {"metrics.prometheusRule.selector": "{job=x}"},
            "at '/metrics/prometheusRule/selector': '{job=x}' does not match",
        ),
        (
            {"verifierJob.networkPolicy.dns.to": [{"ipBlock": {}}]},
            "at '/verifierJob/networkPolicy/dns/to/0/ipBlock': missing property 'cidr'",
        ),
    ],
)
def test_bad_values_are_refused_with_the_field_and_the_reason(set_json: dict[str, Any], message: str) -> None:
    assert message in render_error(set_json=set_json)


@pytest.mark.parametrize(
    ("set_json", "message"),
    [
        (
            {"replicaCount": 2, "decisionLog.sqlite.persistence.enabled": True},
            "a SQLite decision log on a PersistentVolumeClaim serves one replica",
        ),
        (
            {"decisionLog.type": "postgresql"},
            "decisionLog.type=postgresql needs decisionLog.postgresql.existingSecret",
        ),
        (
            {"metrics.serviceMonitor.enabled": True},
            "metrics.serviceMonitor.enabled needs metrics.enabled=true",
        ),
        ({"metrics.enabled": True, "metrics.port": 8443}, "metrics.port must differ from server.port"),
        (
            {"server.timeoutMargin": 2.5},
            "server.timeoutMargin (2.5 s) must be less than half of webhook.timeoutSeconds (5 s)",
        ),
        (
            {"webhook.timeoutSeconds": 1},
            "server.timeoutMargin (0.5 s) must be less than half of webhook.timeoutSeconds (1 s)",
        ),
        (
            {"metrics.prometheusRule.enabled": True},
            "metrics.prometheusRule.enabled needs metrics.enabled=true",
        ),
        (
            {
                "metrics.enabled": True,
                "metrics.prometheusRule.enabled": True,
                "decisionLog.type": "postgresql",
                "decisionLog.postgresql.existingSecret": "db",
            },
            "metrics.prometheusRule.enabled with decisionLog.type=postgresql needs "
            "metrics.prometheusRule.decisionLog.capacity",
        ),
        (
            {"registry.config": {"registries": {"registry.corp:5000": {"plain_http": True}}}},
            "registry.config.registries[registry.corp:5000].plain_http: plain HTTP is allowed only for "
            "loopback registries",
        ),
    ],
)
def test_values_that_contradict_each_other_are_refused(set_json: dict[str, Any], message: str) -> None:
    assert message in render_error(set_json=set_json)


def test_every_object_in_the_schema_is_closed() -> None:
    """additionalProperties is false wherever the chart defines the keys (Kubernetes types pass through)."""
    open_objects: list[str] = []

    def walk(node: Any, where: str) -> None:
        if isinstance(node, dict):
            if (
                node.get("type") == "object"
                and "properties" in node
                and node.get("additionalProperties") is not False
            ):
                open_objects.append(where)
            for key, child in node.items():
                walk(child, f"{where}/{key}")
        elif isinstance(node, list):
            for index, child in enumerate(node):
                walk(child, f"{where}/{index}")

    walk(SCHEMA, "")
    assert open_objects == []


@pytest.mark.parametrize("values", [CHART / "values.yaml", *CI_VALUES], ids=lambda path: path.name)
def test_values_files_satisfy_the_schema_outside_helm(values: Path) -> None:
    """The schema is plain JSON Schema: CI tools other than helm (check-jsonschema) read it the same way."""
    jsonschema.validate(yaml.safe_load(values.read_text()), SCHEMA)


def test_plain_http_for_a_loopback_registry_renders_and_the_server_accepts_it(tmp_path: Path) -> None:
    """The chart's loopback rule and the server's (verifier.registry.config) agree on what they accept."""
    hosts = ["localhost:5000", "127.0.0.1:5000", "[::1]:5000", "LocalHost"]
    registries = {host: {"plain_http": True} for host in hosts}
    registries["registry.corp:5000"] = {"plain_http": False}
    docs = render(set_json={"registry.config": {"registries": registries}})
    [config_map] = [d for d in of_kind(docs, "ConfigMap") if d["metadata"]["name"].endswith("-registry")]
    path = tmp_path / "registry-config.yaml"
    path.write_text(config_map["data"]["registry-config.yaml"])
    config = load_registry_config(path)
    assert all(config.settings_for(host).plain_http for host in hosts)
    assert not config.settings_for("registry.corp:5000").plain_http
    # And the chart refuses what the server refuses.
    for host in ("registry.corp:5000", "127.0.0.1.nip.io", "10.0.0.1:5000"):
        assert "plain HTTP is allowed only for loopback registries" in render_error(
            set_json={"registry.config": {"registries": {host: {"plain_http": True}}}}
        )
        path.write_text(yaml.safe_dump({"registries": {host: {"plain_http": True}}}))
        with pytest.raises(InputError, match="plain_http is allowed only for loopback registries"):
            load_registry_config(path)

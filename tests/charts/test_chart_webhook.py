"""The ValidatingWebhookConfiguration: what it matches, what it never matches, how it reaches the server."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from policies.workload_model._operator_kinds import OPERATOR_KINDS
from tests.charts.helm_chart import (
    CHART,
    CI_VALUES,
    FULLNAME,
    NAMESPACE,
    RELEASE,
    one,
    render,
    render_error,
    run_helm,
    selector_matches,
)

#: webhook.operators names.
OPERATORS = ("kserve", "kuberay", "leaderworkerset", "argo-rollouts", "kubeflow", "volcano")

pytestmark = pytest.mark.helm

SELECTOR_VALUES: dict[str, dict[str, Any]] = {
    "defaults": {},
    "opt-in label": {"webhook.namespaceSelector.matchLabels": {"trtguard.dev/enforce": "true"}},
    "opt-out label": {
        "webhook.namespaceSelector.matchExpressions": [
            {"key": "trtguard.dev/ignore", "operator": "DoesNotExist"}
        ]
    },
    "user tries to re-admit the release namespace": {
        "webhook.namespaceSelector.matchExpressions": [
            {"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["kube-system", "security"]}
        ]
    },
    "extra exclusions": {"webhook.namespaceSelector.excludeNamespaces": ["monitoring", "security"]},
}


def webhook(docs: list[dict[str, Any]]) -> dict[str, Any]:
    configuration = one(docs, "ValidatingWebhookConfiguration")
    assert len(configuration["webhooks"]) == 1
    hook: dict[str, Any] = configuration["webhooks"][0]
    return hook


def namespace_labels(name: str, **extra: str) -> dict[str, str]:
    """The labels of a namespace: the control plane always sets kubernetes.io/metadata.name."""
    return {"kubernetes.io/metadata.name": name, **extra}


@pytest.mark.parametrize("namespace", ["trtguard", "security"])
@pytest.mark.parametrize("case", sorted(SELECTOR_VALUES))
def test_never_matches_its_own_namespace_or_kube_system(case: str, namespace: str) -> None:
    selector = webhook(render(set_json=SELECTOR_VALUES[case], namespace=namespace))["namespaceSelector"]
    # Whatever labels these namespaces carry (opt-in included), the webhook never judges them.
    every_label = {"trtguard.dev/enforce": "true"}
    assert not selector_matches(selector, namespace_labels(namespace, **every_label))
    assert not selector_matches(selector, namespace_labels("kube-system", **every_label))


@pytest.mark.parametrize(
    "values", [(), *((path,) for path in CI_VALUES)], ids=lambda v: v[0].name if v else "defaults"
)
def test_every_scenario_excludes_the_release_namespace(values: tuple[Path, ...]) -> None:
    selector = webhook(render(*values))["namespaceSelector"]
    exclusion = selector["matchExpressions"][0]
    assert exclusion["key"] == "kubernetes.io/metadata.name"
    assert exclusion["operator"] == "NotIn"
    assert {"kube-system", NAMESPACE} <= set(exclusion["values"])


def test_judges_other_namespaces_by_default() -> None:
    selector = webhook(render())["namespaceSelector"]
    assert selector_matches(selector, namespace_labels("prod"))
    assert selector_matches(selector, namespace_labels("default"))


def test_opt_in_and_opt_out_by_label() -> None:
    opt_in = webhook(render(set_json=SELECTOR_VALUES["opt-in label"]))["namespaceSelector"]
    assert not selector_matches(opt_in, namespace_labels("prod"))
    assert selector_matches(opt_in, namespace_labels("prod", **{"trtguard.dev/enforce": "true"}))
    opt_out = webhook(render(set_json=SELECTOR_VALUES["opt-out label"]))["namespaceSelector"]
    assert selector_matches(opt_out, namespace_labels("prod"))
    assert not selector_matches(opt_out, namespace_labels("prod", **{"trtguard.dev/ignore": ""}))
    extra = webhook(render(set_json=SELECTOR_VALUES["extra exclusions"]))["namespaceSelector"]
    assert not selector_matches(extra, namespace_labels("monitoring"))
    assert selector_matches(extra, namespace_labels("prod"))


def test_rules_cover_every_pod_bearing_kind_and_ephemeral_containers() -> None:
    rules = webhook(render())["rules"]
    covered = set()
    for rule in rules:
        assert rule["operations"] == ["CREATE", "UPDATE"]
        assert rule["scope"] == "Namespaced"
        for group in rule["apiGroups"]:
            for version in rule["apiVersions"]:
                covered |= {(group, version, resource) for resource in rule["resources"]}
    assert covered == {
        ("", "v1", "pods"),
        ("", "v1", "pods/ephemeralcontainers"),
        ("", "v1", "replicationcontrollers"),
        ("apps", "v1", "deployments"),
        ("apps", "v1", "replicasets"),
        ("apps", "v1", "statefulsets"),
        ("apps", "v1", "daemonsets"),
        ("batch", "v1", "jobs"),
        ("batch", "v1", "cronjobs"),
    }


def _covered(rules: list[dict[str, Any]]) -> set[tuple[str, str, str, str]]:
    """(group, version, resource, scope) for every rule."""
    covered = set()
    for rule in rules:
        assert rule["operations"] == ["CREATE", "UPDATE"]
        for group in rule["apiGroups"]:
            for version in rule["apiVersions"]:
                covered |= {(group, version, resource, rule["scope"]) for resource in rule["resources"]}
    return covered


def test_the_enabled_operators_kinds_are_judged_at_the_versions_trtguard_reads() -> None:
    builtin = _covered(webhook(render())["rules"])
    every = list(OPERATORS)
    rules = webhook(render(set_json={"webhook.operators": every}))["rules"]
    # Exactly the shipped definitions, at the versions each was checked against (and no built-in rule lost).
    shipped = {
        (d.group, version, d.resource, "Namespaced" if d.namespaced else "Cluster")
        for d in OPERATOR_KINDS
        for version in d.versions
    }
    assert _covered(rules) == builtin | shipped
    kuberay = _covered(webhook(render(set_json={"webhook.operators": ["kuberay"]}))["rules"]) - builtin
    assert {resource for _, _, resource, _ in kuberay} == {
        "rayclusters",
        "rayservices",
        "rayjobs",
        "raycronjobs",
    }


def test_extra_rules_for_workload_kinds() -> None:
    extra = {"apiGroups": ["example.com"], "apiVersions": ["v1"], "resources": ["inferencejobs"]}
    rules = webhook(render(set_json={"webhook.extraRules": [extra]}))["rules"]
    assert ("example.com", "v1", "inferencejobs", "Namespaced") in _covered(rules)
    refused = render_error(set_json={"webhook.operators": ["knative"]})
    assert "at '/webhook/operators/0': value must be one of 'kserve', 'kuberay'" in refused
    refused = render_error(set_json={"webhook.extraRules": [{**extra, "resources": []}]})
    assert "at '/webhook/extraRules/0/resources': minItems" in refused


def test_protocol_settings() -> None:
    docs = render()
    hook = webhook(docs)
    assert hook["name"] == "workloads.trtguard.dev"
    assert hook["admissionReviewVersions"] == ["v1"]
    assert hook["sideEffects"] == "None"
    assert hook["failurePolicy"] == "Fail"
    assert hook["matchPolicy"] == "Equivalent"
    assert hook["timeoutSeconds"] == 5
    assert "objectSelector" not in hook
    service = one(docs, "Service")
    assert hook["clientConfig"]["service"] == {
        "namespace": NAMESPACE,
        "name": service["metadata"]["name"],
        "path": "/validate",
        "port": service["spec"]["ports"][0]["port"],
    }
    assert one(docs, "ValidatingWebhookConfiguration")["metadata"]["name"] == FULLNAME


def test_tunables_from_values() -> None:
    hook = webhook(
        render(CHART / "ci" / "helm-certs-values.yaml", set_json={"webhook.failurePolicy": "Ignore"})
    )
    assert hook["failurePolicy"] == "Ignore"
    assert hook["timeoutSeconds"] == 8
    assert hook["matchConditions"] == [
        {"name": "not-a-node", "expression": "!request.userInfo.username.startsWith('system:node:')"}
    ]
    configuration = one(render(CHART / "ci" / "helm-certs-values.yaml"), "ValidatingWebhookConfiguration")
    assert configuration["metadata"]["annotations"] == {"admissions.enforcer/disabled": "true"}


def test_service_port_follows_values() -> None:
    docs = render(set_json={"service.port": 8443})
    assert webhook(docs)["clientConfig"]["service"]["port"] == 8443
    assert one(docs, "Service")["spec"]["ports"][0]["port"] == 8443


def test_notes_tell_the_admin_how_to_check_the_webhook() -> None:
    result = run_helm(
        "install", RELEASE, str(CHART), "--namespace", NAMESPACE, "--dry-run=client",
        "--values", str(CHART / "ci" / "helm-certs-values.yaml"),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    notes = result.stdout.split("NOTES:", 1)[1]
    assert f"kubectl -n {NAMESPACE} rollout status deployment/{FULLNAME}" in notes
    # Readiness covers the decision log too, and comes back by itself: an admin must not wait for a restart.
    flat = " ".join(notes.split())
    assert "ready means: policies and trust material loaded, and the decision log takes records" in flat
    assert "becomes ready again by itself" in flat
    assert f"/api/v1/namespaces/{NAMESPACE}/services/https:{FULLNAME}:443/proxy/readyz" in notes
    assert "--dry-run=server" in notes
    assert 'admission webhook "workloads.trtguard.dev" denied the request' in notes
    # The smoke-test namespace gets the opt-in label, or the webhook would not judge it.
    assert "kubectl label --local -f - trtguard.dev/enforce=true" in notes
    assert "Namespaces never judged: kube-system, trtguard, monitoring." in notes

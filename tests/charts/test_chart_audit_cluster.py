"""The cluster audit's CronJob (issue 29): ``trtguard audit-cluster``, with a read-only ClusterRole."""

from __future__ import annotations

from typing import Any

import kubernetes_validate
import pytest

from tests.charts.helm_chart import KUBE_VERSIONS, NAMESPACE, of_kind, one, render
from tests.charts.test_chart_webhook import OPERATORS, webhook
from trtguard.cli import parse_args

pytestmark = pytest.mark.helm
ENABLED = {"auditCluster.enabled": True, "webhook.operators": list(OPERATORS)}
AUDIT = "cluster-audit"


def _audit_docs(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [d for d in docs if d["metadata"].get("labels", {}).get("app.kubernetes.io/component") == AUDIT]


def _pod(docs: list[dict[str, Any]]) -> dict[str, Any]:
    spec: dict[str, Any] = one(docs, "CronJob")["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    return spec


def test_off_by_default() -> None:
    assert _audit_docs(render()) == []


def test_the_role_reads_what_the_webhook_judges_and_writes_nothing() -> None:
    docs = render(set_json=ENABLED)
    [role] = of_kind(docs, "ClusterRole")
    judged = {
        (group, resource.partition("/")[0])
        for rule in webhook(docs)["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
    }
    read = {(g, r) for rule in role["rules"] for g in rule["apiGroups"] for r in rule["resources"]}
    assert judged <= read, "every kind the webhook judges can be listed"
    assert read - judged == {("wgpolicyk8s.io", "policyreports"), ("wgpolicyk8s.io", "clusterpolicyreports")}
    assert all(rule["verbs"] == ["get", "list"] for rule in role["rules"]), "read-only"
    [binding] = of_kind(docs, "ClusterRoleBinding")
    [account] = of_kind(_audit_docs(docs), "ServiceAccount")
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": account["metadata"]["name"], "namespace": NAMESPACE}
    ]
    pod = _pod(docs)
    assert pod["serviceAccountName"] == account["metadata"]["name"]
    assert pod["automountServiceAccountToken"] is True
    # the webhook's own Pods still get no token
    assert one(docs, "Deployment")["spec"]["template"]["spec"]["automountServiceAccountToken"] is False


def test_apply_adds_a_role_that_writes_policy_reports_only() -> None:
    docs = render(set_json={**ENABLED, "auditCluster.apply": True})
    writer = next(r for r in of_kind(docs, "ClusterRole") if r["metadata"]["name"].endswith("-reports"))
    assert writer["rules"] == [
        {
            "apiGroups": ["wgpolicyk8s.io"],
            "resources": ["policyreports", "clusterpolicyreports"],
            "verbs": ["create", "update"],
        }
    ]
    [container] = _pod(docs)["containers"]
    assert "--apply" in container["args"]


@pytest.mark.parametrize("apply", [False, True])
def test_the_command_line_is_one_trtguard_reads(apply: bool) -> None:
    docs = render(
        set_json={**ENABLED, "auditCluster.apply": apply, "auditCluster.extraArgs": ["--namespace", "prod"]}
    )
    [container] = _pod(docs)["containers"]
    args = parse_args(container["args"])
    assert args.command == "audit-cluster"
    assert args.apply is apply and args.namespace == "prod"
    assert [str(p) for p in args.policies] == ["/etc/trtguard/policies"]
    # the audit stops itself, saying so, a minute before the Job's deadline would kill it
    job = one(docs, "CronJob")["spec"]["jobTemplate"]["spec"]
    assert args.timeout == job["activeDeadlineSeconds"] - 60 == 1740
    assert one(docs, "CronJob")["spec"]["concurrencyPolicy"] == "Forbid"


@pytest.mark.parametrize("version", KUBE_VERSIONS)
def test_every_object_is_valid(version: str) -> None:
    for doc in _audit_docs(render(set_json={**ENABLED, "auditCluster.apply": True})):
        kubernetes_validate.validate(doc, version, strict=True)

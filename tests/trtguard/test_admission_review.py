"""trtguard/admission_review.py: the AdmissionReview of a manifest is the one kube-apiserver sends.

Compared with AdmissionReviews real API servers sent (the public captures in ../shared/fixtures/admission
and tests/data): every field the API server wrote is the same, but the uid, the requester and what the
capture's client chose (field manager).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from policies.requesters import Requester
from tests.conftest import DATA
from trtguard.admission_review import ADMIN, admission_review, guess_resource
from verifier.base import InputError


def _capture(path: Path) -> dict[str, Any]:
    document = json.loads(path.read_text())
    request: dict[str, Any] = document.get("request", document)
    return request


@pytest.mark.parametrize(
    "capture",
    [
        "k8s-image-swapper-pod_kubectl_run_multi_registry.json",
        "kubewarden-deployment_update_bare_request.json",
        "connaisseur-07_statefulset.json",
        "connaisseur-08_job.json",
        "kubewarden-cronjob_batch_v1_bare_request.json",
    ],
)
def test_the_review_is_the_api_servers(shared_fixtures: Path, capture: str) -> None:
    real = _capture(shared_fixtures / "admission" / capture)
    obj = real["object"]
    user = real["userInfo"]
    ours = admission_review(
        obj,
        operation=real["operation"],
        old=real.get("oldObject") if real["operation"] == "UPDATE" else None,
        requester=Requester(user["username"], tuple(user["groups"])),
    )
    assert ours["apiVersion"] == "admission.k8s.io/v1" and ours["kind"] == "AdmissionReview"
    request = ours["request"]
    for field in ("kind", "resource", "requestKind", "requestResource", "operation", "dryRun", "name"):
        if field in real:
            assert request[field] == real[field], field
    assert request["namespace"] == obj["metadata"]["namespace"] == request["object"]["metadata"]["namespace"]
    assert request["userInfo"] == {"username": user["username"], "groups": user["groups"]}
    # The options but what the capture's client chose: its field manager, and field validation (older
    # kubectl sent none; ours is kubectl 1.27's default, Strict, as in the newer captures).
    options = request["options"]
    for key, value in real["options"].items():
        assert key == "fieldManager" or options[key] == value, key


def test_a_request_whose_kind_and_request_kind_agree(  # tests/data/705 is a v1beta2 request: kind differs
) -> None:
    real = _capture(DATA / "702-pod-image-volume-engine-review.json")
    request = admission_review(real["object"])["request"]
    for field in ("kind", "resource", "requestKind", "requestResource", "namespace", "name"):
        assert request[field] == real[field], field


@pytest.mark.parametrize(
    ("kind", "resource"),
    [
        ("Pod", "pods"),
        ("Deployment", "deployments"),
        ("DaemonSet", "daemonsets"),
        ("InferenceService", "inferenceservices"),
        ("LeaderWorkerSet", "leaderworkersets"),
        ("Ingress", "ingresses"),
        ("NetworkPolicy", "networkpolicies"),
    ],
)
def test_resources_are_guessed_as_the_api_machinery_does(kind: str, resource: str) -> None:
    assert guess_resource(kind) == resource


def test_namespaces_as_kubectl_apply_meets_them() -> None:
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}}
    assert admission_review(pod)["request"]["namespace"] == "default"
    request = admission_review(pod, namespace="prod")["request"]
    assert request["namespace"] == request["object"]["metadata"]["namespace"] == "prod"
    with pytest.raises(InputError, match="names namespace dev, not prod"):
        admission_review({**pod, "metadata": {"name": "p", "namespace": "dev"}}, namespace="prod")
    namespace = admission_review({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "n"}})
    assert "namespace" not in namespace["request"]


def test_requesters_and_updates() -> None:
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}}
    assert admission_review(pod)["request"]["userInfo"] == {
        "username": "kubernetes-admin",
        "groups": list(ADMIN.groups),
    }
    bot = Requester.impersonated("system:serviceaccount:argocd:argocd-application-controller")
    assert admission_review(pod, requester=bot)["request"]["userInfo"]["groups"] == [
        "system:serviceaccounts",
        "system:serviceaccounts:argocd",
        "system:authenticated",
    ]
    update = admission_review(pod, operation="UPDATE", old=pod)["request"]
    assert update["oldObject"] == pod and update["options"]["kind"] == "UpdateOptions"
    with pytest.raises(InputError, match="an UPDATE needs the object as it was"):
        admission_review(pod, operation="UPDATE")

"""``trtguard audit-cluster`` against the kube-apiserver stand-in (tests/support/kube_apiserver_standin.py).

No kube-apiserver can run here: the official ``kubernetes`` client talks to a stand-in over real TLS with a
real kubeconfig. 1,000 Deployments are listed in 3 pages and judged; a policy change then names the running
workloads it would deny; ``--apply`` writes PolicyReports that are valid by the working group's CRD.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes.config import incluster_config

from tests.policies.registry_world import run_cli
from tests.support.kube_apiserver_standin import TOKEN, KubeApiStandIn, workloads
from tests.support.policy_reports import validate_report
from trtguard.cluster import ApiError, ClusterSettings, connect

SERVER = "registry.example/inference/server@sha256:" + "a1" * 32
LEGACY = "registry.example/legacy/server@sha256:" + "b2" * 32
POLICY = """\
apiVersion: trtguard.dev/v1alpha1
kind: InferencePolicy
metadata: {name: runtime}
spec:
  images:
    - name: inference
      match: ["registry.example/inference/*"]
      requireDigest: true
"""
LEGACY_RULE = """\
    - name: legacy
      match: ["registry.example/legacy/*"]
      requireDigest: true
"""
NAMESPACES = ("team-a", "team-b", "team-c")
DEPLOYMENTS = "/apis/apps/v1/deployments"


@pytest.fixture
def standin(tmp_path: Path) -> Iterator[KubeApiStandIn]:
    with KubeApiStandIn(tmp_path / "standin") as running:
        for n, obj in enumerate(workloads(1000, NAMESPACES, SERVER)):
            if n % 10 == 0:  # every tenth runs the legacy image
                obj["spec"]["template"]["spec"]["containers"][0]["image"] = LEGACY
            running.add(obj)
        yield running


def _policies(tmp_path: Path, *, legacy_allowed: bool) -> Path:
    folder = tmp_path / ("before" if legacy_allowed else "after")
    folder.mkdir(exist_ok=True)
    (folder / "policy.yaml").write_text(POLICY + (LEGACY_RULE if legacy_allowed else ""))
    return folder


def _audit(standin: KubeApiStandIn, tmp_path: Path, policies: Path, *extra: str) -> tuple[int, str, str]:
    kubeconfig = standin.kubeconfig(tmp_path / "kubeconfig")
    empty = tmp_path / "evidence"
    empty.mkdir(exist_ok=True)
    return run_cli(
        "audit-cluster", "--kubeconfig", kubeconfig, "--policies", policies, "--attestations", empty,
        "--page-size", "400", *extra,
    )  # fmt: skip


def test_a_thousand_workloads_in_three_pages_and_what_a_policy_change_would_deny(
    standin: KubeApiStandIn, tmp_path: Path
) -> None:
    status, out, err = _audit(standin, tmp_path, _policies(tmp_path, legacy_allowed=True), "--format", "json")
    assert status == 0, err
    result = json.loads(out)
    assert len(result["workloads"]) == 1000
    assert all(w["allowed"] for w in result["workloads"])
    lists = [(m, q) for m, p, q in standin.requests if p == DEPLOYMENTS]
    assert len(lists) == 3, "1,000 Deployments in pages of 400"
    assert [q.get("limit") for _, q in lists] == [["400"]] * 3
    assert "continue" not in lists[0][1] and all("continue" in q for _, q in lists[1:])
    assert {w["uid"] for w in result["workloads"]} == {
        o["metadata"]["uid"] for o in standin.objects("deployments")
    }
    assert "Deployment.apps" in result["kinds"] and "RayCluster.ray.io" in result["not_served"]

    # The policy drops the legacy rule: which running workloads would it deny?
    standin.requests.clear()
    status, out, err = _audit(standin, tmp_path, _policies(tmp_path, legacy_allowed=False))
    assert status == 1, err
    denied = sorted(line.split()[2] for line in out.splitlines() if line.startswith("DENY"))
    assert denied == sorted(f"{NAMESPACES[n % 3]}/app-{n}" for n in range(0, 1000, 10))
    assert "runtime/images: registry.example/legacy/server@sha256:" in out
    assert "1000 workloads" in out and "900 allowed, 100 would be denied" in out


def test_apply_writes_policy_reports_and_updates_them(standin: KubeApiStandIn, tmp_path: Path) -> None:
    status, out, err = _audit(standin, tmp_path, _policies(tmp_path, legacy_allowed=True), "--apply")
    assert status == 0, err
    assert sorted(line for line in out.splitlines() if line.startswith("created")) == [
        f"created PolicyReport {ns}/trtguard" for ns in sorted(NAMESPACES)
    ]
    reports = {r["metadata"]["namespace"]: r for r in standin.objects("policyreports")}
    for report in reports.values():
        validate_report(report)
    assert reports["team-a"]["summary"]["pass"] == 334
    first_version = reports["team-a"]["metadata"]["resourceVersion"]

    status, out, err = _audit(standin, tmp_path, _policies(tmp_path, legacy_allowed=False), "--apply")
    assert status == 1, err
    assert "updated PolicyReport team-b/trtguard" in out
    reports = {r["metadata"]["namespace"]: r for r in standin.objects("policyreports")}
    assert len(standin.objects("policyreports")) == 3, "updated, not created again"
    assert reports["team-a"]["metadata"]["resourceVersion"] != first_version
    failed = [r for r in reports["team-a"]["results"] if r["result"] == "fail"]
    assert {r["resources"][0]["name"] for r in failed} == {f"app-{n}" for n in range(0, 1000, 30)}
    assert all(r["rule"] == "images" and r["policy"] == "runtime" for r in failed)
    for report in reports.values():
        validate_report(report)


def test_429_and_5xx_are_retried_and_what_fails_for_good_is_a_gap(
    standin: KubeApiStandIn, tmp_path: Path
) -> None:
    standin.faults[DEPLOYMENTS] = [(429, "0"), (503, None), (500, None)]
    status, out, err = _audit(standin, tmp_path, _policies(tmp_path, legacy_allowed=True), "--retries", "3")
    assert status == 0, err
    assert "1000 workloads" in out
    assert len([p for _, p, _ in standin.requests if p == DEPLOYMENTS]) == 3 + 3
    standin.faults["/apis/batch/v1/jobs"] = [(503, None)] * 10
    status, out, err = _audit(standin, tmp_path, _policies(tmp_path, legacy_allowed=True), "--retries", "2")
    assert status == 2
    assert "trtguard: incomplete: Job.batch:" in err and "HTTP 503: service unavailable" in err


def test_an_expired_continue_token_restarts_the_list(standin: KubeApiStandIn, tmp_path: Path) -> None:
    api = connect(ClusterSettings(kubeconfig=standin.kubeconfig(tmp_path / "kubeconfig"), page_size=300))
    pages = api.pages(DEPLOYMENTS)
    first = next(pages)
    assert len(first["items"]) == 300 and first["metadata"]["remainingItemCount"] == 700
    standin.add(next(workloads(1, ("team-z",), SERVER)))  # the collection changes while it is paged
    rest = list(pages)
    statuses = [(p, q.get("continue") is not None) for _, p, q in standin.requests if p == DEPLOYMENTS]
    assert statuses[1] == (DEPLOYMENTS, True) and statuses[2] == (DEPLOYMENTS, False), (
        "410, then from the start"
    )
    assert sum(len(p["items"]) for p in rest) == 1001


def test_an_unauthenticated_or_refused_request_says_so(standin: KubeApiStandIn, tmp_path: Path) -> None:
    kubeconfig = standin.kubeconfig(tmp_path / "kubeconfig")
    config = yaml.safe_load(kubeconfig.read_text())
    config["users"][0]["user"]["token"] = "not-" + TOKEN
    kubeconfig.write_text(yaml.safe_dump(config))
    api = connect(ClusterSettings(kubeconfig=kubeconfig, retries=0))
    with pytest.raises(ApiError, match="HTTP 401: Unauthorized") as raised:
        api.get("/api")
    assert raised.value.status == 401


def test_in_cluster_configuration(
    standin: KubeApiStandIn, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    token, ca = tmp_path / "token", tmp_path / "ca.crt"
    token.write_text(TOKEN)
    ca.write_bytes((standin.folder / "ca.crt").read_bytes())
    monkeypatch.setattr(incluster_config, "SERVICE_TOKEN_FILENAME", str(token))
    monkeypatch.setattr(incluster_config, "SERVICE_CERT_FILENAME", str(ca))
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "127.0.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", str(standin.port))
    api = connect(ClusterSettings())
    answer: dict[str, Any] = api.get("/api")
    assert answer["kind"] == "APIVersions"

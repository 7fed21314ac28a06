"""``trtguard audit-cluster`` against the kube-apiserver stand-in (tests/support/kube_apiserver_standin.py).

No kube-apiserver can run here: the official ``kubernetes`` client talks to a stand-in over real TLS with a
real kubeconfig. 1,000 Deployments are listed in 3 pages and judged; a policy change then names the running
workloads it would deny; ``--apply`` writes PolicyReports that are valid by the working group's CRD.

The stand-in also misbehaves as a broken or hostile server would: a continue token that expires mid-list
(each object still counted once), one handed back again or pages without end, an answer trickling in a byte
at a time (body or headers), an enormous body; each ends in a clear error within the bounds given. What it
does not prove: that a real kube-apiserver pages, expires tokens and answers exactly so (its answers here are
built in the recorded shapes), nor anything about proxies between the client and it.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes.config import incluster_config

from policies.schema import trusted_keys_yaml
from tests.policies.registry_world import run_cli
from tests.support.kube_apiserver_standin import TOKEN, KubeApiStandIn, workloads
from tests.support.policy_reports import validate_report
from trtguard.cluster import ApiError, ClusterSettings, connect
from verifier.crypto._keys import generate_private_key

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


@pytest.mark.parametrize("on_error", ["Deny", "Warn"])
def test_what_could_not_be_checked_is_counted_apart_and_leaves_the_audit_incomplete(
    tmp_path: Path, on_error: str
) -> None:
    """The registry is down: neither "would be denied" (onError Deny) nor "allowed" (Warn), but "could not
    be checked", exit status 2 and stderr naming them; table, JSON and PolicyReport agree (attack 29, F3).
    A workload a rule refuses without asking the registry is still one that would be denied."""
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        down = f"127.0.0.1:{probe.getsockname()[1]}"
    policies = tmp_path / "policies"
    policies.mkdir()
    public = generate_private_key().public_key()
    (policies / "keys.yaml").write_text(trusted_keys_yaml("platform", {"image-signer": public}))
    (policies / "policy.yaml").write_text(
        POLICY.replace("spec:\n", f"spec:\n  onError: {on_error}\n", 1)
        .replace("registry.example/inference/*", f"{down}/inference/*")
        .replace("requireDigest: true", "signatures: {keys: [platform/image-signer]}")
    )
    config = tmp_path / "registries.yaml"
    config.write_text(f'registries:\n  "{down}":\n    plain_http: true\n')
    with KubeApiStandIn(tmp_path / "standin") as standin:
        for obj in workloads(4, ("team-a",), f"{down}/inference/server:v1"):
            standin.add(obj)
        refused = next(workloads(1, ("team-b",), "registry.example/elsewhere/server:v1"))
        refused["metadata"]["name"] = "refused"
        standin.add(refused)
        kubeconfig = standin.kubeconfig(tmp_path / "kubeconfig")

        def audit(*extra: str) -> tuple[int, str, str]:
            return run_cli(
                "audit-cluster", "--kubeconfig", kubeconfig, "--policies", policies,
                "--registry-config", config, *extra,
            )  # fmt: skip

        status, out, err = audit()
        assert status == 2, err
        assert "0 allowed, 1 would be denied, 4 could not be checked, 0 skipped" in out
        heads = sorted(line for line in out.splitlines() if line.startswith(("ALLOW", "DENY", "UNCHECKED")))
        assert heads == ["DENY   Deployment team-b/refused"] + [
            f"UNCHECKED Deployment team-a/app-{n}" for n in range(4)
        ]
        assert "trtguard: incomplete: 4 workload(s) could not be checked" in err
        for n in range(4):
            assert f"trtguard: incomplete: could not check Deployment team-a/app-{n}: runtime/images" in err
        assert "team-b/refused" not in err

        status, out, _ = audit("--format", "json")
        assert status == 2
        result = json.loads(out)
        assert result["incomplete"] is True
        assert result["summary"] == {"allowed": 0, "denied": 1, "unchecked": 4, "skipped": 0, "unreadable": 0}
        assert {w["name"]: w["outcome"] for w in result["workloads"]} == {
            **{f"app-{n}": "unchecked" for n in range(4)},
            "refused": "denied",
        }

        status, out, _ = audit("--format", "policy-report")
        assert status == 2
        reports = {r["metadata"]["namespace"]: r for r in yaml.safe_load_all(out)}
        assert reports["team-a"]["summary"]["error"] == 4 and reports["team-a"]["summary"]["fail"] == 0
        assert reports["team-b"]["summary"]["fail"] == 1 and reports["team-b"]["summary"]["error"] == 0


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


def test_an_expired_continue_token_restarts_the_list_and_counts_nothing_twice(
    standin: KubeApiStandIn, tmp_path: Path
) -> None:
    # The collection changes after the first page (of 300) was read: the next page's token has expired.
    standin.changes[DEPLOYMENTS] = next(workloads(1, ("team-z",), SERVER))
    api = connect(ClusterSettings(kubeconfig=standin.kubeconfig(tmp_path / "kubeconfig"), page_size=300))
    listed = api.list(DEPLOYMENTS)
    statuses = [q.get("continue") is not None for _, p, q in standin.requests if p == DEPLOYMENTS]
    assert statuses[:3] == [False, True, False], "the first page, the 410, then from the start"
    assert listed.pages == 1 + 4 and len(listed.items) == 1001, "what was read before the 410 is dropped"
    assert len({item["metadata"]["uid"] for item in listed.items}) == 1001

    # the same through the whole audit: every workload once
    standin.requests.clear()
    standin.changes[DEPLOYMENTS] = next(workloads(1, ("team-y",), SERVER))
    status, out, err = _audit(standin, tmp_path, _policies(tmp_path, legacy_allowed=True), "--format", "json")
    assert status == 0, err
    uids = [w["uid"] for w in json.loads(out)["workloads"]]
    assert len(uids) == len(set(uids)) == 1002
    assert len([p for _, p, q in standin.requests if p == DEPLOYMENTS and "continue" not in q]) == 2


def test_a_list_that_never_ends_is_a_gap_not_a_loop(standin: KubeApiStandIn, tmp_path: Path) -> None:
    policies = _policies(tmp_path, legacy_allowed=True)
    standin.misbehaving[DEPLOYMENTS] = "repeat-continue"
    status, _, err = _audit(standin, tmp_path, policies)
    assert status == 2
    assert (
        "trtguard: incomplete: Deployment.apps: GET /apis/apps/v1/deployments: page 2 handed back a " in err
    )
    assert len([p for _, p, _ in standin.requests if p == DEPLOYMENTS]) == 2, "given up at the repeat"

    standin.requests.clear()
    standin.misbehaving[DEPLOYMENTS] = "endless-continue"
    status, _, err = _audit(standin, tmp_path, policies, "--max-pages", "5")
    assert status == 2 and "more than 5 pages of 400 (--max-pages, --page-size)" in err
    assert len([p for _, p, _ in standin.requests if p == DEPLOYMENTS]) == 5


@pytest.mark.parametrize("how", ["huge", "huge-unsized"])
def test_an_enormous_answer_is_not_read_past_its_bound(
    standin: KubeApiStandIn, tmp_path: Path, how: str
) -> None:
    standin.misbehaving[DEPLOYMENTS] = how
    status, _, err = _audit(
        standin, tmp_path, _policies(tmp_path, legacy_allowed=True), "--max-response-mib", "1"
    )
    assert status == 2
    assert "GET /apis/apps/v1/deployments: the answer is larger than 1048576 bytes" in err
    assert standin.saw_hang_up(DEPLOYMENTS) and standin.sent.get(DEPLOYMENTS, 0) < 64 * 1024 * 1024


@pytest.mark.parametrize("how", ["drip", "drip-headers"])
def test_a_trickling_answer_meets_the_request_timeout_and_the_audit_deadline(
    standin: KubeApiStandIn, tmp_path: Path, how: str
) -> None:
    """A byte every 20 ms (of the body, or of a header) never trips a socket's read timeout; the request's
    own deadline cuts it off, and the whole audit's deadline ends every retry."""
    policies = _policies(tmp_path, legacy_allowed=True)
    standin.misbehaving[DEPLOYMENTS] = how
    status, _, err = _audit(standin, tmp_path, policies, "--request-timeout", "1", "--retries", "1")
    assert status == 2
    assert (
        "Deployment.apps: GET /apis/apps/v1/deployments: no whole answer within 1 s (--request-timeout)"
        in err
    )
    assert len([p for _, p, _ in standin.requests if p == DEPLOYMENTS]) == 2, "asked again once, then a gap"
    assert standin.saw_hang_up(DEPLOYMENTS), "the client hung up before the answer was whole"

    standin.hung_up.clear()
    standin.requests.clear()
    status, _, err = _audit(
        standin, tmp_path, policies, "--request-timeout", "600", "--timeout", "3", "--retries", "5"
    )
    assert status == 2
    assert (
        "trtguard: error: the audit ran out of its 3 s (--timeout) during GET /apis/apps/v1/deployments"
        in err
    )
    assert len([p for _, p, _ in standin.requests if p == DEPLOYMENTS]) == 1, "no retry past the deadline"
    assert standin.saw_hang_up(DEPLOYMENTS)
    assert not any(p == "/apis/batch/v1/jobs" for _, p, _ in standin.requests), "the audit stopped there"


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

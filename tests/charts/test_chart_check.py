"""The project eats its own cooking: the chart's workloads go through `trtguard check` and its policies."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.charts.helm_chart import CHART, NAMESPACE, REPO, containers, of_kind, policy_folder, render

pytestmark = pytest.mark.helm

TRTGUARD = Path(sys.executable).with_name("trtguard")
#: A Pod the library must refuse in a production namespace: it proves that the policies were loaded and
#: applied in the same run, so that the chart's "allowed" verdicts are not vacuous.
SENTINEL: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "unpinned-nginx", "namespace": "prod"},
    "spec": {"containers": [{"name": "web", "image": "docker.io/library/nginx:latest"}]},
}


def run_check(policies: Path, resources: list[dict[str, Any]]) -> tuple[int, list[dict[str, Any]], str]:
    result = subprocess.run(
        [str(TRTGUARD), "check", "--policies", str(policies), "--format", "json", "-"],
        input=yaml.safe_dump_all(resources),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=REPO,
    )
    assert result.returncode in (0, 1), (
        f"trtguard check failed to run ({result.returncode}):\n{result.stderr}"
    )
    report = json.loads(result.stdout)
    assert isinstance(report, list)
    return result.returncode, report, result.stderr


def test_the_charts_own_workloads_pass_the_policies_it_deploys(tmp_path: Path) -> None:
    """The policy set is the one the chart gives the server: the bundled library with the signers it refers to
    (ci/helm-certs-values.yaml supplies them, and a team policy), laid out as in the Pod."""
    docs = render(CHART / "ci" / "jobs-values.yaml", CHART / "ci" / "helm-certs-values.yaml")
    workloads = of_kind(docs, "Deployment") + of_kind(docs, "Job")
    assert len(workloads) == 3  # the webhook, the GPU verifier and the engine build
    assert all("@sha256:" in c["image"] for w in workloads for c in containers(w))

    status, report, stderr = run_check(policy_folder(docs, tmp_path), [*workloads, SENTINEL])

    entries = {(e.get("kind"), e.get("namespace"), e.get("name")): e for e in report if "kind" in e}
    assert not [e for e in report if "error" in e], stderr
    sentinel = entries[("Pod", "prod", "unpinned-nginx")]
    assert sentinel["allowed"] is False and sentinel["violations"], (
        "the library did not judge the sentinel Pod"
    )
    assert status == 1
    for workload in workloads:
        metadata = workload["metadata"]
        entry = entries[(workload["kind"], NAMESPACE, metadata["name"])]
        assert entry["allowed"] is True, entry
        assert entry["violations"] == [] and entry["warnings"] == [], entry
        assert "skipped" not in entry, f"check did not judge {workload['kind']} {metadata['name']}: {entry}"

"""checkov, as a security team runs it, on every set of values the chart tests render.

Each scenario of ``helm_chart.SCENARIOS`` is rendered and scanned with checkov's Kubernetes checks (the
rendered YAML, which is what reaches a cluster). Nothing may fail. A check the chart does not pass on purpose
is skipped on the object it is about with a ``checkov.io/skipN`` annotation that gives the reason; every
such skip is listed in :data:`EXPECTED_SKIPS`, so that a new one needs a reviewed change here. checkov lives
in a virtual environment of its own (``make setup``: ``.tools/checkov`` from ``requirements/checkov.lock``),
because it pins versions the project's own tools cannot use.
"""

from __future__ import annotations

import json
import subprocess
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.charts.helm_chart import REPO, SCENARIOS, Doc, one, scenario
from tests.support.availability import unavailable

pytestmark = pytest.mark.helm

CHECKOV = REPO / ".tools" / "checkov" / "bin" / "checkov"
_CHECKOV_TIMEOUT_S = 300
#: The one control file: a Deployment of the chart stripped of its pin, its skips and its limits. checkov
#: must report it, or a clean result elsewhere proves nothing.
CONTROL = "control-unpinned"

#: scenario -> the checks skipped in it, with the object each is on. Each is an operator's explicit choice,
#: and the annotation's reason names the value that made it.
EXPECTED_SKIPS: dict[str, Counter[tuple[str, str]]] = {
    "existing-configmap": Counter({("CKV_K8S_40", "Deployment"): 1}),
    "without-networkpolicy": Counter({("CKV2_K8S_6", "Pod"): 1}),
    "jobs-without-networkpolicy": Counter({("CKV2_K8S_6", "Pod"): 2}),
    "allow-tag": Counter({("CKV_K8S_43", "Deployment"): 1, ("CKV_K8S_15", "Deployment"): 1}),
    # The one Pod that calls the Kubernetes API (audit-cluster), with its own read-only role.
    "cluster-audit": Counter({("CKV_K8S_38", "CronJob"): 1}),
}


def checkov() -> Path:
    """The checkov of ``make setup``; missing, the tests skip with what to run (and fail in CI)."""
    if not CHECKOV.is_file():
        message = f"checkov not found at {CHECKOV}: run `make setup` (it installs requirements/checkov.lock)"
        unavailable(message)
    return CHECKOV


def _control(docs: list[Doc]) -> Doc:
    deployment = one(docs, "Deployment")
    deployment["metadata"].pop("annotations", None)
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    container["image"] = container["image"].split("@")[0] + ":latest"
    container.pop("resources")
    return deployment


@pytest.fixture(scope="module")
def scan(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, list[dict[str, Any]]]]:
    """checkov's results per scenario (and the control): {"failed"|"skipped"|"passed": [check, ...]}."""
    tool = checkov()
    folder = tmp_path_factory.mktemp("rendered")
    for name in SCENARIOS:
        (folder / f"{name}.yaml").write_text(yaml.safe_dump_all(scenario(name)))
    (folder / f"{CONTROL}.yaml").write_text(yaml.safe_dump(_control(scenario("defaults"))))
    home = tmp_path_factory.mktemp("home")
    # --skip-download: no call to the vendor's API (there is no network here); the checks in the wheel only.
    command = [str(tool), "--directory", ".", "--framework", "kubernetes", "--output", "json", "--compact"]
    result = subprocess.run(
        [*command, "--skip-download", "--soft-fail"],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=_CHECKOV_TIMEOUT_S,
        env={"HOME": str(home), "PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"},
        check=False,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    report = json.loads(result.stdout)
    assert report["check_type"] == "kubernetes"
    assert report["summary"]["parsing_errors"] == 0, report["summary"]
    by_file: dict[str, dict[str, list[dict[str, Any]]]] = {}
    for outcome in ("failed", "skipped", "passed"):
        for check in report["results"][f"{outcome}_checks"]:
            name = Path(check["file_path"]).stem
            by_file.setdefault(name, {"failed": [], "skipped": [], "passed": []})[outcome].append(check)
    return by_file


def _line(check: dict[str, Any]) -> str:
    return f"{check['check_id']} {check['resource']}: {check['check_name']}"


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_no_checkov_finding_is_left_unfixed(name: str, scan: dict[str, Any]) -> None:
    results = scan[name]
    assert not results["failed"], "checkov findings:\n" + "\n".join(map(_line, results["failed"]))
    # The scan really judged the workloads (a file checkov could not read would pass vacuously).
    judged = {check["resource"].split(".")[0] for check in results["passed"]}
    assert "Deployment" in judged
    if any(doc["kind"] == "Job" for doc in scenario(name)):
        assert "Job" in judged


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_every_skip_is_expected_and_says_why(name: str, scan: dict[str, Any]) -> None:
    skipped = scan[name]["skipped"]
    found = Counter((check["check_id"], check["resource"].split(".")[0]) for check in skipped)
    assert found == EXPECTED_SKIPS.get(name, Counter()), "\n".join(map(_line, skipped))
    for check in skipped:
        reason = check["check_result"]["suppress_comment"]
        # The reason names the value the operator set ("<value> is …: why").
        assert reason and " is " in reason.split(":")[0] and len(reason.split()) >= 8, (_line(check), reason)


def test_the_scanner_reports_what_the_chart_prevents(scan: dict[str, Any]) -> None:
    """The control Deployment (no digest, no limits, no skips): the findings the chart fixes come back."""
    failed = {check["check_id"] for check in scan[CONTROL]["failed"]}
    assert {"CKV_K8S_43", "CKV_K8S_15", "CKV_K8S_11", "CKV_K8S_13"} <= failed, failed

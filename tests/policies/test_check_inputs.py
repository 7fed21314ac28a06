"""``trtguard check`` on awkward inputs: malformed documents among good ones in every format, namespaces as
kubectl applies them, unrendered Helm templates, kinds it does not know, and resources no policy selects."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import yaml

from tests.policies.conftest import RUNTIME, Material, pod
from tests.policies.test_check import POLICY, run, write
from trtguard.cli import main

BAD = pod("bad", images=("docker.io/library/nginx:1",))


@pytest.fixture
def args(material: Material) -> list[str]:
    material.sign_image(RUNTIME)
    return [
        "--policies",
        str(material.policy(POLICY)),
        "--policies",
        str(material.keys_file("image-signer")),
        "--attestations",
        str(material.attestations),
    ]


def mixed_file(root: Path) -> Path:
    """A denied Pod, a malformed document, an allowed Pod, a document that is no object, a duplicate key."""
    text = "\n---\n".join(
        [
            yaml.safe_dump(BAD),
            "apiVersion: v1\nkind: Pod\nmetadata: {name: [unclosed\n",
            yaml.safe_dump(pod("good")),
            "just a string",
            "apiVersion: v1\nkind: Pod\nkind: Pod\n",
            yaml.safe_dump(pod("last")),
        ]
    )
    path = root / "mixed.yaml"
    path.write_text(text)
    return path


@pytest.mark.parametrize("fmt", ["table", "json", "junit", "sarif"])
def test_a_bad_document_costs_only_itself_in_every_format(
    fmt: str, args: list[str], material: Material, capsys: pytest.CaptureFixture[str]
) -> None:
    path = mixed_file(material.root)
    status, out, err = run(["check", *args, "--format", fmt, str(path)], capsys)
    assert status == 2 and "Traceback" not in out + err
    lines = path.read_text().splitlines()
    if fmt == "table":
        assert (
            "DENY   Pod prod/bad" in out and "ALLOW  Pod prod/good" in out and "ALLOW  Pod prod/last" in out
        )
        assert f"ERROR  {path}:16:1: malformed YAML" in out
        assert f"{path}:28: a Kubernetes object was expected, found a string" in out
        assert f"{path}:32: the key 'kind' appears twice" in out
        assert (
            "3 resources: 2 allowed, 1 denied, 0 of unknown kinds not checked, 0 skipped, 3 input errors"
            in out
        )
    elif fmt == "json":
        results = json.loads(out)
        assert [r.get("name") for r in results if "kind" in r] == ["bad", "good", "last"]
        assert len([r for r in results if "error" in r]) == 3
    elif fmt == "junit":
        suite = ET.fromstring(out).find("testsuite")
        assert suite is not None
        assert (suite.get("tests"), suite.get("failures"), suite.get("errors")) == ("6", "1", "3")
    else:
        sarif = json.loads(out)["runs"][0]
        [result] = sarif["results"]
        line = result["locations"][0]["physicalLocation"]["region"]["startLine"]
        assert "docker.io/library/nginx:1" in lines[line - 1]
        notifications = sarif["invocations"][0]["toolExecutionNotifications"]
        assert [n["locations"][0]["physicalLocation"]["region"]["startLine"] for n in notifications] == [
            16,
            28,
            32,
        ]
        assert sarif["invocations"][0]["executionSuccessful"] is False


def test_namespaces_are_met_as_kubectl_meets_them(
    args: list[str], material: Material, capsys: pytest.CaptureFixture[str]
) -> None:
    # helm template writes the release namespace into every object; without --namespace it is "default".
    rendered = write(
        material.root / "rendered.yaml", pod("web", namespace="default", images=("docker.io/x:1",))
    )
    status, out, _ = run(["check", *args, "--namespace", "prod", str(rendered)], capsys)
    assert status == 2
    assert "ERROR  Pod default/web" in out
    assert "names namespace 'default', but the check is for namespace 'prod' (--namespace)" in out
    assert "helm template --namespace NS" in out
    # Judged in the namespace it names, no policy selects it, and the table says so.
    status, out, _ = run(["check", *args, str(rendered)], capsys)
    assert status == 0
    assert out.startswith("ALLOW (no policy applies) Pod default/web (")
    # A resource that names no namespace is judged in --namespace.
    unnamed = write(material.root / "unnamed.yaml", pod("web", namespace=None, images=("docker.io/x:1",)))
    status, out, _ = run(["check", *args, "--namespace", "prod", str(unnamed)], capsys)
    assert status == 1 and "DENY   Pod web" in out


def test_unrendered_helm_templates_and_chart_folders_are_said_so(
    args: list[str], material: Material, capsys: pytest.CaptureFixture[str]
) -> None:
    chart = material.root / "chart"
    (chart / "templates").mkdir(parents=True)
    (chart / "Chart.yaml").write_text("apiVersion: v2\nname: demo\nversion: 0.1.0\n")
    template = chart / "templates" / "deployment.yaml"
    template.write_text(
        'apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {{ include "demo.fullname" . }}\n'
        "spec:\n  template:\n    spec:\n      containers:\n        - image: {{ .Values.image }}\n"
    )
    status, out, _ = run(["check", *args, str(chart)], capsys)
    assert status == 2
    assert f"ERROR  this is a Helm chart, not rendered manifests ({chart})" in out or "is a Helm chart" in out
    assert f"helm template RELEASE {chart} | trtguard check" in out
    status, out, _ = run(["check", *args, str(template)], capsys)
    assert status == 2
    assert "this looks like an unrendered Helm template (line 4 holds a {{ … }} action)" in out
    assert "run helm template first" in out
    # Another tool's placeholders in a malformed file are not called Helm's.
    argo = material.root / "analysis.yaml"
    argo.write_text("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  annotations:\n    a: {{args.x}}\n")
    status, out, _ = run(["check", *args, str(argo)], capsys)
    assert status == 2 and "Helm" not in out


def test_unknown_kinds_are_listed_counted_and_fail_on_demand(
    args: list[str], material: Material, capsys: pytest.CaptureFixture[str]
) -> None:
    custom: dict[str, object] = {
        "apiVersion": "example.com/v1",
        "kind": "Predictor",
        "metadata": {"name": "p", "namespace": "prod"},
        "spec": {"server": {"image": "docker.io/library/nginx:1"}},
    }
    path = write(material.root / "custom.yaml", custom, pod())
    status, out, _ = run(["check", *args, str(path)], capsys)
    assert status == 0
    assert out.splitlines()[0].startswith("UNCHECKED Predictor prod/p (")
    assert "  ? docker.io/library/nginx:1  spec.server.image" in out
    assert "1 of unknown kinds not checked" in out
    assert main(["check", *args, "--unknown-kinds", "fail", str(path)]) == 1
    assert "FAIL   Predictor prod/p" in capsys.readouterr().out
    # judge: as the webhook judges such a resource sent to it.
    status, out, _ = run(["check", *args, "--unknown-kinds", "judge", str(path)], capsys)
    assert status == 1
    assert "DENY   Predictor prod/p" in out
    assert "note: Predictor (example.com/v1): it is not a workload kind trtguard knows" in out

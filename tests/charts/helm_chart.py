"""Render the trtguard chart with the pinned helm binary and read what it produced (for the chart tests)."""

from __future__ import annotations

import copy
import functools
import json
import shutil
import subprocess
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "charts" / "trtguard"
HELM = REPO / ".tools" / "helm"
CI_VALUES = sorted((CHART / "ci").glob("*-values.yaml"))
#: The chart's defaults plus the image digest it requires: every render starts from it (the values given
#: after it win, so a test may take the digest away again).
PINNED_VALUES = REPO / "tests" / "data" / "740-chart-pinned-image-values.yaml"
RELEASE = "rel"
NAMESPACE = "trtguard"
FULLNAME = f"{RELEASE}-trtguard"
#: The oldest Kubernetes the chart is validated against (image volumes exist in the API) and the newest known.
KUBE_VERSIONS = ("1.31.0", kubernetes_validate.latest_version())
#: Custom resources: kubernetes-validate has no schema for them, so dedicated tests check their fields.
CUSTOM_KINDS = frozenset({"Certificate", "Issuer", "ServiceMonitor", "PrometheusRule"})
_HELM_TIMEOUT_S = 60

Doc = dict[str, Any]


def helm() -> Path:
    """The pinned helm binary; the test is skipped (with what to run) where it has not been fetched."""
    if not HELM.is_file():
        pytest.skip(f"helm not found at {HELM}: run `python scripts/fetch_helm.py` (make setup does)")
    return HELM


def run_helm(*args: str, kubeconfig: Path | None = None) -> subprocess.CompletedProcess[str]:
    """Run helm with a bounded time; never reads the user's kubeconfig unless one is given."""
    command = [str(helm()), *args]
    if kubeconfig is not None:
        command += ["--kubeconfig", str(kubeconfig)]
    env = {"HOME": "/nonexistent", "PATH": "/usr/bin:/bin", "KUBECONFIG": str(kubeconfig or "/dev/null")}
    return subprocess.run(
        command, capture_output=True, text=True, timeout=_HELM_TIMEOUT_S, env=env, check=False
    )


def _template_args(
    values: Sequence[Path],
    set_json: Mapping[str, Any],
    namespace: str,
    kube_version: str,
) -> list[str]:
    args = ["template", RELEASE, str(CHART), "--namespace", namespace, "--kube-version", kube_version]
    for path in (PINNED_VALUES, *values):
        args += ["--values", str(path)]
    for key, value in set_json.items():
        args += ["--set-json", f"{key}={json.dumps(value)}"]
    return args


@functools.cache
def _render_cached(
    values: tuple[Path, ...], set_items: str, namespace: str, kube_version: str
) -> tuple[Doc, ...]:
    result = run_helm(*_template_args(values, json.loads(set_items), namespace, kube_version))
    if result.returncode != 0:
        raise AssertionError(f"helm template failed:\n{result.stderr}")
    return tuple(doc for doc in yaml.safe_load_all(result.stdout) if doc)


def render(
    *values: Path,
    set_json: Mapping[str, Any] | None = None,
    namespace: str = NAMESPACE,
    kube_version: str = KUBE_VERSIONS[0],
) -> list[Doc]:
    """``helm template`` the chart; every object as a dict (a fresh copy, so tests may change it)."""
    key = json.dumps(dict(set_json or {}), sort_keys=True)
    return copy.deepcopy(list(_render_cached(tuple(values), key, namespace, kube_version)))


def render_error(*values: Path, set_json: Mapping[str, Any] | None = None, namespace: str = NAMESPACE) -> str:
    """``helm template`` that must fail; returns helm's error text."""
    result = run_helm(*_template_args(values, dict(set_json or {}), namespace, KUBE_VERSIONS[0]))
    assert result.returncode != 0, f"helm template unexpectedly succeeded:\n{result.stdout[:2000]}"
    return result.stderr


#: Every set of values the chart tests render as a whole (each is also scanned by checkov and, where it has
#: them, its alert rules checked): the pinned defaults, each ci/*-values.yaml, and combinations and operator
#: choices the ci files do not cover. name -> (values files, --set-json values).
SCENARIOS: dict[str, tuple[tuple[Path, ...], dict[str, Any]]] = {
    "defaults": ((), {}),
    **{path.name.removesuffix("-values.yaml"): ((path,), {}) for path in CI_VALUES},
    "jobs-without-networkpolicy": (
        (CHART / "ci" / "jobs-values.yaml",),
        {
            "buildJob.networkPolicy.enabled": False,
            "verifierJob.networkPolicy.enabled": False,
            "verifierJob.attestation.enabled": False,
        },
    ),
    "without-networkpolicy": ((), {"networkPolicy.enabled": False}),
    "pinning": ((), {"mutatingWebhook.enabled": True, "webhook.operators": ["kuberay", "kserve"]}),
    "cluster-audit": (
        (),
        {
            "auditCluster.enabled": True,
            "auditCluster.apply": True,
            "webhook.operators": ["kuberay", "kserve"],
        },
    ),
    "allow-tag": ((), {"image.digest": "", "image.allowTag": True}),
    "everything": (
        (
            CHART / "ci" / "postgresql-values.yaml",
            CHART / "ci" / "monitoring-values.yaml",
            CHART / "ci" / "jobs-values.yaml",
            CHART / "ci" / "helm-certs-values.yaml",
        ),
        {},
    ),
}


def scenario(name: str, kube_version: str = KUBE_VERSIONS[0]) -> list[Doc]:
    """The objects of one of :data:`SCENARIOS`."""
    values, set_json = SCENARIOS[name]
    return render(*values, set_json=set_json, kube_version=kube_version)


def install_notes(*values: Path, set_json: Mapping[str, Any] | None = None) -> str:
    """The NOTES that ``helm install`` prints (a client-side dry run, on top of the pinned values)."""
    args = ["install", RELEASE, str(CHART), "--namespace", NAMESPACE, "--dry-run=client"]
    for path in (PINNED_VALUES, *values):
        args += ["--values", str(path)]
    for key, value in (set_json or {}).items():
        args += ["--set-json", f"{key}={json.dumps(value)}"]
    result = run_helm(*args)
    assert result.returncode == 0, result.stderr
    return result.stdout.split("NOTES:\n", 1)[1]


def of_kind(docs: Sequence[Doc], kind: str) -> list[Doc]:
    """The objects of one kind."""
    return [doc for doc in docs if doc["kind"] == kind]


def one(docs: Sequence[Doc], kind: str) -> Doc:
    """The single object of ``kind``."""
    found = of_kind(docs, kind)
    assert len(found) == 1, f"expected one {kind}, found {len(found)}"
    return found[0]


def pod_spec(workload: Doc) -> Doc:
    """The Pod spec of a Deployment or Job."""
    spec: Doc = workload["spec"]["template"]["spec"]
    return spec


def containers(workload: Doc) -> Iterator[Doc]:
    """Init containers and containers of a Pod-bearing workload."""
    spec = pod_spec(workload)
    yield from spec.get("initContainers", [])
    yield from spec["containers"]


def webhook_container(docs: Sequence[Doc]) -> Doc:
    """The trtguard serve container of the Deployment."""
    container: Doc = pod_spec(one(docs, "Deployment"))["containers"][0]
    return container


def flags(args: Sequence[str]) -> dict[str, str]:
    """``--name value`` pairs of a ``trtguard serve`` command line (after the sub-command)."""
    assert args[0] == "serve"
    pairs = list(args[1:])
    assert len(pairs) % 2 == 0, f"every serve flag the chart passes takes a value: {pairs}"
    result: dict[str, str] = {}
    for name, value in zip(pairs[::2], pairs[1::2], strict=True):
        assert name.startswith("--") and name not in result, name
        result[name] = value
    return result


def selector_matches(selector: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    """Evaluate a Kubernetes LabelSelector against a label set, as the API server does."""
    for key, value in selector.get("matchLabels", {}).items():
        if labels.get(key) != value:
            return False
    for requirement in selector.get("matchExpressions", []):
        key, operator, values = requirement["key"], requirement["operator"], requirement.get("values", [])
        present = key in labels
        if operator == "In" and not (present and labels[key] in values):
            return False
        if operator == "NotIn" and present and labels[key] in values:
            return False
        if operator == "Exists" and not present:
            return False
        if operator == "DoesNotExist" and present:
            return False
    return True


def write_like_kubelet(folder: Path, files: Mapping[str, str]) -> None:
    """Lay ``files`` out the way the kubelet's atomic writer fills a ConfigMap/projected volume.

    The data lives in a hidden timestamped folder, ``..data`` points at it, and each top-level name is a
    symlink into ``..data``; this is what the policy loader walks in the Pod.
    """
    payload = folder / "..2026_01_01_00_00_00.000000001"
    for relative, content in files.items():
        target = payload / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content, encoding="utf-8")
    (folder / "..data").symlink_to(payload.name)
    for top in sorted({relative.split("/", 1)[0] for relative in files}):
        (folder / top).symlink_to(f"..data/{top}")


def projected_files(docs: Sequence[Doc]) -> dict[str, str]:
    """The files of the policies volume, from the chart's own ConfigMap and the volume's items."""
    config_maps = {c["metadata"]["name"]: c for c in of_kind(docs, "ConfigMap")}
    volumes = {v["name"]: v for v in pod_spec(one(docs, "Deployment"))["volumes"]}
    files: dict[str, str] = {}
    for source in volumes["policies"]["projected"]["sources"]:
        config_map = config_maps[source["configMap"]["name"]]
        for item in source["configMap"]["items"]:
            files[item["path"]] = config_map["data"][item["key"]]
    return files


def policy_folder(docs: Sequence[Doc], folder: Path) -> Path:
    """The server's policy folder as the Pod sees it; returns the ``--policies`` directory.

    The image's library (without its tests, as the Dockerfile copies it) and the chart's files mounted at
    ``site/``.
    """
    root = folder / "etc" / "trtguard" / "policies"
    shutil.copytree(REPO / "policies" / "library", root / "library", ignore=shutil.ignore_patterns("tests"))
    (root / "site").mkdir()
    write_like_kubelet(root / "site", projected_files(docs))
    return root

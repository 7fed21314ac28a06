"""policies.workload_model._extraction: images and engines with JSON paths from every Pod-bearing kind, and
malformed input."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from policies.workload_model._extraction import (
    ENGINES_ANNOTATION,
    EngineUse,
    ImageUse,
    Problem,
    Unjudged,
    Workload,
    changed_since,
    extract,
    iter_resources,
)
from verifier.base._errors import InputError

D = {n: f"sha256:{str(n) * 64}" for n in range(1, 8)}
CHARLIE = (
    "securesystemsengineering/charlie-image"
    "@sha256:91ac9b26df583762234c1cdb2fc930364754ccc59bc752a2bfe298d2ea68f9ff"
)
GCR_CONTROLLER = (
    "k8s.gcr.io/ingress-nginx/controller:v0.43.0"
    "@sha256:9bba603b99bf25f6d117cf1235b6598c16033ad027b143c90fa5b3cc583c5713"
)
ECR_CONTROLLER = (
    "123456789.dkr.ecr.ap-southeast-2.amazonaws.com/k8s.gcr.io/ingress-nginx/controller:v0.43.0"
    "@sha256:9bba603b99bf25f6d117cf1235b6598c16033ad027b143c90fa5b3cc583c5713"
)
GAR_CONTROLLER = (
    "us-central1-docker.pkg.dev/gcp-project-123/main/k8s.gcr.io/ingress-nginx/controller"
    "@sha256:9bba603b99bf25f6d117cf1235b6598c16033ad027b143c90fa5b3cc583c5713"
)
TSS = "spec.template.spec"


def _c(path: str, reference: str, container: str) -> ImageUse:
    return ImageUse(reference, path, "container", container)


# --- every AdmissionReview / AdmissionRequest in the public fixtures ------------------------------------
# Per fixture, what `extract(request.object, namespace=request.namespace, kind=request.kind.kind)` gives:
# ("workload", kind, namespace, name, pod spec path, images), ("not a workload",), or
# ("input error", location). Where an oldObject is present, "old" lists its images (or its error).

FIXTURES: dict[str, dict[str, Any]] = {
    "connaisseur-01_deployment.json": {
        "new": (
            "workload",
            "Deployment",
            "test-connaisseur",
            "charlie-deployment",
            TSS,
            [
                _c(
                    f"{TSS}.containers[0].image",
                    "securesystemsengineering/alice-image:test",
                    "test-connaisseur",
                ),
            ],
        ),
    },
    "connaisseur-02_pod.json": {
        "new": (
            "workload",
            "Pod",
            "test-connaisseur",
            None,
            "spec",
            [
                _c("spec.containers[0].image", CHARLIE, "test-connaisseur"),
            ],
        ),
    },
    "connaisseur-04_cronjob_batch_v1beta1.json": {
        "new": (
            "workload",
            "CronJob",
            "connaisseur",
            "yooob",
            "spec.jobTemplate.spec.template.spec",
            [
                _c("spec.jobTemplate.spec.template.spec.containers[0].image", "busybox", "yooob"),
            ],
        ),
        "old": ("input error", None),  # the oldObject is the string "None"
    },
    "connaisseur-05_replication_controller.json": {
        "new": (
            "workload",
            "ReplicationController",
            "connaisseur",
            "nginx",
            TSS,
            [
                _c(f"{TSS}.containers[0].image", "nginx", "nginx"),
            ],
        ),
    },
    "connaisseur-06_daemonset_kube_system.json": {
        "new": (
            "workload",
            "DaemonSet",
            "kube-system",
            "fluentd-elasticsearch",
            TSS,
            [
                _c(
                    f"{TSS}.containers[0].image",
                    "quay.io/fluentd_elasticsearch/fluentd:v2.5.2",
                    "fluentd-elasticsearch",
                ),
            ],
        ),
    },
    "connaisseur-07_statefulset.json": {
        "new": (
            "workload",
            "StatefulSet",
            "connaisseur",
            "web",
            TSS,
            [
                _c(f"{TSS}.containers[0].image", "registry.k8s.io/nginx-slim:0.8", "nginx"),
            ],
        ),
    },
    "connaisseur-08_job.json": {
        "new": (
            "workload",
            "Job",
            "connaisseur",
            "pi",
            TSS,
            [_c(f"{TSS}.containers[0].image", "perl:5.34.0", "pi")],
        ),
    },
    "connaisseur-09_deployment_multi_image_init.json": {
        "new": (
            "workload",
            "Deployment",
            "connaisseur",
            "test",
            TSS,
            [
                _c(f"{TSS}.containers[0].image", "redis:alpine", "redis"),
                _c(f"{TSS}.containers[1].image", "mysql:8", "mysql"),
                ImageUse("busybox:1.32", f"{TSS}.initContainers[0].image", "initContainer", "init"),
            ],
        ),
    },
    "connaisseur-10_replicaset_update.json": {
        "new": (
            "workload",
            "ReplicaSet",
            "default",
            "test-58d59c69bf",
            TSS,
            [
                _c(f"{TSS}.containers[0].image", f"docker.io/library/redis:latest@{D[1]}", "nginx"),
            ],
        ),
        "old": [_c(f"{TSS}.containers[0].image", f"docker.io/library/redis:latest@{D[1]}", "nginx")],
    },
    "connaisseur-11_role_non_workload.json": {"new": ("not a workload",)},
    # kind Pod, but the object is {"msg": ...} and the oldObject {}: neither has a pod spec.
    "connaisseur-12_err_pod_not_a_pod.json": {"new": ("input error", "spec"), "old": ("input error", "spec")},
    "connaisseur-19_pod_initcontainer.json": {
        "new": (
            "workload",
            "Pod",
            "test-connaisseur",
            None,
            "spec",
            [
                _c("spec.containers[0].image", CHARLIE, "test-connaisseur"),
                ImageUse("nginx", "spec.initContainers[0].image", "initContainer", "my-initcontainer"),
            ],
        ),
    },
    "connaisseur-20_pod_ephemeralcontainer.json": {
        "new": (
            "workload",
            "Pod",
            "test-connaisseur",
            None,
            "spec",
            [
                _c("spec.containers[0].image", CHARLIE, "test-connaisseur"),
                ImageUse(
                    "nginx", "spec.ephemeralContainers[0].image", "ephemeralContainer", "my-initcontainer"
                ),
            ],
        ),
    },
    "connaisseur-21_broken_request.json": {"new": ("input error", None)},  # request without object
    "connaisseur-22_short_image_name.json": {
        "new": (
            "workload",
            "Pod",
            "test-connaisseur",
            None,
            "spec",
            [
                _c("spec.containers[0].image", "test-image", "test-connaisseur"),
            ],
        ),
    },
    "connaisseur-24_tag_and_digest.json": {
        "new": (
            "workload",
            "Deployment",
            "test-connaisseur",
            "charlie-deployment",
            TSS,
            [
                _c(
                    f"{TSS}.containers[0].image",
                    "securesystemsengineering/alice-image:test@sha256:"
                    "1234567890123456123456789012345612345678901234561234567890123456",
                    "test-connaisseur",
                ),
            ],
        ),
    },
    "connaisseur-25_null_body.json": {},  # the body is JSON null: no request at all
    "connaisseur-28_deletion_timestamp_both.json": {
        "new": (
            "workload",
            "Deployment",
            "test-connaisseur",
            "charlie-deployment",
            TSS,
            [
                _c(f"{TSS}.containers[0].image", "busybox", "test-connaisseur"),
            ],
        ),
        "old": [_c(f"{TSS}.containers[0].image", "busybox", "test-connaisseur")],
    },
    "connaisseur-29_deletion_timestamp_new_only.json": {
        "new": (
            "workload",
            "Deployment",
            "test-connaisseur",
            "charlie-deployment",
            TSS,
            [
                _c(f"{TSS}.containers[0].image", "busybox", "test-connaisseur"),
            ],
        ),
        "old": [_c(f"{TSS}.containers[0].image", "busybox", "test-connaisseur")],
    },
    # Envelope kind "kindValue" around a CustomType object: the two disagree.
    "k8s-api-admission.k8s.io.v1.AdmissionReview.json": {
        "new": ("input error", "kind"),
        "old": ("input error", "kind"),
    },
    "k8s-api-admission.k8s.io.v1.AdmissionReview.yaml": {
        "new": ("input error", "kind"),
        "old": ("input error", "kind"),
    },
    "k8s-api-admission.k8s.io.v1beta1.AdmissionReview.json": {
        "new": ("input error", "kind"),
        "old": ("input error", "kind"),
    },
    "k8s-image-swapper-pod_kubectl_run_multi_registry.json": {
        "new": (
            "workload",
            "Pod",
            "default",
            "nginx28",
            "spec",
            [
                _c("spec.containers[0].image", "nginx", "nginx28"),
                _c("spec.containers[1].image", GCR_CONTROLLER, "ingress-nginx28"),
                _c("spec.containers[2].image", ECR_CONTROLLER, "skip-test-ecr"),
                _c("spec.containers[3].image", GAR_CONTROLLER, "skip-test-gar"),
                ImageUse(
                    "init-container", "spec.initContainers[0].image", "initContainer", "init-container28"
                ),
            ],
        ),
    },
    "kubewarden-cronjob_batch_v1_bare_request.json": {
        "new": (
            "workload",
            "CronJob",
            "default",
            "hello",
            "spec.jobTemplate.spec.template.spec",
            [
                _c("spec.jobTemplate.spec.template.spec.containers[0].image", "busybox:1.28", "hello"),
            ],
        ),
    },
    "kubewarden-deployment_delete_bare_request.json": {
        "new": ("input error", None),  # DELETE: no object
        "old": [_c(f"{TSS}.containers[0].image", "nginx:latest", "nginx")],
    },
    "kubewarden-deployment_update_bare_request.json": {
        "new": (
            "workload",
            "Deployment",
            "default",
            "nginx",
            TSS,
            [
                _c(f"{TSS}.containers[0].image", "nginx:latest", "nginx"),
            ],
        ),
        "old": [_c(f"{TSS}.containers[0].image", "nginx:latest", "nginx")],
    },
    "kubewarden-pod_delete_bare_request.json": {
        "new": ("input error", None),
        "old": [_c("spec.containers[0].image", "nginx", "nginx")],
    },
    "kubewarden-pod_two_containers_plus_ephemeral.json": {
        "new": (
            "workload",
            "Pod",
            "default",
            "nginx",
            "spec",
            [
                _c("spec.containers[0].image", "alpine", "sleeping-sidecar"),
                _c("spec.containers[1].image", "nginx", "nginx"),
                ImageUse("nginx", "spec.ephemeralContainers[0].image", "ephemeralContainer", "nginx"),
            ],
        ),
    },
    "kubewarden-trp-ingress_non_workload.json": {"new": ("not a workload",)},
    # The object has no kind and no namespace: the kind comes from the request.
    "kubewarden-vis-pod_tag_and_digest_minimal.json": {
        "new": (
            "workload",
            "Pod",
            None,
            "nginx",
            "spec",
            [
                _c(
                    "spec.containers[0].image",
                    "nginx:v1.26@sha256:89102e348749bb17a6a651a4b2a17420e1a66d2a44a675b981973d49a5af3a5e",
                    "nginx",
                ),
            ],
        ),
    },
}


def _load(path: Path) -> Any:
    text = path.read_text()
    return yaml.safe_load(text) if path.suffix == ".yaml" else json.loads(text)


def _request(document: Any) -> dict[str, Any] | None:
    """``request`` of a wrapped AdmissionReview, or the bare AdmissionRequest itself."""
    if not isinstance(document, dict):
        return None
    if document.get("kind") == "AdmissionReview":
        request = document.get("request")
        return request if isinstance(request, dict) else None
    return document


def workload_of(obj: Any, **options: Any) -> Workload:
    """``extract``'s answer, which must be a workload."""
    found = extract(obj, **options)
    assert isinstance(found, Workload), found
    return found


def _extract_from(request: dict[str, Any], key: str) -> Workload | Unjudged:
    kind = request.get("kind")
    return extract(
        request.get(key),  # type: ignore[arg-type]  # None on purpose where the request has no object
        namespace=request.get("namespace"),
        kind=kind.get("kind") if isinstance(kind, dict) else None,
    )


def _check(request: dict[str, Any], key: str, expected: Any) -> None:
    if expected[0] == "not a workload":
        assert isinstance(_extract_from(request, key), Unjudged)
        return
    if expected[0] == "input error":
        with pytest.raises(InputError) as caught:
            _extract_from(request, key)
        assert caught.value.location == expected[1]
        return
    workload = _extract_from(request, key)
    assert isinstance(workload, Workload)
    if isinstance(expected, list):  # oldObject: images only
        assert workload.images == tuple(expected)
        return
    _, kind, namespace, name, spec_path, images = expected
    assert (workload.kind, workload.namespace, workload.name, workload.spec_path) == (
        kind,
        namespace,
        name,
        spec_path,
    )
    assert workload.images == tuple(images)
    assert workload.engines == ()
    assert workload.problems == ()
    assert workload.obj is request[key]


def test_the_table_covers_every_fixture(shared_fixtures: Path) -> None:
    assert {path.name for path in (shared_fixtures / "admission").iterdir()} == set(FIXTURES)


@pytest.mark.parametrize("name", sorted(FIXTURES))
def test_admission_fixtures(shared_fixtures: Path, name: str) -> None:
    expected = FIXTURES[name]
    request = _request(_load(shared_fixtures / "admission" / name))
    if not expected:
        assert request is None
        return
    assert request is not None
    _check(request, "object", expected["new"])
    if "old" in expected:
        _check(request, "oldObject", expected["old"])
    else:
        assert not request.get("oldObject")


@pytest.mark.parametrize(
    "name",
    [
        name
        for name, expected in FIXTURES.items()
        if isinstance(expected.get("old"), list) and expected["new"][0] == "workload"
    ],
)
def test_updates_without_image_changes_leave_nothing_to_judge(shared_fixtures: Path, name: str) -> None:
    request = _request(_load(shared_fixtures / "admission" / name))
    assert request is not None
    new, old = _extract_from(request, "object"), _extract_from(request, "oldObject")
    assert isinstance(new, Workload) and isinstance(old, Workload)
    changed = changed_since(new, old)
    assert (changed.images, changed.engines, changed.problems) == ((), (), ())
    assert changed.obj is new.obj
    assert changed.name == new.name


def test_kubectl_returns_old_api_versions_under_the_same_paths(shared_fixtures: Path) -> None:
    request = _request(_load(shared_fixtures / "admission" / "connaisseur-04_cronjob_batch_v1beta1.json"))
    assert request is not None
    assert _extract_from(request, "object").api_version == "batch/v1beta1"


# --- synthetic objects (tests/data/300-303) --------------------------------------------------------------


def _data(data_dir: Path, name: str) -> Any:
    return _load(data_dir / name)


@pytest.mark.parametrize(
    "name", ["300-pod-tensorrt-image-volumes.yaml", "301-cronjob-engines-annotations.yaml"]
)
def test_synthetic_objects_are_valid_kubernetes(data_dir: Path, name: str) -> None:
    kubernetes_validate.validate(_data(data_dir, name), "1.35.0", strict=True)


def test_pod_with_image_volumes_and_annotation(data_dir: Path) -> None:
    workload = workload_of(_data(data_dir, "300-pod-tensorrt-image-volumes.yaml"))
    assert (workload.kind, workload.api_version, workload.namespace, workload.name) == (
        "Pod",
        "v1",
        "prod-inference",
        "detector-trt",
    )
    assert workload.labels == {"app": "detector"}
    assert ENGINES_ANNOTATION in workload.annotations
    assert workload.images == (
        _c("spec.containers[0].image", f"nvcr.io/nvidia/tritonserver:24.08-py3@{D[2]}", "triton"),
        _c("spec.containers[1].image", f"registry.corp/inference/tokenizer@{D[3]}", "tokenizer"),
        ImageUse(
            "registry.corp/inference/warmup:1.2", "spec.initContainers[0].image", "initContainer", "warmup"
        ),
        ImageUse(
            "registry.corp/inference/metrics:0.3", "spec.initContainers[1].image", "initContainer", "metrics"
        ),
        ImageUse(
            f"registry.corp/models/detector-engine@{D[4]}",
            "spec.volumes[0].image.reference",
            "volume",
            "engine",
        ),
        ImageUse("quay.io/crio/artifact:v1", "spec.volumes[1].image.reference", "volume", "docs"),
    )
    # The mounted volume is an engine used by the containers that mount it; the unmounted, unnamed one is
    # only an image; the annotation engine is used by the container it names.
    assert workload.engines == (
        EngineUse(
            "engine",
            f"registry.corp/models/detector-engine@{D[4]}",
            "spec.volumes[0].image.reference",
            "volume",
            ("triton", "warmup"),
            readers=("spec.containers[0]", "spec.initContainers[0]"),
            templates=("spec",),
        ),
        EngineUse(
            "resnet50-int8",
            f"registry.corp/models/resnet50-engine@{D[1]}",
            f"metadata.annotations[{ENGINES_ANNOTATION}][0]",
            "annotation",
            ("triton",),
            declared=True,
            readers=("spec.containers[0]",),
            templates=("spec",),
        ),
    )
    assert workload.problems == ()


def test_cronjob_merges_template_and_object_annotations(data_dir: Path) -> None:
    workload = workload_of(_data(data_dir, "301-cronjob-engines-annotations.yaml"))
    spec = "spec.jobTemplate.spec.template.spec"
    template = spec.removesuffix(".spec")
    template_annotation = f"spec.jobTemplate.spec.template.metadata.annotations[{ENGINES_ANNOTATION}]"
    assert workload.spec_path == spec
    assert workload.images == (
        _c(f"{spec}.containers[0].image", "nvcr.io/nvidia/tensorrt:24.08-py3", "infer"),
        _c(f"{spec}.containers[1].image", "registry.corp/tools/uploader:2.0", "uploader"),
        ImageUse(
            f"registry.corp/datasets/calibration@{D[7]}",
            f"{spec}.volumes[0].image.reference",
            "volume",
            "calibration",
        ),
    )
    assert workload.engines == (
        # named by the object's annotation, mounted by nobody
        EngineUse(
            "calibration",
            f"registry.corp/datasets/calibration@{D[7]}",
            f"{spec}.volumes[0].image.reference",
            "volume",
            (),
            declared=True,
            templates=(template,),
        ),
        # template entries first; the object's identical "ranker" entry counts once
        EngineUse(
            "embedder",
            f"registry.corp/models/embedder:v3@{D[6]}",
            f"{template_annotation}[0]",
            "annotation",
            ("infer", "uploader"),
            declared=True,
            readers=(f"{spec}.containers[0]", f"{spec}.containers[1]"),
            templates=(template,),
        ),
        EngineUse(
            "ranker",
            f"registry.corp/models/ranker@{D[5]}",
            f"{template_annotation}[1]",
            "annotation",
            ("infer", "uploader"),
            declared=True,
            readers=(f"{spec}.containers[0]", f"{spec}.containers[1]"),
            templates=(template,),
        ),
    )
    assert workload.problems == ()


def test_list_documents_are_flattened(data_dir: Path) -> None:
    resources = list(iter_resources(_data(data_dir, "302-list-workloads.yaml")))
    assert [(r["kind"], r["metadata"]["name"]) for r in resources] == [
        ("PodTemplate", "trt-template"),
        ("ReplicationController", "legacy-trt"),
        ("Service", "trt"),
        ("Deployment", "trt-deploy"),
    ]
    for resource in resources:
        kubernetes_validate.validate(dict(resource), "1.35.0", strict=True)
    template, controller, service, deployment = resources
    assert workload_of(template).images == (
        _c("template.spec.containers[0].image", "nvcr.io/nvidia/tensorrt:24.08-py3", "server"),
    )
    assert workload_of(template).spec_path == "template.spec"
    assert workload_of(controller).images == (
        _c(f"{TSS}.containers[0].image", "registry.corp/inference/legacy:1.0", "server"),
    )
    skipped = extract(service)
    assert isinstance(skipped, Unjudged)
    assert skipped.reason == "it is not a workload kind trtguard knows and names no container image"
    assert workload_of(deployment).images == (
        _c(f"{TSS}.containers[0].image", "registry.corp/inference/server:3.1", "server"),
    )


def test_ephemeral_container_subresource_update(data_dir: Path) -> None:
    request = _request(_data(data_dir, "303-pod-ephemeralcontainers-update-review.json"))
    assert request is not None
    assert request["subResource"] == "ephemeralcontainers"
    new, old = _extract_from(request, "object"), _extract_from(request, "oldObject")
    assert isinstance(new, Workload) and isinstance(old, Workload)
    changed = changed_since(new, old)
    assert changed.images == (
        ImageUse("busybox:1.36", "spec.ephemeralContainers[0].image", "ephemeralContainer", "debugger-x7h2q"),
    )
    # The debugger also mounts the engine volume: a new container uses the engine, so it is judged again.
    assert changed.engines == (
        EngineUse(
            "engine",
            f"registry.corp/models/detector-engine@{D[4]}",
            "spec.volumes[0].image.reference",
            "volume",
            ("triton", "debugger-x7h2q"),
            readers=("spec.containers[0]", "spec.ephemeralContainers[0]"),
            templates=("spec",),
        ),
    )


# --- every kind, every image-bearing field -------------------------------------------------------------

FULL_SPEC: dict[str, Any] = {
    "containers": [
        {
            "name": "app",
            "image": "registry.corp/app:1",
            "volumeMounts": [{"name": "model", "mountPath": "/m"}],
        }
    ],
    "initContainers": [{"name": "init", "image": "registry.corp/init:1"}],
    "ephemeralContainers": [{"name": "debug", "image": "busybox:1.36"}],
    "volumes": [
        {"name": "model", "image": {"reference": f"registry.corp/engines/m@{D[1]}"}},
        {"name": "tmp", "emptyDir": {}},
    ],
}
API_VERSIONS = {
    "Pod": "v1",
    "Deployment": "apps/v1",
    "ReplicaSet": "apps/v1",
    "StatefulSet": "apps/v1",
    "DaemonSet": "apps/v1",
    "Job": "batch/v1",
    "ReplicationController": "v1",
    "PodTemplate": "v1",
    "CronJob": "batch/v1",
}
SPEC_PATHS = {
    "Pod": "spec",
    "Deployment": TSS,
    "ReplicaSet": TSS,
    "StatefulSet": TSS,
    "DaemonSet": TSS,
    "Job": TSS,
    "ReplicationController": TSS,
    "PodTemplate": "template.spec",
    "CronJob": "spec.jobTemplate.spec.template.spec",
}


def _object(
    kind: str,
    spec: dict[str, Any],
    *,
    metadata: dict[str, Any] | None = None,
    template_metadata: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A ``kind`` object with ``spec`` as its PodSpec, at the path that kind keeps it."""
    keys = SPEC_PATHS[kind].split(".")
    obj: dict[str, Any] = {
        "apiVersion": API_VERSIONS[kind],
        "kind": kind,
        "metadata": metadata or {"name": "x"},
    }
    node = obj
    for key in keys[:-1]:
        node = node.setdefault(key, {})
    node[keys[-1]] = spec
    if template_metadata is not None:
        node["metadata"] = template_metadata
    return obj


@pytest.mark.parametrize("kind", sorted(SPEC_PATHS))
def test_every_image_bearing_field_in_every_kind(kind: str) -> None:
    workload = workload_of(_object(kind, copy.deepcopy(FULL_SPEC)))
    spec = SPEC_PATHS[kind]
    assert workload.spec_path == spec
    assert workload.images == (
        _c(f"{spec}.containers[0].image", "registry.corp/app:1", "app"),
        ImageUse("registry.corp/init:1", f"{spec}.initContainers[0].image", "initContainer", "init"),
        ImageUse("busybox:1.36", f"{spec}.ephemeralContainers[0].image", "ephemeralContainer", "debug"),
        ImageUse(f"registry.corp/engines/m@{D[1]}", f"{spec}.volumes[0].image.reference", "volume", "model"),
    )
    assert workload.engines == (
        EngineUse(
            "model",
            f"registry.corp/engines/m@{D[1]}",
            f"{spec}.volumes[0].image.reference",
            "volume",
            ("app",),
            readers=(f"{spec}.containers[0]",),
            templates=(spec if kind == "Pod" else spec.removesuffix(".spec"),),
        ),
    )
    assert workload.problems == ()


@pytest.mark.parametrize("kind", ["Service", "ConfigMap", "List", "InferenceService", "EphemeralContainers"])
def test_other_kinds_without_images_are_unjudged_with_the_reason(kind: str) -> None:
    found = extract({"apiVersion": "v1", "kind": kind, "metadata": {"name": "x"}, "spec": {}})
    assert isinstance(found, Unjudged)
    assert found.reason == "it is not a workload kind trtguard knows and names no container image"


def test_kind_from_the_caller_when_the_object_has_none() -> None:
    obj = {"spec": {"containers": [{"name": "a", "image": "nginx"}]}}
    assert workload_of(obj, kind="Pod").kind == "Pod"
    with pytest.raises(InputError, match="has no kind"):
        extract(obj)
    # no kind must never read as "nothing to check"


# --- what makes extraction impossible: InputError with the path ------------------------------------------


@pytest.mark.parametrize(
    ("obj", "location", "words"),
    [
        ({"kind": "Pod"}, "spec", "this Pod has no spec"),
        ({"kind": "Pod", "spec": None}, "spec", "has no spec"),
        ({"kind": "Pod", "spec": ["containers"]}, "spec", "spec must be an object, found a list"),
        (
            {"kind": "Deployment", "spec": {"replicas": 1}},
            "spec.template",
            "this Deployment has no spec.template",
        ),
        ({"kind": "Deployment", "spec": {"template": {"metadata": {}}}}, TSS, "has no spec.template.spec"),
        ({"kind": "StatefulSet", "spec": {"template": {"spec": "oops"}}}, TSS, "found a string"),
        (
            {"kind": "CronJob", "spec": {"jobTemplate": {"spec": {}}}},
            "spec.jobTemplate.spec.template",
            "has no",
        ),
        ({"kind": "PodTemplate", "spec": {"containers": []}}, "template", "this PodTemplate has no template"),
        ({"kind": 5, "spec": {}}, "kind", "kind must be a string"),
        ({"spec": {}}, "kind", "has no kind"),
        ({"kind": "", "spec": {}}, "kind", "has no kind"),
        ({"kind": "Pod", "metadata": {"namespace": 3}, "spec": {}}, "metadata.namespace", "must be a string"),
    ],
)
def test_unreadable_objects_raise_input_error(obj: dict[str, Any], location: str, words: str) -> None:
    with pytest.raises(InputError) as caught:
        extract(obj)
    assert caught.value.location == location
    assert words in caught.value.message
    assert caught.value.hint


@pytest.mark.parametrize("obj", [None, "Pod", 3, ["kind", "Pod"]])
def test_a_non_object_raises_input_error(obj: Any) -> None:
    with pytest.raises(InputError, match="a Kubernetes object was expected"):
        extract(obj)


def test_object_and_envelope_must_agree() -> None:
    pod = _object("Pod", {"containers": [{"name": "a", "image": "nginx"}]}, metadata={"namespace": "dev"})
    with pytest.raises(InputError, match="says kind Pod but was sent as Deployment"):
        extract(pod, kind="Deployment")
    with pytest.raises(
        InputError, match="names namespace 'dev' but is applied to namespace 'prod'"
    ) as caught:
        extract(pod, namespace="prod")
    assert caught.value.location == "metadata.namespace"
    assert workload_of(pod, namespace="dev", kind="Pod").namespace == "dev"
    del pod["metadata"]["namespace"]
    assert workload_of(pod, namespace="prod").namespace == "prod"
    assert workload_of(pod).namespace is None


# --- malformed fields: a Problem each, never an exception ------------------------------------------------


def _engines(entries: Any) -> dict[str, Any]:
    return {
        "name": "x",
        "annotations": {ENGINES_ANNOTATION: entries if isinstance(entries, str) else json.dumps(entries)},
    }


APP = {"name": "app", "image": "registry.corp/app:1"}
VOLUME_REF = f"registry.corp/engines/m@{D[1]}"
VOLUME = {"name": "model", "image": {"reference": VOLUME_REF}}
ENGINE_REF = f"registry.corp/engines/m@{D[2]}"

MALFORMED: list[tuple[str, dict[str, Any], dict[str, Any] | None, str, str]] = [
    # (case, pod spec, pod metadata, problem path, words in the problem message)
    ("no containers", {}, None, "spec.containers", "no containers"),
    ("empty containers", {"containers": []}, None, "spec.containers", "empty"),
    (
        "containers not a list",
        {"containers": "nginx"},
        None,
        "spec.containers",
        "must be a list of containers, found a string",
    ),
    ("container not an object", {"containers": ["nginx"]}, None, "spec.containers[0]", "must be an object"),
    ("image missing", {"containers": [{"name": "a"}]}, None, "spec.containers[0].image", "has no image"),
    (
        "image empty",
        {"containers": [{"name": "a", "image": ""}]},
        None,
        "spec.containers[0].image",
        "has no image",
    ),
    (
        "image a number",
        {"containers": [{"name": "a", "image": 5}]},
        None,
        "spec.containers[0].image",
        "found a number",
    ),
    (
        "image a list",
        {"containers": [APP, {"name": "b", "image": ["x"]}]},
        None,
        "spec.containers[1].image",
        "found a list",
    ),
    (
        "init not a list",
        {"containers": [APP], "initContainers": {"a": 1}},
        None,
        "spec.initContainers",
        "found an object",
    ),
    (
        "ephemeral image",
        {"containers": [APP], "ephemeralContainers": [{"name": "d", "image": True}]},
        None,
        "spec.ephemeralContainers[0].image",
        "found a boolean",
    ),
    ("volumes not a list", {"containers": [APP], "volumes": "v"}, None, "spec.volumes", "must be a list"),
    (
        "volume not an object",
        {"containers": [APP], "volumes": [7]},
        None,
        "spec.volumes[0]",
        "found a number",
    ),
    (
        "image volume not an object",
        {"containers": [APP], "volumes": [{"name": "m", "image": "quay.io/x:1"}]},
        None,
        "spec.volumes[0].image",
        "must be an object",
    ),
    (
        "image volume without reference",
        {"containers": [APP], "volumes": [{"name": "m", "image": {}}]},
        None,
        "spec.volumes[0].image.reference",
        "no reference",
    ),
    (
        "image volume reference a number",
        {"containers": [APP], "volumes": [{"name": "m", "image": {"reference": 1}}]},
        None,
        "spec.volumes[0].image.reference",
        "found a number",
    ),
    (
        "image volume without name",
        {"containers": [APP], "volumes": [{"image": {"reference": "quay.io/x:1"}}]},
        None,
        "spec.volumes[0].name",
        "no name",
    ),
    (
        "duplicate volume names",
        {"containers": [APP], "volumes": [VOLUME, VOLUME]},
        None,
        "spec.volumes[1].name",
        "a second volume is named 'model'",
    ),
    (
        "volumeMounts not a list",
        {"containers": [{**APP, "volumeMounts": "model"}]},
        None,
        "spec.containers[0].volumeMounts",
        "must be a list",
    ),
    (
        "mount without name",
        {"containers": [{**APP, "volumeMounts": [{"mountPath": "/m"}]}]},
        None,
        "spec.containers[0].volumeMounts[0]",
        "volume name",
    ),
    ("metadata not an object", {"containers": [APP]}, "oops", "metadata", "must be an object"),  # type: ignore[list-item]
    ("name not a string", {"containers": [APP]}, {"name": 7}, "metadata.name", "must be a string"),
    (
        "labels not an object",
        {"containers": [APP]},
        {"labels": ["a"]},
        "metadata.labels",
        "must be an object",
    ),
    (
        "label value not a string",
        {"containers": [APP]},
        {"labels": {"tier": 1}},
        "metadata.labels[tier]",
        "strings",
    ),
    # the YAML mistake of writing the annotation as a list instead of a JSON string
    (
        "annotation not a string",
        {"containers": [APP]},
        {"annotations": {ENGINES_ANNOTATION: [{"name": "m"}]}},
        f"metadata.annotations[{ENGINES_ANNOTATION}]",
        "values must be strings, found a list",
    ),
    (
        "annotation not JSON",
        {"containers": [APP]},
        _engines("[{name: m}]"),
        f"metadata.annotations[{ENGINES_ANNOTATION}]",
        "is not valid JSON",
    ),
    (
        "annotation nested too deep",
        {"containers": [APP]},
        _engines("[" * 100_000),
        f"metadata.annotations[{ENGINES_ANNOTATION}]",
        "is not valid JSON",
    ),
    (
        "annotation not a list",
        {"containers": [APP]},
        _engines({"name": "m", "ref": ENGINE_REF}),
        f"metadata.annotations[{ENGINES_ANNOTATION}]",
        "must be a JSON list",
    ),
    (
        "entry not an object",
        {"containers": [APP]},
        _engines(["m"]),
        f"metadata.annotations[{ENGINES_ANNOTATION}][0]",
        "must be an object, found a string",
    ),
    (
        "entry with unknown key",
        {"containers": [APP]},
        _engines([{"name": "m", "reference": ENGINE_REF}]),
        f"metadata.annotations[{ENGINES_ANNOTATION}][0]",
        "unknown keys ['reference']",
    ),
    (
        "entry without name",
        {"containers": [APP]},
        _engines([{"ref": ENGINE_REF}]),
        f"metadata.annotations[{ENGINES_ANNOTATION}][0]",
        "non-empty string name",
    ),
    (
        "entry without ref",
        {"containers": [APP]},
        _engines([{"name": "m"}]),
        f"metadata.annotations[{ENGINES_ANNOTATION}][0]",
        "needs ref",
    ),
    (
        "entry ref without digest",
        {"containers": [APP]},
        _engines([{"name": "m", "ref": "registry.corp/engines/m:v1"}]),
        f"metadata.annotations[{ENGINES_ANNOTATION}][0]",
        "has no digest",
    ),
    (
        "entry ref breaks the grammar",
        {"containers": [APP]},
        _engines([{"name": "m", "ref": f"registry.corp/Engines/m@{D[2]}"}]),
        f"metadata.annotations[{ENGINES_ANNOTATION}][0]",
        "'Engines' has upper-case letters",
    ),
    (
        "entry ref look-alike",
        {"containers": [APP]},
        _engines([{"name": "m", "ref": f"registry.corp/\u0435ngines/m@{D[2]}"}]),
        f"metadata.annotations[{ENGINES_ANNOTATION}][0]",
        "CYRILLIC SMALL LETTER IE",
    ),
    (
        "entry names a missing container",
        {"containers": [APP]},
        _engines([{"name": "m", "ref": ENGINE_REF, "container": "gpu"}]),
        f"metadata.annotations[{ENGINES_ANNOTATION}][0]",
        "names container 'gpu'",
    ),
    (
        "entry contradicts its volume",
        {"containers": [APP], "volumes": [VOLUME]},
        _engines([{"name": "model", "ref": ENGINE_REF}]),
        f"metadata.annotations[{ENGINES_ANNOTATION}][0]",
        "differs from the volume's reference",
    ),
    (
        "entry's container does not mount its volume",
        {"containers": [APP], "volumes": [VOLUME]},
        _engines([{"name": "model", "container": "app"}]),
        f"metadata.annotations[{ENGINES_ANNOTATION}][0]",
        "does not mount image volume 'model'",
    ),
    (
        "same engine twice with different refs",
        {"containers": [APP]},
        _engines([{"name": "m", "ref": ENGINE_REF}, {"name": "m", "ref": f"registry.corp/engines/m@{D[3]}"}]),
        f"metadata.annotations[{ENGINES_ANNOTATION}][1]",
        "also declared differently at",
    ),
]


@pytest.mark.parametrize(
    ("case", "spec", "metadata", "path", "words"), MALFORMED, ids=[case[0] for case in MALFORMED]
)
def test_malformed_fields_become_problems(
    case: str, spec: dict[str, Any], metadata: Any, path: str, words: str
) -> None:
    obj: dict[str, Any] = {"apiVersion": "v1", "kind": "Pod", "spec": spec}
    if metadata is not None:
        obj["metadata"] = metadata
    workload = workload_of(obj)
    matching = [problem for problem in workload.problems if problem.path == path]
    assert matching, workload.problems
    assert any(words in problem.message for problem in matching), matching


def test_malformed_fields_keep_what_is_readable() -> None:
    spec = {
        "containers": [{"name": "a", "image": 5}, {"name": "b", "image": "registry.corp/b:1"}, "junk"],
        "volumes": [VOLUME],
    }
    workload = workload_of({"kind": "Pod", "spec": spec, "metadata": _engines("not json")})
    assert workload.images == (
        _c("spec.containers[1].image", "registry.corp/b:1", "b"),
        ImageUse(f"registry.corp/engines/m@{D[1]}", "spec.volumes[0].image.reference", "volume", "model"),
    )
    assert [problem.path for problem in workload.problems] == [
        "spec.containers[0].image",
        "spec.containers[2]",
        f"metadata.annotations[{ENGINES_ANNOTATION}]",
    ]


def test_conflicting_engine_declarations_keep_both() -> None:
    obj = _object(
        "Deployment",
        {"containers": [APP]},
        metadata=_engines([{"name": "m", "ref": f"registry.corp/engines/m@{D[3]}"}]),
        template_metadata=_engines([{"name": "m", "ref": ENGINE_REF}]),
    )
    workload = workload_of(obj)
    # Both refs are judged (a conflict must not hide either), and the conflict itself is a problem.
    assert [engine.reference for engine in workload.engines] == [
        ENGINE_REF,
        f"registry.corp/engines/m@{D[3]}",
    ]
    assert workload.problems == (
        Problem(
            f"metadata.annotations[{ENGINES_ANNOTATION}][0]",
            f"engine 'm' is also declared differently at {TSS.removesuffix('spec')}metadata.annotations"
            f"[{ENGINES_ANNOTATION}][0]",
        ),
    )


def test_annotation_engine_rules() -> None:
    spec = {
        "containers": [APP, {"name": "gpu", "image": "nvcr.io/nvidia/tensorrt:24.08-py3"}],
        "initContainers": [
            {"name": "fetch", "image": "busybox:1.36", "volumeMounts": [{"name": "model", "mountPath": "/m"}]}
        ],
        "volumes": [VOLUME, {"name": "unused", "image": {"reference": "quay.io/crio/artifact:v1"}}],
    }
    metadata = _engines(
        [
            {"name": "a", "ref": ENGINE_REF},
            {"name": "b", "ref": ENGINE_REF, "container": "fetch"},
            {"name": "model", "ref": VOLUME_REF},
        ]
    )
    workload = workload_of({"kind": "Pod", "metadata": metadata, "spec": spec})
    annotation = f"metadata.annotations[{ENGINES_ANNOTATION}]"
    assert workload.engines == (
        # mounted only by an init container; also named (with its own ref) by the annotation: one engine
        EngineUse(
            "model",
            VOLUME_REF,
            "spec.volumes[0].image.reference",
            "volume",
            ("fetch",),
            declared=True,
            readers=("spec.initContainers[0]",),
            templates=("spec",),
        ),
        # without `container`: every entry of `containers`, not init or ephemeral containers
        EngineUse(
            "a",
            ENGINE_REF,
            f"{annotation}[0]",
            "annotation",
            ("app", "gpu"),
            declared=True,
            readers=("spec.containers[0]", "spec.containers[1]"),
            templates=("spec",),
        ),
        EngineUse(
            "b",
            ENGINE_REF,
            f"{annotation}[1]",
            "annotation",
            ("fetch",),
            declared=True,
            readers=("spec.initContainers[0]",),
            templates=("spec",),
        ),
    )
    assert workload.problems == ()


# --- changed_since ------------------------------------------------------------------------------------


def _deployment(containers: list[dict[str, Any]], engines: list[dict[str, Any]] | None = None) -> Workload:
    template_metadata = _engines(engines) if engines is not None else None
    return workload_of(
        _object(
            "Deployment", {"containers": containers, "volumes": [VOLUME]}, template_metadata=template_metadata
        )
    )


def test_changed_since_keeps_only_new_or_changed_uses() -> None:
    a = {"name": "a", "image": "registry.corp/a:1", "volumeMounts": [{"name": "model", "mountPath": "/m"}]}
    b = {"name": "b", "image": "registry.corp/b:1"}
    old = _deployment([a, b], [{"name": "e", "ref": ENGINE_REF}])

    # one image changed: the engines that container runs are judged again (their toolchain rule reads it)
    new = _deployment([{**a, "image": "registry.corp/a:2"}, b], [{"name": "e", "ref": ENGINE_REF}])
    changed = changed_since(new, old)
    assert changed.images == (_c(f"{TSS}.containers[0].image", "registry.corp/a:2", "a"),)
    assert [engine.name for engine in changed.engines] == ["model", "e"]

    # only b changed, which runs the annotation's engine (every container) but does not mount the volume
    new = _deployment([a, {**b, "image": "registry.corp/b:2"}], [{"name": "e", "ref": ENGINE_REF}])
    assert [engine.name for engine in changed_since(new, old).engines] == ["e"]

    # labels alone change nothing that is judged
    assert changed_since(_deployment([a, b], [{"name": "e", "ref": ENGINE_REF}]), old).engines == ()

    # moving images between containers counts as a change for both
    swapped = _deployment(
        [{**b, "volumeMounts": a["volumeMounts"]}, {**a, "volumeMounts": []}],
        [{"name": "e", "ref": ENGINE_REF}],
    )
    changed = changed_since(swapped, old)
    assert [use.path for use in changed.images] == [
        f"{TSS}.containers[0].image",
        f"{TSS}.containers[1].image",
    ]
    # the engine volume is mounted by a different container now, and "all containers" changed order
    assert [engine.name for engine in changed.engines] == ["model", "e"]

    # an engine ref changed
    repinned = _deployment([a, b], [{"name": "e", "ref": f"registry.corp/engines/m@{D[3]}"}])
    changed = changed_since(repinned, old)
    assert changed.images == ()
    assert [(engine.name, engine.reference) for engine in changed.engines] == [
        ("e", f"registry.corp/engines/m@{D[3]}")
    ]


def _isvc(uri: str, *, env: bool = False, uris: bool = False, image: str | None = None) -> Workload:
    """An InferenceService naming its model ``uri`` in ``storageUri``, a container's ``STORAGE_URI`` or
    ``storageUris``; ``image``: the model container's runtime image (None: the ServingRuntime's)."""
    model: dict[str, Any] = {"modelFormat": {"name": "triton"}}
    if image is not None:
        model["image"] = image
    predictor: dict[str, Any] = {"model": model}
    if env:
        predictor["containers"] = [
            {"name": "kserve-container", "image": CHARLIE, "env": [{"name": "STORAGE_URI", "value": uri}]}
        ]
        del predictor["model"]
    elif uris:
        predictor["storageUris"] = [{"uri": uri, "mountPath": "/mnt/models"}]
    else:
        model["storageUri"] = uri
    obj = {
        "apiVersion": "serving.kserve.io/v1beta1",
        "kind": "InferenceService",
        "metadata": {"name": "isvc", "namespace": "prod"},
        "spec": {"predictor": predictor},
    }
    return workload_of(obj)


@pytest.mark.parametrize("where", ["storageUri", "env", "storageUris"])
def test_changed_since_judges_a_storage_uri_again_when_only_its_scheme_changed(where: str) -> None:
    # oci+native:// is an image volume, oci:// a modelcar container: the same reference at the same path,
    # run another way, so every rule for containers has it to judge (attack 29, finding 1)
    env, uris = where == "env", where == "storageUris"
    old = _isvc(f"oci+native://{VOLUME_REF}", env=env, uris=uris)
    new = _isvc(f"oci://{VOLUME_REF}", env=env, uris=uris)
    changed = changed_since(new, old)
    assert [(use.reference, use.field, use.prefix) for use in changed.images] == [
        (VOLUME_REF, "modelcar", "oci://")
    ]
    assert [engine.reference for engine in changed.engines] == [VOLUME_REF]
    assert changed_since(new, _isvc(f"oci://{VOLUME_REF}", env=env, uris=uris)).images == ()


def test_changed_since_judges_an_engine_again_when_what_its_rules_read_of_its_readers_changed() -> None:
    mount = {"name": "model", "mountPath": "/m"}
    a = {"name": "a", "image": "registry.corp/a:1", "volumeMounts": [mount]}
    old = _deployment([a])
    assert changed_since(_deployment([a]), old).engines == ()
    # renamed: an expression reads `engine.containers[*].name`
    assert [e.name for e in changed_since(_deployment([{**a, "name": "b"}]), old).engines] == ["model"]
    # moved from a regular container to an init container, which mounts the engine just the same
    obj = _object("Deployment", {"containers": [], "initContainers": [a], "volumes": [VOLUME]})
    assert [e.name for e in changed_since(workload_of(obj), old).engines] == ["model"]
    # placed on other nodes: an expression reads `engine.templates[*].nodeSelector`
    spec = {"containers": [a], "volumes": [VOLUME], "nodeSelector": {"nvidia.com/gpu.product": "H100"}}
    assert [e.name for e in changed_since(workload_of(_object("Deployment", spec)), old).engines] == ["model"]
    # the reader's image left out (the operator fills it in): the toolchain rule cannot compare it now
    runtime = _isvc(f"oci+native://{VOLUME_REF}", image=CHARLIE)
    defaulted = _isvc(f"oci+native://{VOLUME_REF}")
    assert changed_since(defaulted, runtime).images == ()
    assert [e.reference for e in changed_since(defaulted, runtime).engines] == [VOLUME_REF]


def test_changed_since_reports_only_new_problems() -> None:
    old = workload_of({"kind": "Pod", "spec": {"containers": [{"name": "a", "image": 5}]}})
    same = workload_of({"kind": "Pod", "spec": {"containers": [{"name": "a", "image": 5}]}})
    worse = workload_of({"kind": "Pod", "spec": {"containers": [{"name": "a", "image": 5}, {"name": "b"}]}})
    assert changed_since(same, old).problems == ()
    assert changed_since(worse, old).problems == (
        Problem("spec.containers[1].image", "the container has no image"),
    )


# --- iter_resources -------------------------------------------------------------------------------------


def test_iter_resources_passes_single_objects_and_skips_empty_documents() -> None:
    pod = {"kind": "Pod", "spec": {}}
    assert list(iter_resources(pod)) == [pod]
    assert list(iter_resources(None)) == []
    assert list(iter_resources({"kind": "List", "items": []})) == []
    assert list(iter_resources({"kind": "List"})) == []
    # A kind that merely ends in "List" but has no items is an ordinary object.
    odd = {"kind": "AllowList", "spec": {}}
    assert list(iter_resources(odd)) == [odd]
    assert list(iter_resources({"kind": "PodList", "items": [pod, pod]})) == [pod, pod]


@pytest.mark.parametrize(
    ("document", "location", "words"),
    [
        ("kind: Pod", "document", "found a string"),
        ([{"kind": "Pod"}], "document", "found a list"),
        ({"kind": "List", "items": {"a": 1}}, "document.items", "must be a list"),
        ({"kind": "List", "items": [{"kind": "Pod"}, 3]}, "document.items[1]", "found a number"),
        ({"kind": "List", "items": [None]}, "document.items[0]", "empty"),
    ],
)
def test_iter_resources_rejects_non_objects(document: Any, location: str, words: str) -> None:
    with pytest.raises(InputError) as caught:
        list(iter_resources(document))
    assert caught.value.location == location
    assert words in caught.value.message


def test_iter_resources_bounds_list_nesting() -> None:
    document: dict[str, Any] = {"kind": "Pod", "spec": {}}
    for _ in range(9):
        document = {"kind": "List", "items": [document]}
    with pytest.raises(InputError, match="nested more than 8 deep"):
        list(iter_resources(document))
    assert list(iter_resources(document["items"][0])) == [{"kind": "Pod", "spec": {}}]

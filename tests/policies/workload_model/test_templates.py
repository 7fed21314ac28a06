"""Extraction from the shipped operator kinds and from kinds trtguard does not know: every template, real
paths, engines per Pod, the operator-filled images and the delegating templates."""

from __future__ import annotations

import json
from typing import Any

import pytest

from policies.workload_model._extraction import ENGINES_ANNOTATION, Unjudged, Workload, extract
from policies.workload_model._podspec import EngineUse, ImageUse, Problem
from verifier.base._errors import InputError

ENGINE = "registry.corp/models/resnet@sha256:" + "e1" * 32
RUNTIME = "nvcr.io/nvidia/tensorrt:24.08-py3"


def workload(obj: dict[str, Any]) -> Workload:
    found = extract(obj)
    assert isinstance(found, Workload), found
    return found


def pod_template(*containers: dict[str, Any], annotations: dict[str, str] | None = None, **spec: Any) -> Any:
    metadata = {"annotations": annotations} if annotations else {}
    return {"metadata": metadata, "spec": {"containers": list(containers), **spec}}


def engine_volume(name: str = "engine") -> dict[str, Any]:
    return {"name": name, "image": {"reference": ENGINE}}


def test_ray_cluster_head_worker_groups_and_autoscaler_each_with_their_path() -> None:
    worker = pod_template(
        {"name": "ray-worker", "image": RUNTIME, "volumeMounts": [{"name": "engine", "mountPath": "/m"}]},
        volumes=[engine_volume()],
    )
    obj = {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": {"name": "rc"},
        "spec": {
            "headGroupSpec": {
                "template": pod_template({"name": "ray-head", "image": "rayproject/ray:2.52.0"})
            },
            "workerGroupSpecs": [
                {
                    "groupName": "cpu",
                    "template": pod_template({"name": "w", "image": "rayproject/ray:2.52.0"}),
                },
                {"groupName": "gpu", "template": worker},
            ],
            "autoscalerOptions": {"image": "rayproject/ray:2.52.0-autoscaler"},
        },
    }
    found = workload(obj)
    head, workers = "spec.headGroupSpec.template.spec", "spec.workerGroupSpecs"
    assert found.images == (
        ImageUse("rayproject/ray:2.52.0", f"{head}.containers[0].image", "container", "ray-head"),
        ImageUse(
            "rayproject/ray:2.52.0", f"{workers}[0].template.spec.containers[0].image", "container", "w"
        ),
        ImageUse(RUNTIME, f"{workers}[1].template.spec.containers[0].image", "container", "ray-worker"),
        ImageUse(ENGINE, f"{workers}[1].template.spec.volumes[0].image.reference", "volume", "engine"),
        ImageUse("rayproject/ray:2.52.0-autoscaler", "spec.autoscalerOptions.image", "container", None),
    )
    # The engine runs in the worker group that mounts it, not in the head.
    assert found.engines == (
        EngineUse(
            "engine",
            ENGINE,
            f"{workers}[1].template.spec.volumes[0].image.reference",
            "volume",
            ("ray-worker",),
            readers=(f"{workers}[1].template.spec.containers[0]",),
            templates=(f"{workers}[1].template",),
        ),
    )
    assert found.spec_path == "spec" and found.problems == () and found.notes == ()
    # Every template with its role; the autoscaler is a container of the head's Pods.
    assert [(t.path, t.role) for t in found.templates] == [
        ("spec.headGroupSpec.template", "head"),
        (f"{workers}[0].template", "worker group cpu"),
        (f"{workers}[1].template", "worker group gpu"),
    ]
    assert [c.path for c in found.templates[0].containers] == [
        f"{head}.containers[0]",
        "spec.autoscalerOptions",
    ]


def test_mpijob_replica_types_and_leaderworkerset_roles() -> None:
    mpi = workload(
        {
            "apiVersion": "kubeflow.org/v2beta1",
            "kind": "MPIJob",
            "metadata": {"name": "pi"},
            "spec": {
                "mpiReplicaSpecs": {
                    "Launcher": {
                        "template": pod_template({"name": "launcher", "image": "mpioperator/mpi-pi"})
                    },
                    "Worker": {"replicas": 2, "template": pod_template({"name": "worker", "image": RUNTIME})},
                }
            },
        }
    )
    assert [(u.path, u.reference) for u in mpi.images] == [
        ("spec.mpiReplicaSpecs.Launcher.template.spec.containers[0].image", "mpioperator/mpi-pi"),
        ("spec.mpiReplicaSpecs.Worker.template.spec.containers[0].image", RUNTIME),
    ]
    lws = workload(
        {
            "apiVersion": "leaderworkerset.x-k8s.io/v1",
            "kind": "LeaderWorkerSet",
            "metadata": {"name": "vllm"},
            "spec": {
                "leaderWorkerTemplate": {
                    "leaderTemplate": pod_template({"name": "leader", "image": "vllm/vllm-openai:v0.8"}),
                    "workerTemplate": pod_template({"name": "worker", "image": "vllm/vllm-openai:v0.8"}),
                }
            },
        }
    )
    assert [u.path for u in lws.images] == [
        "spec.leaderWorkerTemplate.leaderTemplate.spec.containers[0].image",
        "spec.leaderWorkerTemplate.workerTemplate.spec.containers[0].image",
    ]


def test_engines_are_declared_on_the_pod_template_that_runs_them() -> None:
    annotation = json.dumps([{"name": "resnet", "ref": ENGINE}])
    obj: dict[str, Any] = {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "metadata": {"name": "vllm"},
        "spec": {
            "leaderWorkerTemplate": {
                "leaderTemplate": pod_template({"name": "leader", "image": RUNTIME}),
                "workerTemplate": pod_template(
                    {"name": "worker", "image": RUNTIME}, annotations={ENGINES_ANNOTATION: annotation}
                ),
            }
        },
    }
    path = f"spec.leaderWorkerTemplate.workerTemplate.metadata.annotations[{ENGINES_ANNOTATION}][0]"
    assert workload(obj).engines == (
        EngineUse(
            "resnet",
            ENGINE,
            path,
            "annotation",
            ("worker",),
            declared=True,
            readers=("spec.leaderWorkerTemplate.workerTemplate.spec.containers[0]",),
            templates=("spec.leaderWorkerTemplate.workerTemplate",),
        ),
    )
    # On the object itself the declaration reaches no Pod: a problem that says where it belongs.
    obj["metadata"]["annotations"] = {ENGINES_ANNOTATION: annotation}
    [problem] = workload(obj).problems
    assert problem.path == f"metadata.annotations[{ENGINES_ANNOTATION}]"
    assert "leaderTemplate.metadata.annotations" in problem.message
    assert "workerTemplate.metadata.annotations" in problem.message


def isvc(predictor: dict[str, Any], **metadata: Any) -> dict[str, Any]:
    return {
        "apiVersion": "serving.kserve.io/v1beta1",
        "kind": "InferenceService",
        "metadata": {"name": "m", **metadata},
        "spec": {"predictor": predictor},
    }


def test_kserve_model_containers_and_oci_storage_uris() -> None:
    found = workload(
        isvc(
            {
                "model": {
                    "modelFormat": {"name": "tensorrt"},
                    "image": RUNTIME,
                    "storageUri": f"oci://{ENGINE}",
                },
                "storageUris": [
                    {"uri": f"oci+native://{ENGINE}", "mountPath": "/extra"},
                    {"uri": "s3://b/m"},
                ],
                "annotations": {ENGINES_ANNOTATION: json.dumps([{"name": "plan", "ref": ENGINE}])},
            }
        )
    )
    assert found.images == (
        ImageUse(RUNTIME, "spec.predictor.model.image", "container", None),
        # A modelcar runs the image as a container; oci+native mounts it as an image volume.
        ImageUse(ENGINE, "spec.predictor.model.storageUri", "modelcar", None, "oci://"),
        ImageUse(ENGINE, "spec.predictor.storageUris[0].uri", "volume", None, "oci+native://"),
    )
    assert [(e.name, e.path, e.source) for e in found.engines] == [
        ("model.storageUri", "spec.predictor.model.storageUri", "uri"),
        ("storageUris[0].uri", "spec.predictor.storageUris[0].uri", "uri"),
        ("plan", f"spec.predictor.annotations[{ENGINES_ANNOTATION}][0]", "annotation"),
    ]


def test_kserve_models_whose_image_the_runtime_supplies_are_said_so() -> None:
    plain = extract(isvc({"model": {"modelFormat": {"name": "sklearn"}, "storageUri": "gs://bucket/model"}}))
    assert isinstance(plain, Unjudged)
    assert "the operator fills in the image of spec.predictor.model" in plain.reason
    # With an engine declared there is something to judge; the note says what was not named.
    declared = workload(
        isvc(
            {"model": {"modelFormat": {"name": "tensorrt"}}},
            annotations={ENGINES_ANNOTATION: json.dumps([{"name": "plan", "ref": ENGINE}])},
        )
    )
    assert [e.path for e in declared.engines] == [f"metadata.annotations[{ENGINES_ANNOTATION}][0]"]
    assert declared.notes == (
        "the operator fills in the image of spec.predictor.model; it is not named here",
    )


def storage_uri(value: Any, name: str = "STORAGE_URI") -> dict[str, Any]:
    return {"name": name, "value": value}


def test_a_kserve_containers_storage_uri_variable_is_a_model_storage_uri() -> None:
    """Issue 28 review, F1: KServe fetches a custom container's STORAGE_URI as a storageUri, so each one, on
    every KServe pod spec, is an engine source (not an image found outside the templates)."""
    env = [{"name": "A", "value": "1"}, storage_uri(f"oci://{ENGINE}")]
    custom = {"name": "kserve-container", "image": RUNTIME, "env": env}
    obj = isvc(
        {
            "containers": [custom],
            # storageUri and STORAGE_URI both set: KServe takes one, trtguard judges both
            "model": {
                "image": RUNTIME,
                "storageUri": f"oci://{ENGINE}",
                "env": [storage_uri(f"oci+native://{ENGINE}")],
            },
            "workerSpec": {"containers": [{"name": "w", "image": RUNTIME, "env": [storage_uri("s3://b/m")]}]},
        }
    )
    obj["spec"]["transformer"] = {"containers": [{"image": RUNTIME, "env": [storage_uri(f"oci://{ENGINE}")]}]}
    obj["spec"]["explainer"] = {"containers": [{"image": RUNTIME, "env": [storage_uri(f"oci://{ENGINE}")]}]}
    found = workload(obj)
    assert found.notes == () and found.problems == ()
    uris = [(u.path, u.field) for u in found.images if u.reference == ENGINE]
    assert uris == [
        ("spec.predictor.containers[0].env[1].value", "modelcar"),
        ("spec.predictor.model.env[0].value", "volume"),
        ("spec.predictor.model.storageUri", "modelcar"),
        ("spec.transformer.containers[0].env[0].value", "modelcar"),
        ("spec.explainer.containers[0].env[0].value", "modelcar"),
    ]
    # Read as a storageUri is: by the component's regular containers (and a predictor's workers).
    predictor = (
        "spec.predictor.containers[0]",
        "spec.predictor.model",
        "spec.predictor.workerSpec.containers[0]",
    )
    assert [(e.name, e.path, e.source, e.readers) for e in found.engines] == [
        ("containers[0].env[1].value", "spec.predictor.containers[0].env[1].value", "uri", predictor),
        ("model.env[0].value", "spec.predictor.model.env[0].value", "uri", predictor),
        ("model.storageUri", "spec.predictor.model.storageUri", "uri", predictor),
        (
            "containers[0].env[0].value",
            "spec.transformer.containers[0].env[0].value",
            "uri",
            ("spec.transformer.containers[0]",),
        ),
        (
            "containers[0].env[0].value",
            "spec.explainer.containers[0].env[0].value",
            "uri",
            ("spec.explainer.containers[0]",),
        ),
    ]


def test_a_kserve_runtimes_storage_uri_variable_is_read_too() -> None:
    # KServe merges a ServingRuntime's variables into the model container of every InferenceService on it.
    runtime = {
        "apiVersion": "serving.kserve.io/v1alpha1",
        "kind": "ServingRuntime",
        "metadata": {"name": "triton"},
        "spec": {
            "containers": [
                {"name": "kserve-container", "image": RUNTIME, "env": [storage_uri(f"oci://{ENGINE}")]}
            ]
        },
    }
    [engine] = workload(runtime).engines
    assert (engine.path, engine.readers) == ("spec.containers[0].env[0].value", ("spec.containers[0]",))


def test_other_variables_and_other_spellings_are_no_storage_uri() -> None:
    # Kubernetes and KServe match the name exactly: `storage_uri` is another variable, its value an image
    # found outside the templates (judged as a container image, with a note); an init container's is not
    # read by KServe either.
    found = workload(
        isvc(
            {
                "containers": [
                    {"name": "c", "image": RUNTIME, "env": [storage_uri(f"oci://{ENGINE}", "storage_uri")]}
                ],
                "initContainers": [{"name": "i", "image": RUNTIME, "env": [storage_uri(f"oci://{ENGINE}")]}],
            }
        )
    )
    assert found.engines == ()
    assert [(u.path, u.field) for u in found.images if u.reference == ENGINE] == [
        ("spec.predictor.containers[0].env[0].value", "container"),
        ("spec.predictor.initContainers[0].env[0].value", "container"),
    ]
    # Outside KServe's pod specs the variable means nothing.
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "c", "image": RUNTIME, "env": [storage_uri(f"oci://{ENGINE}")]}]},
    }
    assert workload(pod).engines == ()


@pytest.mark.parametrize(
    ("env", "problem"),
    [
        (
            [{"name": "STORAGE_URI", "valueFrom": {"secretKeyRef": {"name": "s", "key": "uri"}}}],
            Problem(
                "spec.predictor.containers[0].env[0].valueFrom",
                "STORAGE_URI names the model the operator fetches, but valueFrom takes it from a ConfigMap, "
                "Secret or field this object does not show; write the storage URI as value",
            ),
        ),
        (
            [storage_uri(["oci://x"])],
            Problem(
                "spec.predictor.containers[0].env[0].value", "a storage URI must be a string, found a list"
            ),
        ),
        (
            [storage_uri("oci://")],
            Problem("spec.predictor.containers[0].env[0].value", "the OCI storage URI names no image"),
        ),
        (
            {"STORAGE_URI": f"oci://{ENGINE}"},
            Problem("spec.predictor.containers[0].env", "env must be a list, found an object"),
        ),
        (
            ["STORAGE_URI=oci://x"],
            Problem(
                "spec.predictor.containers[0].env[0]",
                "an environment variable must be an object, found a string",
            ),
        ),
    ],
)
def test_a_storage_uri_variable_that_cannot_be_judged_is_a_problem(env: Any, problem: Problem) -> None:
    found = workload(isvc({"containers": [{"name": "kserve-container", "image": RUNTIME, "env": env}]}))
    assert found.engines == () and problem in found.problems


def test_an_empty_storage_uri_variable_names_no_model() -> None:
    found = workload(
        isvc({"containers": [{"name": "kserve-container", "image": RUNTIME, "env": [storage_uri("")]}]})
    )
    assert (found.engines, found.problems) == ((), ())


def test_a_rollout_that_takes_its_template_from_a_deployment() -> None:
    rollout: dict[str, Any] = {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "Rollout",
        "metadata": {"name": "r"},
        "spec": {},
    }
    with pytest.raises(InputError, match=r"none of its pod templates \(spec.template\)"):
        extract(rollout)
    rollout["spec"]["workloadRef"] = {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}
    found = extract(rollout)
    assert isinstance(found, Unjudged)
    assert found.reason == "its Pods come from the object spec.workloadRef names (checked on its own)"


def test_images_outside_a_shipped_kinds_templates_are_judged_with_a_note() -> None:
    found = workload(
        {
            "apiVersion": "batch.volcano.sh/v1alpha1",
            "kind": "Job",
            "metadata": {"name": "v"},
            "spec": {
                "tasks": [{"name": "t", "template": pod_template({"name": "c", "image": RUNTIME})}],
                "plugins": {"sidecar": {"image": "evil.example/miner:1"}},
            },
        }
    )
    assert [(u.path, u.field) for u in found.images] == [
        ("spec.tasks[0].template.spec.containers[0].image", "container"),
        ("spec.plugins.sidecar.image", "container"),
    ]
    assert found.notes == (
        "1 image found outside the pod templates trtguard knows for Job.batch.volcano.sh: "
        "evil.example/miner:1 at spec.plugins.sidecar.image",
    )


def test_a_kind_trtguard_does_not_know_is_searched_whole() -> None:
    engine_mount = {"name": "engine", "mountPath": "/m"}
    found = workload(
        {
            "apiVersion": "example.com/v1",
            "kind": "InferenceJob",
            "metadata": {"name": "x", "annotations": {ENGINES_ANNOTATION: "ignored"}},
            "spec": {
                "runner": {
                    "template": pod_template(
                        {"name": "server", "image": RUNTIME, "volumeMounts": [engine_mount]},
                        volumes=[engine_volume()],
                    )
                },
                "modelUri": f"oci://{ENGINE}",
            },
            "status": {"image": "not-asked-for:1"},
        }
    )
    spec = "spec.runner.template.spec"
    assert not found.known_kind
    assert [(u.path, u.reference) for u in found.images] == [
        (f"{spec}.containers[0].image", RUNTIME),
        (f"{spec}.volumes[0].image.reference", ENGINE),
        ("spec.modelUri", ENGINE),
    ]
    assert [e.path for e in found.engines] == [f"{spec}.volumes[0].image.reference"]
    assert found.problems == ()


def test_kinds_are_known_by_group_and_version() -> None:
    volcano_cron = {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "CronJob",
        "metadata": {"name": "c"},
        "spec": {
            "jobTemplate": {
                "spec": {"tasks": [{"template": pod_template({"name": "b", "image": "busybox"})}]}
            }
        },
    }
    assert [u.path for u in workload(volcano_cron).images] == [
        "spec.jobTemplate.spec.tasks[0].template.spec.containers[0].image"
    ]
    old = isvc({})
    old["apiVersion"] = "serving.kserve.io/v1alpha2"
    old["spec"] = {"default": {"predictor": {"tensorflow": {"storageUri": "gs://b/m"}}}}
    found = extract(old)
    assert isinstance(found, Unjudged)
    assert found.reason == (
        "trtguard knows InferenceService.serving.kserve.io only at v1beta1, not serving.kserve.io/v1alpha2 "
        "and names no container image"
    )


@pytest.mark.parametrize(
    ("spec", "problem"),
    [
        (
            {"headGroupSpec": {"template": "x"}},
            Problem("spec.headGroupSpec.template", "must be an object, found a string"),
        ),
        (
            {"headGroupSpec": {"template": {"metadata": {}}}},
            Problem("spec.headGroupSpec.template.spec", "the pod template has no spec"),
        ),
        (
            {"headGroupSpec": {"template": {"spec": {"containers": [{"name": "h", "image": 5}]}}}},
            Problem(
                "spec.headGroupSpec.template.spec.containers[0].image",
                "image must be a string, found a number",
            ),
        ),
    ],
)
def test_malformed_templates_of_a_shipped_kind_are_problems(spec: dict[str, Any], problem: Problem) -> None:
    found = workload(
        {"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": {"name": "r"}, "spec": spec}
    )
    assert problem in found.problems

"""The workload model (policies.workload_model._pods): every template with its path and role, containers by
path, engines
with the containers that can read them, and the limits of one workload."""

from __future__ import annotations

from typing import Any

import pytest

from policies.workload_model._extraction import Workload, extract
from policies.workload_model._pods import (
    MAX_CONTAINERS,
    MAX_ENGINES,
    MAX_IMAGES,
    MAX_PROBLEMS,
    MAX_TEMPLATES,
    MAX_VOLUMES,
)
from verifier.base._errors import InputError

RUNTIME = "nvcr.io/nvidia/tensorrt@sha256:" + "a1" * 32
ENGINE = "registry.example.com/models/e@sha256:" + "e1" * 32


def workload(obj: dict[str, Any]) -> Workload:
    found = extract(obj)
    assert isinstance(found, Workload), found
    return found


def spec(*containers: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {
        "containers": list(containers),
        "volumes": [{"name": "engine", "image": {"reference": ENGINE}}],
        **extra,
    }


def server(name: str = "server", image: str = RUNTIME, *mounts: str) -> dict[str, Any]:
    return {"name": name, "image": image, "volumeMounts": [{"name": m, "mountPath": f"/{m}"} for m in mounts]}


def test_a_volcano_job_has_one_template_per_task_each_with_its_node_selection() -> None:
    tasks = [
        {
            "name": "infer",
            "template": {"spec": spec(server("server", RUNTIME, "engine"), nodeSelector={"a": "1"})},
        },
        {"template": {"spec": spec(server("server", RUNTIME, "engine"))}},
    ]
    found = workload(
        {
            "apiVersion": "batch.volcano.sh/v1alpha1",
            "kind": "Job",
            "metadata": {"name": "j"},
            "spec": {"tasks": tasks},
        }
    )
    assert [(t.path, t.role) for t in found.templates] == [
        ("spec.tasks[0].template", "task infer"),
        ("spec.tasks[1].template", "task [1]"),  # a task without a name is named by its place
    ]
    first, second = (t.selection for t in found.templates)
    assert [term.path for term in first.terms] == ["spec.tasks[0].template.spec.nodeSelector"]
    assert first.terms[0].texts("a") == frozenset({"1"}) and second.terms[0].texts("a") is None
    # Each task's engine belongs to that task, read by that task's `server` alone.
    assert [(e.templates, e.readers) for e in found.engines] == [
        (("spec.tasks[0].template",), ("spec.tasks[0].template.spec.containers[0]",)),
        (("spec.tasks[1].template",), ("spec.tasks[1].template.spec.containers[0]",)),
    ]


def test_containers_of_the_same_name_in_two_templates_are_two_containers() -> None:
    leader = {"spec": spec(server("server", RUNTIME, "engine"))}
    worker = {"spec": spec(server("server", "docker.io/library/nginx:1"))}  # mounts nothing
    found = workload(
        {
            "apiVersion": "leaderworkerset.x-k8s.io/v1",
            "kind": "LeaderWorkerSet",
            "metadata": {"name": "l"},
            "spec": {"leaderWorkerTemplate": {"leaderTemplate": leader, "workerTemplate": worker}},
        }
    )
    [use] = found.engines
    [reader] = found.readers(use)
    assert reader.path == "spec.leaderWorkerTemplate.leaderTemplate.spec.containers[0]"
    assert reader.image is not None and reader.image.reference == RUNTIME
    assert [t.role for t in found.templates_of(use)] == ["leader"]


def _isvc(predictor: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "serving.kserve.io/v1beta1",
        "kind": "InferenceService",
        "metadata": {"name": "i"},
        "spec": {"predictor": predictor},
    }


def test_a_kserve_model_container_without_a_name_reads_its_model() -> None:
    found = workload(
        _isvc(
            {
                "containers": [{"name": "helper", "image": RUNTIME}],
                "model": {
                    "modelFormat": {"name": "tensorrt"},
                    "image": "x/y@sha256:" + "0" * 64,
                    "storageUri": f"oci+native://{ENGINE}",
                },
            }
        )
    )
    [use] = found.engines
    assert use.source == "uri"
    assert use.readers == ("spec.predictor.containers[0]", "spec.predictor.model")
    assert use.containers == ("helper",)  # names, for the record: the model container has none


def test_a_kserve_predictors_workers_read_its_model_and_are_placed_on_their_own() -> None:
    found = workload(
        _isvc(
            {
                "model": {"modelFormat": {"name": "tensorrt"}, "storageUri": f"oci://{ENGINE}"},
                "workerSpec": {
                    "containers": [{"name": "worker", "image": RUNTIME}],
                    "nodeSelector": {"a": "1"},
                },
            }
        )
    )
    [use] = found.engines
    assert use.templates == ("spec.predictor", "spec.predictor.workerSpec")
    assert use.readers == ("spec.predictor.model", "spec.predictor.workerSpec.containers[0]")
    assert [t.role for t in found.templates_of(use)] == ["predictor", "predictor workers"]


def test_kuberays_autoscaler_is_a_container_of_the_head_and_mounts_its_volumes() -> None:
    head = {"spec": spec(server("ray-head", RUNTIME, "engine"))}
    found = workload(
        {
            "apiVersion": "ray.io/v1",
            "kind": "RayCluster",
            "metadata": {"name": "r"},
            "spec": {
                "headGroupSpec": {"template": head},
                "autoscalerOptions": {
                    "image": "rayproject/ray:2.52.0",
                    "volumeMounts": [{"name": "engine", "mountPath": "/m"}],
                },
            },
        }
    )
    [use] = found.engines
    assert use.readers == ("spec.headGroupSpec.template.spec.containers[0]", "spec.autoscalerOptions")
    assert [c.template for c in found.readers(use)] == ["spec.headGroupSpec.template"] * 2


def test_what_a_reader_can_write_reaches_every_container_that_mounts_it() -> None:
    found = workload(
        {
            "kind": "Pod",
            "metadata": {"name": "p"},
            "spec": {
                "initContainers": [
                    {
                        "name": "sidecar",
                        "image": "s:1",
                        "restartPolicy": "Always",
                        "volumeMounts": [{"name": "b", "mountPath": "/b"}],
                    }
                ],
                "containers": [
                    server("server", RUNTIME, "engine", "a"),  # writes a
                    {
                        "name": "relay",
                        "image": "r:1",
                        "volumeMounts": [{"name": "a", "mountPath": "/a"}, {"name": "b", "mountPath": "/b"}],
                    },
                    {
                        "name": "config-reader",
                        "image": "c:1",
                        "volumeMounts": [{"name": "config", "mountPath": "/c"}],
                    },
                    {"name": "frozen", "image": "f:1", "volumeMounts": [{"name": "ro", "mountPath": "/ro"}]},
                ],
                "ephemeralContainers": [
                    {"name": "debug", "image": "d:1", "volumeMounts": [{"name": "b", "mountPath": "/b"}]}
                ],
                "volumes": [
                    {"name": "engine", "image": {"reference": ENGINE}},
                    {"name": "a", "emptyDir": {}},
                    {"name": "b", "emptyDir": {}},
                    {"name": "config", "configMap": {"name": "c"}},
                    {"name": "ro", "persistentVolumeClaim": {"claimName": "x", "readOnly": True}},
                ],
            },
        }
    )
    [use] = found.engines
    # server → a → relay → b → sidecar and debug; nothing reaches config-reader or frozen
    assert use.containers == ("server", "relay", "sidecar", "debug")


@pytest.mark.parametrize(
    ("what", "limit", "build"),
    [
        (
            "containers",
            MAX_CONTAINERS,
            lambda n: {
                "kind": "Pod",
                "spec": {"containers": [{"name": f"c{i}", "image": "i:1"} for i in range(n)]},
            },
        ),
        (
            "volumes",
            MAX_VOLUMES,
            lambda n: {
                "kind": "Pod",
                "spec": {
                    "containers": [{"name": "c", "image": "i:1"}],
                    "volumes": [{"name": f"v{i}", "emptyDir": {}} for i in range(n)],
                },
            },
        ),
        (
            "engine candidates",
            MAX_ENGINES,
            lambda n: {
                "kind": "Pod",
                "spec": {
                    "containers": [
                        {
                            "name": "c",
                            "image": "i:1",
                            "volumeMounts": [{"name": f"v{i}", "mountPath": f"/{i}"} for i in range(n)],
                        }
                    ],
                    "volumes": [{"name": f"v{i}", "image": {"reference": ENGINE}} for i in range(n)],
                },
            },
        ),
        (
            "pod templates",
            MAX_TEMPLATES,
            lambda n: {
                "apiVersion": "batch.volcano.sh/v1alpha1",
                "kind": "Job",
                "spec": {
                    "tasks": [{"template": {"spec": {"containers": [{"name": "c", "image": "i:1"}]}}}] * n
                },
            },
        ),
        (
            "pod templates",
            MAX_TEMPLATES,
            lambda n: {
                "apiVersion": "x.example/v1",
                "kind": "Unknown",
                "spec": {"shards": [{"spec": {"containers": [{"name": "c", "image": "i:1"}]}}] * n},
            },
        ),
        # images outside the templates of a shipped kind, and malformed fields, are bounded too
        (
            "images",
            MAX_IMAGES,
            lambda n: {
                "apiVersion": "ray.io/v1",
                "kind": "RayCluster",
                "spec": {
                    "headGroupSpec": {"template": {"spec": {"containers": [{"name": "c", "image": "i:1"}]}}},
                    "extra": [{"image": f"r/x:{i}"} for i in range(n - 1)],
                },
            },
        ),
        (
            "malformed fields",
            MAX_PROBLEMS,
            lambda n: {
                "kind": "Pod",
                "spec": {"containers": [{"name": "c", "image": "i:1"}], "volumes": [7] * n},
            },
        ),
    ],
)
def test_a_workload_over_a_limit_cannot_be_read(what: str, limit: int, build: Any) -> None:
    assert isinstance(extract({"metadata": {"name": "w"}, **build(limit)}), Workload)
    with pytest.raises(InputError) as caught:
        extract({"metadata": {"name": "w"}, **build(limit + 1)})
    assert f"more than {limit} {what}" in caught.value.message
    assert caught.value.hint == "split the workload into several objects"


def test_storage_that_outlives_a_pod_reaches_the_other_templates() -> None:
    # The leader copies the engine into a claim the workers mount: they can read it, and run it elsewhere.
    claim = {"name": "models", "persistentVolumeClaim": {"claimName": "shared-models"}}
    leader = {
        "spec": {
            **spec(server("server", RUNTIME, "engine", "models")),
            "volumes": [spec()["volumes"][0], claim],
        }
    }
    worker_claim = {
        "name": "weights",
        "persistentVolumeClaim": {"claimName": "shared-models", "readOnly": True},
    }
    worker = {"spec": {"containers": [server("worker", "r/other:1", "weights")], "volumes": [worker_claim]}}
    obj = {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "metadata": {"name": "l"},
        "spec": {"leaderWorkerTemplate": {"leaderTemplate": leader, "workerTemplate": worker}},
    }
    [use] = workload(obj).engines
    lws = "spec.leaderWorkerTemplate"
    assert use.readers == (
        f"{lws}.leaderTemplate.spec.containers[0]",
        f"{lws}.workerTemplate.spec.containers[0]",
    )
    assert use.templates == (f"{lws}.leaderTemplate", f"{lws}.workerTemplate")
    # The same volume name in two templates without shared storage is two volumes.
    worker["spec"]["volumes"] = [{"name": "models", "emptyDir": {}}]
    worker["spec"]["containers"][0]["volumeMounts"][0]["name"] = "models"
    assert workload(obj).engines[0].readers == (f"{lws}.leaderTemplate.spec.containers[0]",)
    # A host path is shared storage too, and so is a claim the leader only attaches read-only… for it alone.
    leader["spec"]["volumes"][1] = {"name": "models", "hostPath": {"path": "/var/models/"}}
    worker["spec"]["volumes"] = [{"name": "models", "hostPath": {"path": "/var/models"}}]
    assert len(workload(obj).engines[0].readers) == 2


def test_a_raw_block_device_is_a_channel_too() -> None:
    pvc = {"name": "block", "persistentVolumeClaim": {"claimName": "raw"}}
    found = workload(
        {
            "kind": "Pod",
            "metadata": {"name": "p"},
            "spec": {
                "containers": [
                    {
                        **server("server", RUNTIME, "engine"),
                        "volumeDevices": [{"name": "block", "devicePath": "/dev/x"}],
                    },
                    {
                        "name": "reader",
                        "image": "r/other:1",
                        "volumeDevices": [{"name": "block", "devicePath": "/dev/x"}],
                    },
                ],
                "volumes": [*spec()["volumes"], pvc],
            },
        }
    )
    assert found.engines[0].containers == ("server", "reader")

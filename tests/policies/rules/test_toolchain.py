"""policies.rules._toolchain: allowed builder images and sameAsRuntimeImage."""

from __future__ import annotations

import json
from typing import Any

from tests.policies.conftest import OTHER_RUNTIME, RUNTIME, Material, pod
from tests.policies.evaluation import engine_for, evaluate, models_policy


def test_toolchain_same_as_runtime_and_allowed_list(material: Material) -> None:
    rules_yaml = "      toolchain: {sameAsRuntimeImage: true, allowed: ['nvcr.io/nvidia/tensorrt:*']}\n"
    ref = material.engine("e")
    engine = engine_for(material, models_policy(rules_yaml), keys=("build-signer",))
    assert evaluate(engine, pod(engine=ref)).allowed
    mismatch = evaluate(engine, pod(images=(OTHER_RUNTIME,), engine=ref))
    assert "container 'c0' (spec.containers[0].image) runs nvcr.io/nvidia/tensorrt@sha256:b2" in (
        mismatch.violations[0].message
    )
    unknown = evaluate(engine, pod(images=("nvcr.io/nvidia/tensorrt:24.05",), engine=ref))
    assert unknown.violations[0].error  # cannot be compared offline: onError decides, and it says so
    # One container differs (a violation whatever the other runs), the other cannot be resolved (onError).
    mixed = evaluate(engine, pod(images=(OTHER_RUNTIME, "nvcr.io/nvidia/tensorrt:24.05"), engine=ref))
    differs, unresolved = mixed.violations
    assert not differs.error
    assert "container 'c0'" in differs.message
    assert unresolved.error
    assert "nvcr.io/nvidia/tensorrt:24.05" in unresolved.message
    outsider = material.engine(
        "x",
        toolchain={
            "image": "registry.example.com/trt@sha256:" + "a1" * 32,
            "tensorrt_version": "10.5.0.18",
            "cuda_version": "12.6.3",
        },
    )
    decision = evaluate(
        engine_for(material, models_policy(rules_yaml), keys=("build-signer",)), pod(engine=outsider)
    )
    assert any("not an allowed toolchain" in v.message for v in decision.violations)


SAME_TOOLCHAIN = "      toolchain: {sameAsRuntimeImage: true}\n"


def test_same_toolchain_needs_every_container_that_mounts_the_engine(material: Material) -> None:
    ref = material.engine("e")
    engine = engine_for(material, models_policy(SAME_TOOLCHAIN), keys=("build-signer",))
    # One container runs the builder image, the other loads the same engine in another TensorRT image.
    decision = evaluate(engine, pod(images=(RUNTIME, OTHER_RUNTIME), engine=ref))
    [violation] = decision.violations
    assert violation.rule == "models.rules.toolchain"
    assert "container 'c1'" in violation.message
    assert not decision.allowed


def _with_init(obj: dict[str, Any], init: dict[str, Any]) -> dict[str, Any]:
    obj["spec"]["initContainers"] = [init]
    return obj


def test_same_toolchain_counts_an_init_container_that_mounts_the_engine(material: Material) -> None:
    ref = material.engine("e")
    engine = engine_for(material, models_policy(SAME_TOOLCHAIN), keys=("build-signer",))
    # The init container runs the builder image, the serving container does not (and mounts the engine).
    obj = pod(images=(OTHER_RUNTIME,), engine=ref)
    init = {"name": "warm", "image": RUNTIME, "volumeMounts": [{"name": "engine", "mountPath": "/m"}]}
    decision = evaluate(engine, _with_init(obj, init))
    assert [v.message for v in decision.violations if "container 'c0'" in v.message]
    assert not decision.allowed


def test_same_toolchain_follows_a_copy_through_a_shared_volume(material: Material) -> None:
    ref = material.engine("e")
    engine = engine_for(material, models_policy(SAME_TOOLCHAIN), keys=("build-signer",))
    # An init container in the builder image copies the engine into an emptyDir; the serving container
    # never mounts the engine volume but loads the copy in another TensorRT image.
    obj = pod(images=(OTHER_RUNTIME,))
    obj["spec"]["volumes"] = [
        {"name": "engine", "image": {"reference": ref}},
        {"name": "copy", "emptyDir": {}},
    ]
    obj["spec"]["containers"][0]["volumeMounts"] = [{"name": "copy", "mountPath": "/models"}]
    init = {
        "name": "copy-engine",
        "image": RUNTIME,
        "volumeMounts": [{"name": "engine", "mountPath": "/in"}, {"name": "copy", "mountPath": "/out"}],
    }
    decision = evaluate(engine, _with_init(obj, init))
    [violation] = decision.violations
    assert "container 'c0'" in violation.message
    # The same copy into a container that runs the builder image is admitted.
    obj["spec"]["containers"][0]["image"] = RUNTIME
    assert evaluate(engine, obj).allowed


def test_same_toolchain_with_no_container_running_the_engine_is_a_violation(material: Material) -> None:
    ref = material.engine("e")
    engine = engine_for(material, models_policy(SAME_TOOLCHAIN), keys=("build-signer",))
    obj = pod()
    obj["metadata"]["annotations"] = {"trtguard.dev/engines": json.dumps([{"name": "e", "ref": ref}])}
    obj["spec"]["containers"] = [{"name": "c0", "image": RUNTIME}]
    assert evaluate(engine, obj).allowed  # the annotation's default users: every regular container
    obj["spec"]["containers"][0]["image"] = "nvcr.io/nvidia/tensorrt@sha256:zz"
    [violation] = evaluate(engine, obj).violations
    assert "invalid image reference" in violation.message  # an unparsable image is never skipped


def test_same_toolchain_follows_a_copy_by_a_regular_container(material: Material) -> None:
    # Issue 24, item 4: only init containers counted as copiers; a regular container that reads the engine
    # and mounts a writable emptyDir hands it on just the same, even to one that mounts it read-only.
    ref = material.engine("e")
    engine = engine_for(material, models_policy(SAME_TOOLCHAIN), keys=("build-signer",))
    obj = pod(images=(RUNTIME, OTHER_RUNTIME))
    obj["spec"]["volumes"] = [
        {"name": "engine", "image": {"reference": ref}},
        {"name": "copy", "emptyDir": {}},
    ]
    server, shadow = obj["spec"]["containers"]
    server["volumeMounts"] = [{"name": "engine", "mountPath": "/m"}, {"name": "copy", "mountPath": "/out"}]
    shadow["volumeMounts"] = [{"name": "copy", "mountPath": "/in", "readOnly": True}]
    [violation] = evaluate(engine, obj).violations
    assert (
        "container 'c1' (spec.containers[1].image) runs nvcr.io/nvidia/tensorrt@sha256:b2"
        in violation.message
    )
    # The server mounting the emptyDir read-only cannot write the engine there: c1 cannot read it.
    server["volumeMounts"][1]["readOnly"] = True
    shadow["volumeMounts"][0].pop("readOnly")
    assert evaluate(engine, obj).allowed
    # Nor through a volume no container can write (a ConfigMap), whatever the mounts say.
    server["volumeMounts"][1].pop("readOnly")
    obj["spec"]["volumes"][1] = {"name": "copy", "configMap": {"name": "settings"}}
    assert evaluate(engine, obj).allowed


def test_same_toolchain_counts_a_kserve_model_container_without_a_name(material: Material) -> None:
    # Issue 24, item 4: the model container of a KServe predictor may have no name; it runs the model.
    ref = material.engine("e")
    engine = engine_for(material, models_policy(SAME_TOOLCHAIN), keys=("build-signer",))
    isvc: dict[str, Any] = {
        "apiVersion": "serving.kserve.io/v1beta1",
        "kind": "InferenceService",
        "metadata": {"name": "i", "namespace": "prod"},
        "spec": {
            "predictor": {
                "containers": [{"name": "helper", "image": RUNTIME}],
                "model": {
                    "modelFormat": {"name": "tensorrt"},
                    "image": OTHER_RUNTIME,
                    "storageUri": f"oci+native://{ref}",
                },
            }
        },
    }
    [violation] = evaluate(engine, isvc).violations
    assert (
        "container (spec.predictor.model.image) runs nvcr.io/nvidia/tensorrt@sha256:b2" in violation.message
    )
    # A model container whose image the ServingRuntime fills in cannot be compared: onError decides.
    del isvc["spec"]["predictor"]["model"]["image"]
    [unknown] = evaluate(engine, isvc).violations
    assert unknown.error and "its image is not named here" in unknown.message


def test_same_toolchain_counts_storage_of_the_workload_however_it_is_named(material: Material) -> None:
    # Issue 24 review F1: the leader copies the engine into claim `a`, the workers load it from claim `b`,
    # bound to the same volume; the link was the claim's name, so the workers' image was never compared.
    ref = material.engine("e")
    engine = engine_for(material, models_policy(SAME_TOOLCHAIN), keys=("build-signer",))
    leader = pod(images=(RUNTIME,), engine=ref)["spec"]
    leader["volumes"].append({"name": "out", "persistentVolumeClaim": {"claimName": "a"}})
    leader["containers"][0]["volumeMounts"].append({"name": "out", "mountPath": "/out"})
    worker = {
        "containers": [
            {"name": "w", "image": OTHER_RUNTIME, "volumeMounts": [{"name": "in", "mountPath": "/in"}]}
        ],
        "volumes": [{"name": "in", "persistentVolumeClaim": {"claimName": "b", "readOnly": True}}],
    }
    lws = {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "metadata": {"name": "l", "namespace": "prod"},
        "spec": {
            "leaderWorkerTemplate": {"leaderTemplate": {"spec": leader}, "workerTemplate": {"spec": worker}}
        },
    }
    [violation] = evaluate(engine, lws).violations
    assert (
        "container 'w' (spec.leaderWorkerTemplate.workerTemplate.spec.containers[0].image) runs "
        "nvcr.io/nvidia/tensorrt@sha256:b2" in violation.message
    )


def test_same_toolchain_counts_containers_that_share_a_process_namespace(material: Material) -> None:
    # Issue 24 review F2: with shareProcessNamespace the shadow reads the server's engine through
    # /proc/PID/root without mounting anything; an ephemeral container targeting the server does too.
    ref = material.engine("e")
    engine = engine_for(material, models_policy(SAME_TOOLCHAIN), keys=("build-signer",))
    obj = pod(images=(RUNTIME, OTHER_RUNTIME), engine=ref)
    obj["spec"]["containers"][1].pop("volumeMounts")
    assert evaluate(engine, obj).allowed
    obj["spec"]["shareProcessNamespace"] = True
    [violation] = evaluate(engine, obj).violations
    assert "container 'c1' (spec.containers[1].image) runs nvcr.io/nvidia/tensorrt@sha256:b2" in (
        violation.message
    )
    del obj["spec"]["shareProcessNamespace"]
    obj["spec"]["ephemeralContainers"] = [
        {"name": "debug", "image": OTHER_RUNTIME, "targetContainerName": "c0"}
    ]
    [violation] = evaluate(engine, obj).violations
    assert "ephemeralContainer 'debug' (spec.ephemeralContainers[0].image) runs" in violation.message


def test_containers_of_one_image_are_compared_and_named_once(material: Material) -> None:
    # Each container that could read the engine was its own violation (hundreds, through one shared volume).
    rules_yaml = "      toolchain: {sameAsRuntimeImage: true}\n"
    obj = pod(engine=material.engine("e"))
    engine = engine_for(material, models_policy(rules_yaml), keys=("build-signer",))
    obj["spec"]["containers"][0]["volumeMounts"].append({"name": "scratch", "mountPath": "/s"})
    obj["spec"]["containers"] += [
        {"name": f"r{i}", "image": OTHER_RUNTIME, "volumeMounts": [{"name": "scratch", "mountPath": "/s"}]}
        for i in range(30)
    ]
    obj["spec"]["volumes"].append({"name": "scratch", "emptyDir": {}})
    [violation] = evaluate(engine, obj).violations
    assert violation.rule == "models.rules.toolchain"
    assert "but container 'r0' (spec.containers[1].image) (and 29 more containers of that image) runs" in (
        violation.message
    )


def test_same_toolchain_says_each_image_once_however_many_volumes_mount_the_engine(
    material: Material,
) -> None:
    # Re-attack F1: each volume of one engine repeated the finding about every image that can read it.
    ref = material.engine("e")
    engine = engine_for(material, models_policy(SAME_TOOLCHAIN), keys=("build-signer",))
    obj = pod(images=(RUNTIME, OTHER_RUNTIME, OTHER_RUNTIME, "registry.example.com/x@sha256:" + "c3" * 32))
    obj["spec"]["volumes"] = [{"name": f"e{i}", "image": {"reference": ref}} for i in range(10)]
    for container in obj["spec"]["containers"]:
        container["volumeMounts"] = [{"name": f"e{i}", "mountPath": f"/m/{i}"} for i in range(10)]
    found = evaluate(engine, obj).violations
    assert [v.message.split(" runs ")[0].split(" but ")[1] for v in found] == [
        "container 'c1' (spec.containers[1].image) (and 1 more container of that image)",
        "container 'c3' (spec.containers[3].image)",
    ]
    assert {v.path for v in found} == {"spec.volumes[0].image.reference"}  # said at the first volume

"""KServe model storage as an engine source (issue 28 item 8): ``storageUri: oci://REF`` is a *modelcar*, and
so is a custom container's ``STORAGE_URI`` variable (issue 28 review, F1).

KServe runs the modelcar image as a container beside the predictor's model container, which serves the
engine. So the modelcar is judged as an engine (build manifest, change control, toolchain against the model
container's image) and as an image that runs: rules scoped to ``modelcar`` admit it where rules for other
containers would not, and rules for ``container`` judge it too, so a storage URI never runs an image a
container rule would refuse. With the starter library, a signed modelcar of a signed engine is admitted.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from policies.evaluator import PolicyEvaluator
from policies.loader import load_policy_set
from tests.conftest import REPO
from tests.policies.conftest import OTHER_RUNTIME, RUNTIME, Material
from tests.support.kserve import predictor_pod
from verifier.evidence_folder import LocalEvidence

LIBRARY = REPO / "policies" / "library"


def isvc(storage_uri: str, image: str | None = RUNTIME) -> dict[str, Any]:
    model: dict[str, Any] = {"modelFormat": {"name": "tensorrt"}, "storageUri": storage_uri}
    if image is not None:
        model["image"] = image
    return {
        "apiVersion": "serving.kserve.io/v1beta1",
        "kind": "InferenceService",
        "metadata": {"name": "resnet", "namespace": "prod"},
        "spec": {"predictor": {"model": model}},
    }


def judge(material: Material, paths: list[Any], obj: dict[str, Any]) -> list[str]:
    engine = PolicyEvaluator(load_policy_set(paths), LocalEvidence(material.attestations))
    decision = asyncio.run(engine.evaluate(obj))
    return [f"{v.policy}/{v.rule}: {v.message} | {v.fix}" for v in decision.denials]


def test_a_signed_modelcar_of_a_signed_engine_passes_the_starter_library(material: Material) -> None:
    ref = material.engine("resnet", repository="models/resnet")
    keys = material.keys_file("image-signer", "build-signer")
    material.sign_image(RUNTIME)
    # A modelcar runs: like every image that runs in production, it must be signed.
    [unsigned] = judge(material, [LIBRARY, keys], isvc(f"oci://{ref}"))
    assert unsigned.startswith("signed-inference-images/images.container-images.signatures: no signature")
    material.sign_image(ref)
    assert judge(material, [LIBRARY, keys], isvc(f"oci://{ref}")) == []
    assert judge(material, [LIBRARY, keys], isvc(f"oci+modelcar://{ref}")) == []


def test_the_model_container_runs_the_engine_and_must_name_its_image(material: Material) -> None:
    ref = material.engine("resnet", repository="models/resnet")
    keys = material.keys_file("image-signer", "build-signer")
    material.sign_image(ref)
    [toolchain] = judge(material, [LIBRARY, keys], isvc(f"oci://{ref}", image=None))
    assert toolchain.startswith("engine-toolchain-matches-runtime/models.rules.toolchain: container ")
    assert "name the runtime image in spec.predictor.model.image" in toolchain


POLICY = """
apiVersion: trtguard.dev/v1alpha1
kind: InferencePolicy
metadata: {name: images}
spec:
  match: {namespaces: [prod]}
  images:
    - {name: runtimes, fields: [container], match: ["nvcr.io/nvidia/*"], requireDigest: true}
    - {name: models, fields: [modelcar], match: ["registry.example.com/models/*"], requireDigest: true}
"""


def test_modelcar_rules_admit_models_only_as_modelcars(material: Material) -> None:
    ref = material.engine("resnet", repository="models/resnet")
    policy = material.policy(POLICY)
    assert judge(material, [policy], isvc(f"oci://{ref}")) == []
    # The models repository as the model container's image: a modelcar rule does not admit it.
    [denied] = judge(material, [policy], isvc(f"oci://{ref}", image=ref))
    assert "container image is not allowed by any image rule" in denied


def test_container_rules_judge_modelcars_too(material: Material) -> None:
    """The attack: a storage URI naming an image that the container rules would refuse."""
    policy = material.policy(POLICY.replace("    - {name: models", "    # - {name: models"))
    [denied] = judge(material, [policy], isvc("oci://docker.io/attacker/miner@sha256:" + "66" * 32))
    assert denied.startswith("images/images: ") and "not allowed by any image rule" in denied
    assert "rules for it judge" not in denied  # the container rule judged it: no rule exempts its field


def custom(storage_uri: str, image: str = RUNTIME, component: str = "predictor") -> dict[str, Any]:
    """An InferenceService whose ``component`` is a custom container given its model as ``STORAGE_URI``
    (another component beside a predictor whose model, on s3://, is no engine)."""
    container = {
        "name": "kserve-container",
        "image": image,
        "env": [{"name": "STORAGE_URI", "value": storage_uri}],
    }
    obj = isvc("s3://bucket/tokenizer")
    obj["spec"][component] = {"containers": [container]}
    return obj


INT8 = {"typing": "weak", "precision_flags": ["fp16", "int8"], "max_workspace_size": 1 << 30}
CALIBRATION = {"dataset": {"sha256": "f6" * 32}, "cache": {"sha256": "07" * 32}}


def test_a_storage_uri_variable_is_an_engine_as_a_storage_uri_is(material: Material) -> None:
    # The starter library denied it for want of an engine ("declares no TensorRT engine") and refused the
    # engine repository as a container image: the variable's image was only an image found elsewhere.
    ref = material.engine("resnet", repository="models/resnet")
    keys = material.keys_file("image-signer", "build-signer")
    for image in (RUNTIME, OTHER_RUNTIME, ref):
        material.sign_image(image)
    assert judge(material, [LIBRARY, keys], custom(f"oci://{ref}")) == []
    assert judge(material, [LIBRARY, keys], custom(f"oci://{ref}", component="transformer")) == []
    # In another TensorRT image than its builder's, it is refused as the same engine in storageUri is.
    [toolchain] = judge(material, [LIBRARY, keys], custom(f"oci://{ref}", image=OTHER_RUNTIME))
    assert toolchain.startswith(
        "engine-toolchain-matches-runtime/models.rules.toolchain: engine was built with"
    )
    assert "container 'kserve-container' (spec.predictor.containers[0].image)" in toolchain


ENGINE_RULES = ("same-toolchain.yaml", "signed-build-manifest.yaml", "int8-calibration.yaml")


@pytest.mark.parametrize("component", ["predictor", "transformer", "explainer"])
def test_an_uncalibrated_int8_engine_given_as_a_storage_uri_variable_is_refused(
    material: Material, component: str
) -> None:
    """The attack: the library's engine policies admitted an uncalibrated INT8 engine as STORAGE_URI."""
    ref = material.engine("int8", builder_config=INT8)
    keys = material.keys_file("build-signer")
    [denied] = judge(
        material,
        [*(LIBRARY / name for name in ENGINE_RULES), keys],
        custom(f"oci://{ref}", component=component),
    )
    assert denied.startswith(
        "int8-calibration-and-accuracy/models.rules.int8RequiresCalibration: engine uses INT8"
    )


def test_change_control_judges_a_storage_uri_variable_as_a_storage_uri(material: Material) -> None:
    """The reported attack: an unapproved first INT8 engine, denied as storageUri, admitted as STORAGE_URI."""
    ref = material.engine("int8", builder_config=INT8, calibration=CALIBRATION)
    paths = [
        REPO / "policies" / "templates" / "change-control.yaml",
        material.keys_file("build-signer"),
        material.keys_file("alice", "bob", "chen", set_name="release-committee"),
    ]
    as_field, as_variable = isvc(f"oci://{ref}"), custom(f"oci://{ref}")
    [field_denial] = judge(material, paths, as_field)
    [variable_denial] = judge(material, paths, as_variable)
    assert variable_denial.startswith("change-control/changeControl: gated changes [FirstInt8]")
    assert variable_denial == field_denial
    for member in ("alice", "bob"):
        material.approval("int8", ["FirstInt8"], member)
    assert judge(material, paths, as_field) == judge(material, paths, as_variable) == []
    # A value taken from elsewhere cannot be judged: never an allow.
    env = as_variable["spec"]["predictor"]["containers"][0]["env"]
    env[0] = {"name": "STORAGE_URI", "valueFrom": {"configMapKeyRef": {"name": "models", "key": "resnet"}}}
    [unknown] = judge(material, paths, as_variable)
    assert unknown.startswith("change-control/workload: STORAGE_URI names the model the operator fetches")


# --- the Pods KServe makes (issue 24 re-attack, F2) ------------------------------------------------------


def test_the_pod_kserve_makes_gets_the_verdict_of_its_inference_service(material: Material) -> None:
    """The starter library denied every modelcar Pod: it saw no engine (``models.required``) and refused the
    engine repository as the image of the ``modelcar`` container."""
    ref = material.engine("resnet", repository="models/resnet")
    keys = material.keys_file("image-signer", "build-signer")
    material.sign_image(ref)
    material.sign_image(RUNTIME)
    pod = predictor_pod(isvc(f"oci://{ref}"))
    assert pod is not None
    assert judge(material, [LIBRARY, keys], isvc(f"oci://{ref}")) == []
    assert judge(material, [LIBRARY, keys], pod) == []
    # The modelcar image is a modelcar image, judged by the rules for containers too: unsigned, refused.
    unsigned = material.engine("other", repository="models/other")
    denials = judge(material, [LIBRARY, keys], predictor_pod(isvc(f"oci://{unsigned}")) or {})
    assert {d.split(":")[0] for d in denials} == {
        "signed-inference-images/images.container-images.signatures"
    }


def _pod(*containers: dict[str, Any], share: bool = True, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "prod"},
        "spec": {"shareProcessNamespace": share, "containers": list(containers), **spec},
    }


def test_a_modelcar_is_an_engine_its_own_containers_do_not_run(material: Material) -> None:
    """Every container of the shared process namespace runs the engine, the modelcar and modelcar-init
    (whose image is the engine) excepted; the engine is judged by the model rules."""
    ref = material.engine("int8", builder_config=INT8)
    keys = material.keys_file("build-signer")
    rules = [*(LIBRARY / name for name in ENGINE_RULES), keys]
    car = {"name": "modelcar", "image": ref}
    pod = _pod({"name": "kserve-container", "image": RUNTIME}, car)
    pod["spec"]["initContainers"] = [{"name": "modelcar-init", "image": ref}]
    [denied] = judge(material, rules, pod)
    assert denied.startswith("int8-calibration-and-accuracy/models.rules.int8RequiresCalibration:")
    sidecar = _pod(
        {"name": "kserve-container", "image": RUNTIME}, {"name": "helper", "image": OTHER_RUNTIME}, car
    )
    denials = judge(material, rules, sidecar)
    assert any("container 'helper' (spec.containers[1].image)" in d for d in denials), denials
    assert not any("'modelcar'" in d for d in denials), denials
    # Without a shared namespace the modelcar hands the engine on through a volume it can write.
    alone = _pod(
        {"name": "server", "image": OTHER_RUNTIME, "volumeMounts": [{"name": "m", "mountPath": "/mnt"}]},
        {**car, "volumeMounts": [{"name": "m", "mountPath": "/mnt"}]},
        share=False,
        volumes=[{"name": "m", "emptyDir": {}}],
    )
    assert any("container 'server'" in d for d in judge(material, rules, alone))
    apart = _pod({"name": "server", "image": OTHER_RUNTIME}, car, share=False)
    assert not any("container 'server'" in d for d in judge(material, rules, apart))


MODELS_ONLY = """
apiVersion: trtguard.dev/v1alpha1
kind: InferencePolicy
metadata: {name: models}
spec:
  match: {namespaces: [prod]}
  models:
    engines: ["registry.example.com/models/*"]
    buildManifest: {keys: [platform/build-signer]}
"""


def test_an_engine_repository_run_as_another_container_is_refused(material: Material) -> None:
    """A modelcar renamed is no modelcar: with models.engines naming its repository, a container that runs
    it is refused, since no model rule would judge it."""
    ref = material.engine("resnet", repository="models/resnet")
    paths = [material.policy(MODELS_ONLY), material.keys_file("build-signer")]
    assert (
        judge(material, paths, _pod({"name": "s", "image": RUNTIME}, {"name": "modelcar", "image": ref}))
        == []
    )
    [denied] = judge(material, paths, _pod({"name": "s", "image": RUNTIME}, {"name": "loader", "image": ref}))
    assert denied.startswith("models/models.engines: container 'loader' (spec.containers[1].image) runs an")

"""KServe model storage as an engine source (issue 28 item 8): ``storageUri: oci://REF`` is a *modelcar*.

KServe runs the modelcar image as a container beside the predictor's model container, which serves the
engine. So the modelcar is judged as an engine (build manifest, change control, toolchain against the model
container's image) and as an image that runs: rules scoped to ``modelcar`` admit it where rules for other
containers would not, and rules for ``container`` judge it too, so a storage URI never runs an image a
container rule would refuse. With the starter library, a signed modelcar of a signed engine is admitted.
"""

from __future__ import annotations

import asyncio
from typing import Any

from policies.evaluator import PolicyEngine
from policies.loader import load_policy_set
from tests.conftest import REPO
from tests.policies.conftest import RUNTIME, Material
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
    engine = PolicyEngine(load_policy_set(paths), LocalEvidence(material.attestations))
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

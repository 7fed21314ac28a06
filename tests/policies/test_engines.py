"""policies.engines: image volumes are engines by the policy's ``models.engines`` patterns or by their
artifact type, and no engine escapes the build-manifest rules by passing as a plain image volume."""

from __future__ import annotations

import json
from typing import Any

from policies.loader import PolicyLoadError, load_policy_set
from policies.results import Action, Decision
from tests.policies.conftest import RUNTIME, Material
from tests.policies.evaluation import engine_for, evaluate, rules

ALPINE = "docker.io/library/alpine@sha256:" + "a7" * 32
SCRATCH = "registry.example.com/scratch/"

#: Images: the runtime by digest, and image volumes from anywhere at registry.example.com by digest (the
#: exception a team writes for engine artifacts, whose build manifests are signed instead), plus alpine
#: allow-listed by digest. Models: a signed build manifest for every engine.
POLICY = """
apiVersion: trtguard.dev/v1alpha1
kind: InferencePolicy
metadata: {name: serving}
spec:
  match: {namespaces: [prod]}
  images:
    - {name: runtime, match: ["nvcr.io/nvidia/tensorrt:*"], requireDigest: true}
    - {name: volumes, fields: [volume], match: ["registry.example.com/*"], requireDigest: true}
    - {name: helpers, fields: [volume], match: ["docker.io/library/alpine:*"], digests: [DIGEST]}
  models:
    required: true
    ENGINES
    buildManifest: {keys: [platform/build-signer]}
""".replace("DIGEST", ALPINE.split("@")[1])


def policy(engines: str | None) -> str:
    return POLICY.replace("ENGINES", f"engines: {engines}" if engines else "")


def pod(*volumes: str, annotation: list[dict[str, str]] | None = None) -> dict[str, Any]:
    names = [f"v{i}" for i in range(len(volumes))]
    metadata: dict[str, Any] = {"name": "p", "namespace": "prod"}
    if annotation is not None:
        metadata["annotations"] = {"trtguard.dev/engines": json.dumps(annotation)}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": metadata,
        "spec": {
            "containers": [
                {
                    "name": "server",
                    "image": RUNTIME,
                    "volumeMounts": [{"name": n, "mountPath": f"/{n}"} for n in names],
                }
            ],
            "volumes": [
                {"name": n, "image": {"reference": ref}} for n, ref in zip(names, volumes, strict=True)
            ],
        },
    }


def judge(material: Material, engines: str | None, obj: dict[str, Any], **kwargs: Any) -> Decision:
    return evaluate(engine_for(material, policy(engines), keys=["build-signer"]), obj, **kwargs)


def test_without_engine_patterns_every_mounted_image_volume_is_an_engine(material: Material) -> None:
    signed = material.engine("fp16")
    decision = judge(material, None, pod(signed, ALPINE))
    assert ("serving", "models.buildManifest", Action.DENY) in rules(decision)
    assert [v.engine for v in decision.violations] == [ALPINE]
    assert [e.reference for e in decision.engines] == [signed, ALPINE]
    # The Kubernetes documentation's image volume: an unpinned engine; the fix says how to tell them apart.
    tagged = judge(material, None, pod("docker.io/library/alpine:3.20"))
    [violation] = [v for v in tagged.violations if v.rule.startswith("models")]
    assert (violation.rule, violation.message) == (
        "models.reference",
        "engine reference is not pinned by digest",
    )
    assert violation.fix.endswith(
        "an image volume that holds no engine: list the engine repositories in models.engines"
    )


def test_with_engine_patterns_a_plain_image_volume_is_judged_by_the_image_rules_alone(
    material: Material,
) -> None:
    signed = material.engine("fp16")
    decision = judge(material, '["registry.example.com/models/*"]', pod(signed, ALPINE))
    assert decision.allowed and decision.violations == ()
    assert [e.reference for e in decision.engines] == [signed]
    # A plain image volume never satisfies `required`.
    decision = judge(material, '["registry.example.com/models/*"]', pod(ALPINE))
    assert rules(decision) == {("serving", "models.required", Action.DENY)}


def test_an_engine_pushed_as_a_plain_image_outside_the_patterns_does_not_escape(material: Material) -> None:
    # The workload chooses how its artifacts are pushed: an unsigned engine as a plain image, in a
    # repository the volume exception admits but the patterns leave out. No image rule vouches for its bytes.
    hidden = SCRATCH + "engine@sha256:" + "0d" * 32
    decision = judge(material, '["registry.example.com/models/*"]', pod(material.engine("fp16"), hidden))
    assert not decision.allowed
    [violation] = decision.violations
    assert (violation.rule, violation.image, violation.error) == ("models.engines", hidden, False)
    assert "could be an unsigned engine" in violation.message


def test_an_engine_artifact_outside_the_patterns_is_an_engine(material: Material) -> None:
    rogue = material.engine("rogue", signer="rogue-signer").replace("registry.example.com/models/", SCRATCH)
    decision = judge(material, '["registry.example.com/models/*"]', pod(rogue))
    assert ("serving", "models.buildManifest", Action.DENY) in rules(decision)
    assert [e.reference for e in decision.engines] == [rogue]
    # Signed by the right key, it is admitted like any engine.
    good = material.engine("good").replace("registry.example.com/models/", SCRATCH)
    assert judge(material, '["registry.example.com/models/*"]', pod(good)).allowed


def test_an_annotation_names_an_engine_whatever_the_patterns(material: Material) -> None:
    decision = judge(material, '["registry.example.com/models/*"]', pod(ALPINE, annotation=[{"name": "v0"}]))
    assert ("serving", "models.buildManifest", Action.DENY) in rules(decision)
    assert [e.reference for e in decision.engines] == [ALPINE]


def test_an_artifact_type_that_cannot_be_read_is_never_a_plain_image(material: Material) -> None:
    tagged = "docker.io/library/alpine:3.20"
    decision = judge(material, '["registry.example.com/models/*"]', pod(tagged))
    engines = [v for v in decision.violations if v.rule == "models.engines"]
    assert [(v.image, v.error, v.action) for v in engines] == [(tagged, True, Action.DENY)]
    assert "whether it is a TensorRT engine artifact could not be read" in engines[0].message


def test_engine_patterns_are_checked_when_the_policy_loads(material: Material) -> None:
    path = material.policy(policy('["models/*"]'))
    keys = material.keys_file("build-signer")
    try:
        load_policy_set([path, keys])
    except PolicyLoadError as error:
        [problem] = error.problems
        assert "spec.models.engines[0]" in problem and "does not start with a registry host" in problem
    else:
        raise AssertionError("a short-name engine pattern loaded")


def workflow(reference: str) -> dict[str, Any]:
    """An Argo Workflow (a kind trtguard does not know): its volumes are beside its templates, in no pod
    spec, and a template's container mounts one."""
    return {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "Workflow",
        "metadata": {"name": "w", "namespace": "prod"},
        "spec": {
            "volumes": [{"name": "engine", "image": {"reference": reference}}],
            "templates": [
                {
                    "name": "main",
                    "container": {
                        "image": RUNTIME,
                        "volumeMounts": [{"name": "engine", "mountPath": "/models"}],
                    },
                }
            ],
        },
    }


def test_an_image_volume_outside_every_pod_spec_is_an_engine_no_rule_could_judge(
    material: Material,
) -> None:
    """Issue 24 re-attack F5: judged only as an image, the engine passed every model rule unseen."""
    signed = material.engine("fp16")
    decision = judge(material, None, workflow(signed), unknown_kinds="judge")
    [unchecked] = [v for v in decision.violations if v.rule == "models"]
    assert (unchecked.action, unchecked.error, unchecked.path) == (
        Action.DENY,
        True,
        "spec.volumes[0].image.reference",
    )
    assert "outside every pod spec trtguard can read" in unchecked.message
    # Left out of models.engines and vouched for by an image rule (a digest), it is a plain image volume.
    plain = judge(material, '["registry.example.com/*"]', workflow(ALPINE), unknown_kinds="judge")
    assert not [v for v in plain.violations if v.rule == "models"]
    # In an engine repository, it may be an engine whatever vouches for it.
    listed = judge(material, '["docker.io/*"]', workflow(ALPINE), unknown_kinds="judge")
    assert [v.rule for v in listed.violations if v.rule == "models"] == ["models"]

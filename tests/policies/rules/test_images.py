"""policies.rules._images: image rules against real keys and real signatures in a local folder."""

from __future__ import annotations

import pytest

from policies.results import Action
from tests.policies.conftest import OTHER_RUNTIME, RUNTIME, Material, pod
from tests.policies.evaluation import engine_for, evaluate, images_policy, rules, signature_policy
from verifier.base._errors import InputError


def test_pinned_allowed_image_passes(material: Material) -> None:
    decision = evaluate(engine_for(material, images_policy()), pod())
    assert decision.allowed
    assert decision.violations == ()
    assert decision.matched_policies == ("images",)
    assert decision.images[0].digest == RUNTIME.split("@")[1]


def test_unmatched_image_is_a_violation_naming_what_is_allowed(material: Material) -> None:
    decision = evaluate(
        engine_for(material, images_policy()), pod(images=(RUNTIME, "docker.io/library/nginx:1.27"))
    )
    assert not decision.allowed
    [violation] = decision.violations
    assert (violation.rule, violation.image, violation.path) == (
        "images",
        "docker.io/library/nginx:1.27",
        "spec.containers[1].image",
    )
    assert "nvcr.io/nvidia/tensorrt:*" in violation.message


def test_short_name_is_normalised_before_matching(material: Material) -> None:
    decision = evaluate(engine_for(material, images_policy()), pod(images=("nginx",)))
    assert decision.violations[0].image == "docker.io/library/nginx:latest"


@pytest.mark.parametrize(
    "reference",
    [
        "nvcr.io/nvidia/TensorRT:24.05",  # upper case in the repository
        "nvcr.io/nvidia/tеnsorrt:24.05",  # Cyrillic 'е'
        "nvcr.io/nvidia/tensorrt@sha256:abc",  # malformed digest
    ],
)
def test_invalid_reference_is_a_violation_never_a_match(material: Material, reference: str) -> None:
    decision = evaluate(engine_for(material, images_policy()), pod(images=(reference,)))
    assert not decision.allowed
    [violation] = decision.violations
    assert violation.rule == "images"
    assert violation.message.startswith("invalid image reference")


def test_unpinned_image_fails_require_digest(material: Material) -> None:
    decision = evaluate(
        engine_for(material, images_policy()), pod(images=("nvcr.io/nvidia/tensorrt:24.05-py3",))
    )
    [violation] = decision.violations
    assert violation.rule == "images.runtime.requireDigest"
    assert "nvcr.io/nvidia/tensorrt@sha256:<digest>" in violation.fix
    # The tool that prints it is trtguard's own (tests/trtguard/test_attestation_folder.py runs it).
    assert "`trtguard digest nvcr.io/nvidia/tensorrt:24.05-py3`" in violation.fix
    assert "crane" not in violation.fix


def test_digest_allow_list(material: Material) -> None:
    policy = images_policy().replace("requireDigest: true", f"digests: ['sha256:{'a1' * 32}']")
    engine = engine_for(material, policy)
    assert evaluate(engine, pod()).allowed
    decision = evaluate(engine, pod(images=(OTHER_RUNTIME,)))
    assert rules(decision) == {("images", "images.runtime.digests", Action.DENY)}


def test_every_matching_rule_applies_and_exclude_carves_exceptions(material: Material) -> None:
    policy = (
        images_policy()
        + """
    - name: everything
      match: ["*"]
      exclude: ["registry.example.com/*"]
      digests: ['sha256:{}']
    - name: internal
      match: ["registry.example.com/*"]
""".format("a1" * 32)
    )
    engine = engine_for(material, policy)
    # RUNTIME matches both `runtime` and `everything`: both apply, both pass.
    assert evaluate(engine, pod()).allowed
    other = evaluate(engine, pod(images=(OTHER_RUNTIME,)))
    assert rules(other) == {("images", "images.everything.digests", Action.DENY)}
    internal = evaluate(engine, pod(images=("registry.example.com/tools/x:1",)))
    assert internal.allowed


def test_signature_by_trusted_key_passes_and_rogue_key_fails(material: Material) -> None:
    material.sign_image(RUNTIME)
    material.sign_image(OTHER_RUNTIME, signer="rogue")
    engine = engine_for(material, signature_policy(), keys=("image-signer", "second-signer"))
    assert evaluate(engine, pod()).allowed
    rogue = evaluate(engine, pod(images=(OTHER_RUNTIME,)))
    assert rules(rogue) == {("images", "images.runtime.signatures", Action.DENY)}
    assert "signature present but not made by any trusted key" in rogue.violations[0].message


def test_signature_threshold_counts_distinct_keys(material: Material) -> None:
    material.sign_image(RUNTIME)
    engine = engine_for(material, signature_policy(threshold=2), keys=("image-signer", "second-signer"))
    decision = evaluate(engine, pod())
    assert "1 of 2 required signatures" in decision.violations[0].message
    material.sign_image(RUNTIME, signer="second-signer")
    engine = engine_for(material, signature_policy(threshold=2), keys=("image-signer", "second-signer"))
    assert evaluate(engine, pod()).allowed


def test_missing_signature_says_where_it_looked(material: Material) -> None:
    engine = engine_for(material, signature_policy(), keys=("image-signer", "second-signer"))
    decision = evaluate(engine, pod())
    assert "no signature found" in decision.violations[0].message
    assert "attestation folder" in decision.violations[0].message


def test_image_attestation_rule(material: Material) -> None:
    policy = images_policy() + (
        "      attestations: [{predicateType: 'https://cyclonedx.org/bom', keys: [platform/image-signer]}]\n"
    )
    engine = engine_for(material, policy, keys=("image-signer",))
    decision = evaluate(engine, pod())
    assert rules(decision) == {
        ("images", "images.runtime.attestations[https://cyclonedx.org/bom]", Action.DENY)
    }
    # a rule on an SBOM type judges its documents as documents: a signed one that is no valid SBOM cannot tell
    material.statement(
        "a1" * 32, "https://cyclonedx.org/bom", {"bomFormat": "CycloneDX"}, "image-signer", "sbom.json"
    )
    assert not evaluate(engine_for(material, policy, keys=("image-signer",)), pod()).allowed
    sbom = {
        "bomFormat": "CycloneDX",
        "specVersion": "1.5",
        "components": [{"name": "pyyaml", "version": "6.0"}],
    }
    material.statement("a1" * 32, "https://cyclonedx.org/bom", sbom, "image-signer", "sbom.json")
    assert evaluate(engine_for(material, policy, keys=("image-signer",)), pod()).allowed


FIELD_SCOPED_POLICY = """
apiVersion: trtguard.dev/v1alpha1
kind: InferencePolicy
metadata: {name: scoped}
spec:
  match: {namespaces: [prod]}
  images:
    - name: containers
      fields: [container, initContainer, ephemeralContainer]
      match: ["*"]
      signatures: {keys: [platform/image-signer]}
    - name: engines
      fields: [volume]
      match: ["registry.example.com/models/*"]
      requireDigest: true
"""


def test_image_rules_scoped_to_fields(material: Material) -> None:
    ref = material.engine("e")
    material.sign_image(RUNTIME)
    engine = engine_for(material, FIELD_SCOPED_POLICY, keys=("image-signer",))
    assert evaluate(engine, pod(engine=ref)).allowed  # signed runtime, engine volume by digest
    # The engine repository's exception holds for image volumes only: run as a container, the same unsigned
    # digest needs a signature like any other image.
    decision = evaluate(engine, pod(images=(RUNTIME, ref)))
    [violation] = decision.violations
    assert (violation.rule, violation.image) == ("images.containers.signatures", ref)
    # An image volume outside the engine repository matches no volume rule: not allowed, and the message
    # says that rules for it judge other fields only.
    other = "nvcr.io/nvidia/tensorrt@sha256:" + "c3" * 32
    decision = evaluate(engine, pod(engine=other))
    [violation] = [v for v in decision.violations if v.rule == "images"]
    assert violation.message.startswith("volume image is not allowed by any image rule")
    assert "rules for it judge only container, ephemeralContainer, initContainer images" in violation.message


@pytest.mark.parametrize(
    ("fields", "error"),
    [("[]", "at least 1 item"), ("[volume, volume]", "listed once"), ("[sidecar]", "container")],
)
def test_image_rule_fields_are_checked_at_load(material: Material, fields: str, error: str) -> None:
    text = FIELD_SCOPED_POLICY.replace("fields: [volume]", f"fields: {fields}")
    with pytest.raises(InputError, match=error):
        engine_for(material, text, keys=("image-signer",))


def test_a_signature_counted_by_several_policies_is_recorded_once_with_the_signers_of_all(
    material: Material,
) -> None:
    # Three policies count the image's signature (one envelope signed by two keys): it is one record in the
    # decision, naming each key that verified it once: the first policy's key, the one the second adds, and
    # nothing more for the third.
    material.sign_image(RUNTIME)
    material.sign_image(RUNTIME, signer="second-signer")
    both = signature_policy()
    first_only = both.replace(", platform/second-signer]", "]").replace("name: images}", "name: first}")
    again = both.replace("name: images}", "name: again}")
    engine = engine_for(material, first_only, both, again, keys=("image-signer", "second-signer"))
    decision = evaluate(engine, pod())
    assert decision.matched_policies == ("first", "images", "again") and decision.allowed
    [image] = decision.images
    [record] = image.signatures
    assert [s.key for s in record.signers] == ["platform/image-signer", "platform/second-signer"]

"""policies.rules._manifest: the signed build manifest of an engine and its maxAge."""

from __future__ import annotations

import json
from typing import Any

import pytest

from policies.results import Action
from tests.policies.conftest import Material, pod
from tests.policies.evaluation import engine_for, evaluate, models_policy
from verifier.base._digests import sha256_bytes
from verifier.crypto._dsse import sign_envelope
from verifier.crypto._intoto import PAYLOAD_TYPE
from verifier.manifest import ENGINE_BUILD_PREDICATE_TYPE


def test_engine_with_signed_manifest_passes(material: Material) -> None:
    ref = material.engine("good")
    decision = evaluate(engine_for(material, models_policy(), keys=("build-signer",)), pod(engine=ref))
    assert decision.allowed, decision.violations
    assert decision.engines[0].digest == ref.split("@")[1]


@pytest.mark.parametrize("signer", ["rogue", None])
def test_unsigned_or_missing_manifest_is_denied(material: Material, signer: str | None) -> None:
    ref = (
        material.engine("e", signer=signer) if signer else "registry.example.com/models/e@sha256:" + "9" * 64
    )
    decision = evaluate(engine_for(material, models_policy(), keys=("build-signer",)), pod(engine=ref))
    [violation] = decision.violations
    assert violation.rule == "models.buildManifest"
    assert ("not signed by" if signer else "no build manifest attestation") in violation.message


def test_stale_manifest_fails_max_age(material: Material) -> None:
    ref = material.engine("old", build_timestamp="2026-01-01T00:00:00Z")
    decision = evaluate(engine_for(material, models_policy(), keys=("build-signer",)), pod(engine=ref))
    [violation] = decision.violations
    assert violation.rule == "models.buildManifest.maxAge"
    assert "304 days 0 h ago" in violation.message


@pytest.mark.parametrize("max_age", [True, False])
def test_a_manifest_dated_in_the_future_is_refused_whatever_the_rule_says(
    material: Material, max_age: bool
) -> None:
    # NOW is 2026-11-01T00:00Z; five minutes of clock skew are tolerated, a day is not.
    policy = models_policy() if max_age else models_policy().replace(", maxAge: 90d", "")
    skewed = material.engine("skewed", build_timestamp="2026-11-01T00:04:00Z")
    assert evaluate(engine_for(material, policy, keys=("build-signer",)), pod(engine=skewed)).allowed
    ref = material.engine("future", build_timestamp="2026-11-02T03:00:00Z")
    decision = evaluate(engine_for(material, policy, keys=("build-signer",)), pod(engine=ref))
    [violation] = decision.violations
    assert (violation.rule, violation.error) == ("models.buildManifest", False)
    assert "dated 1 days 3 h in the future" in violation.message


def test_a_future_manifest_does_not_hide_an_older_one(material: Material) -> None:
    policy = models_policy().replace(", maxAge: 90d", "")
    ref = material.engine("e", build_timestamp="2026-10-01T00:00:00Z")
    (material.attestations / "e.manifest.json").rename(material.attestations / "e.old.json")
    assert material.engine("e", build_timestamp="2027-01-01T00:00:00Z") == ref
    decision = evaluate(engine_for(material, policy, keys=("build-signer",)), pod(engine=ref))
    assert [v.rule for v in decision.violations] == ["models.buildManifest"]


def test_an_unreadable_manifest_cannot_tell_which_is_the_newest(material: Material) -> None:
    ref = material.engine("e")
    statement = {
        "_type": "https://in-toto.io/Statement/v1",
        "subject": [{"name": "model.plan", "digest": {"sha256": sha256_bytes(b"engine e")}}],
        "predicateType": ENGINE_BUILD_PREDICATE_TYPE,
        "predicate": {"build_timestamp": "2026-10-20T00:00:00Z", "unknown": "shape"},
    }
    envelope = sign_envelope(PAYLOAD_TYPE, json.dumps(statement).encode(), material.key("build-signer"))
    (material.attestations / "e.unreadable.json").write_bytes(envelope.to_json())
    policy = models_policy().replace(
        "match: {namespaces: [prod]}", "match: {namespaces: [prod]}\n  onIndeterminate: Warn"
    )
    decision = evaluate(engine_for(material, policy, keys=("build-signer",)), pod(engine=ref))
    [violation] = decision.violations
    assert (violation.rule, violation.indeterminate, violation.action) == (
        "models.buildManifest",
        True,
        Action.WARN,
    )
    assert "cannot be read" in violation.message and "e.unreadable.json" in violation.message


def test_an_unverifiable_manifest_fails_only_itself_and_is_named(material: Material) -> None:
    ref = material.engine("e")
    (material.attestations / "e.manifest.json").rename(material.attestations / "e.good.json")
    assert material.engine("e", signer="rogue", build_timestamp="2026-10-30T00:00:00Z") == ref
    decision = evaluate(engine_for(material, models_policy(), keys=("build-signer",)), pod(engine=ref))
    assert decision.allowed, decision.violations
    assert any("e.manifest.json" in note and "did not count" in note for note in decision.notes)


def test_newest_of_several_signed_manifests_is_used(material: Material) -> None:
    ref = material.engine("e", build_timestamp="2026-01-01T00:00:00Z")
    engine = engine_for(material, models_policy(), keys=("build-signer",))
    assert not evaluate(engine, pod(engine=ref)).allowed
    # A newer signed manifest for the same engine file supersedes the stale one.
    (material.attestations / "e.manifest.json").rename(material.attestations / "e.old.json")
    assert material.engine("e") == ref
    assert evaluate(engine_for(material, models_policy(), keys=("build-signer",)), pod(engine=ref)).allowed


@pytest.mark.parametrize("order", ["fp16-first", "int8-first"])
def test_two_manifests_of_one_build_time_cannot_tell_which_describes_the_engine(
    material: Material, order: str
) -> None:
    # attack finding F4's family: two signed manifests of one engine file with the same build time; which was
    # judged depended on the order they were found in (an INT8 build without calibration hid by an FP16 one)
    fp16: dict[str, Any] = {"typing": "weak", "precision_flags": ["fp16"], "max_workspace_size": 1}
    int8: dict[str, Any] = {**fp16, "precision_flags": ["fp16", "int8"]}
    first, second = (fp16, int8) if order == "fp16-first" else (int8, fp16)
    ref = material.engine("e", builder_config=first)
    (material.attestations / "e.manifest.json").rename(material.attestations / "e.first.json")
    assert material.engine("e", builder_config=second) == ref
    rules = "      precisions: [fp16]\n"
    decision = evaluate(engine_for(material, models_policy(rules), keys=("build-signer",)), pod(engine=ref))
    assert not decision.allowed
    [violation] = [v for v in decision.violations if v.rule == "models.buildManifest"]
    assert violation.indeterminate and "record the same build time" in violation.message

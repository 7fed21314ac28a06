"""policies.rules.manifest: the signed build manifest of an engine and its maxAge."""

from __future__ import annotations

import pytest

from tests.policies.conftest import Material, pod
from tests.policies.evaluation import engine_for, evaluate, models_policy


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


def test_manifest_dated_in_the_future_fails_max_age(material: Material) -> None:
    # NOW is 2026-11-01T00:00Z; five minutes of clock skew are tolerated, a day is not.
    policy = models_policy()
    skewed = material.engine("skewed", build_timestamp="2026-11-01T00:04:00Z")
    assert evaluate(engine_for(material, policy, keys=("build-signer",)), pod(engine=skewed)).allowed
    ref = material.engine("future", build_timestamp="2026-11-02T03:00:00Z")
    decision = evaluate(engine_for(material, policy, keys=("build-signer",)), pod(engine=ref))
    [violation] = decision.violations
    assert violation.rule == "models.buildManifest.maxAge"
    assert "dated 1 days 3 h in the future" in violation.message


def test_newest_of_several_signed_manifests_is_used(material: Material) -> None:
    ref = material.engine("e", build_timestamp="2026-01-01T00:00:00Z")
    engine = engine_for(material, models_policy(), keys=("build-signer",))
    assert not evaluate(engine, pod(engine=ref)).allowed
    # A newer signed manifest for the same engine file supersedes the stale one.
    (material.attestations / "e.manifest.json").rename(material.attestations / "e.old.json")
    assert material.engine("e") == ref
    assert evaluate(engine_for(material, models_policy(), keys=("build-signer",)), pod(engine=ref)).allowed

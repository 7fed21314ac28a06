"""OpenPGP keys and Notary Project signers in policies (issue 19): where they may be listed, and thresholds
that count distinct keys across DSSE and OpenPGP signatures of one statement (offline, an evidence folder)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from policies.evaluator import PolicyEvaluator
from policies.loader import load_policy_set
from tests.policies.conftest import Material, manifest_data, pod
from tests.policies.evaluation import NOW, evaluate, rules
from tests.policies.test_loader import problems_of
from tests.support.gpg import GnuPG
from tests.support.notary_pki import make_pki
from verifier.crypto._dsse import Envelope
from verifier.evidence_folder import LocalEvidence
from verifier.manifest import EngineBuildManifest, manifest_statement

T0 = datetime(2024, 1, 1, tzinfo=UTC)

MANIFEST_POLICY = """
apiVersion: trtguard.dev/v1alpha1
kind: InferencePolicy
metadata: {name: models}
spec:
  match: {namespaces: [prod]}
  models:
    required: true
    buildManifest: {keys: KEYS, threshold: THRESHOLD}
"""


def _keys(material: Material, gnupg: GnuPG, *, extra: str = "") -> tuple[Path, str]:
    """TrustedKeys ``platform`` with the ECDSA key ``build-signer`` and the gpg key ``gpg-build``."""
    fingerprint = gnupg.generate("build <build@example.com>", "ed25519", at=T0)
    (material.root / "build.asc").write_bytes(gnupg.export(fingerprint))
    pem = material.key("build-signer").public_key().to_pem().decode()
    path = material.root / "keys.yaml"
    path.write_text(
        "apiVersion: trtguard.dev/v1alpha1\nkind: TrustedKeys\nmetadata: {name: platform}\nspec:\n  keys:\n"
        "    - name: build-signer\n      publicKey: |\n"
        + "".join(f"        {line}\n" for line in pem.splitlines())
        + "    - name: gpg-build\n      openpgp: {file: build.asc}\n"
        + extra
    )
    return path, fingerprint


def _engine(material: Material, keys: Path, policy: str) -> tuple[PolicyEvaluator, str, bytes]:
    """An engine whose manifest the ECDSA key signed (DSSE); returns the engine and the statement bytes."""
    reference = material.engine("resnet")
    manifest = EngineBuildManifest.model_validate(manifest_data(b"engine resnet"))
    statement = manifest_statement(manifest).to_json()
    engine = PolicyEvaluator(
        load_policy_set([material.policy(policy), keys]),
        LocalEvidence(material.attestations),
        clock=lambda: NOW,
    )
    return engine, reference, statement


def _policy(keys: str, threshold: int) -> str:
    return MANIFEST_POLICY.replace("KEYS", keys).replace("THRESHOLD", str(threshold))


def test_a_threshold_counts_a_dsse_and_an_openpgp_signature_of_one_manifest(
    material: Material, gnupg: GnuPG
) -> None:
    keys, fingerprint = _keys(material, gnupg)
    policy = _policy("[platform/build-signer, platform/gpg-build]", 2)
    # Only the DSSE signature: one of two.
    engine, reference, statement = _engine(material, keys, policy)
    decision = evaluate(engine, pod(engine=reference))
    assert rules(decision) == {("models", "models.buildManifest", decision.violations[0].action)}
    assert "signed by 1 of the 2 required distinct keys" in decision.violations[0].message
    # The same statement's bytes, signed by gpg and kept beside them: two distinct keys.
    (material.attestations / "resnet.statement.json").write_bytes(statement)
    (material.attestations / "resnet.statement.json.asc").write_bytes(
        gnupg.sign(statement, fingerprint, at=T0 + timedelta(hours=1))
    )
    engine, reference, _ = _engine(material, keys, policy)
    assert evaluate(engine, pod(engine=reference)).allowed


def test_an_openpgp_signature_alone_is_a_signed_manifest(material: Material, gnupg: GnuPG) -> None:
    keys, fingerprint = _keys(material, gnupg)
    engine, reference, statement = _engine(material, keys, _policy("[platform/gpg-build]", 1))
    assert not evaluate(engine, pod(engine=reference)).allowed  # only the ECDSA key signed it so far
    (material.attestations / "resnet.statement.json").write_bytes(statement)
    signature = gnupg.sign(statement, fingerprint, at=T0 + timedelta(hours=1))
    (material.attestations / "resnet.statement.json.asc").write_bytes(signature)
    engine, reference, _ = _engine(material, keys, _policy("[platform/gpg-build]", 1))
    assert evaluate(engine, pod(engine=reference)).allowed
    # A text-mode signature of the same bytes does not count.
    text = gnupg.sign(statement, fingerprint, at=T0 + timedelta(hours=1), textmode=True)
    (material.attestations / "resnet.statement.json.asc").write_bytes(text)
    engine, reference, _ = _engine(material, keys, _policy("[platform/gpg-build]", 1))
    decision = evaluate(engine, pod(engine=reference))
    assert "not a binary signature over the exact bytes" in decision.violations[0].message


def test_an_openpgp_approval_counts_with_a_dsse_one(material: Material, gnupg: GnuPG) -> None:
    keys, fingerprint = _keys(material, gnupg)
    policy = _policy("[platform/build-signer]", 1) + (
        "  changeControl:\n"
        "    gated: [FirstInt8]\n"
        "    approvals: {keys: [platform/build-signer, platform/gpg-build], threshold: 2}\n"
    )
    int8 = {"typing": "weak", "precision_flags": ["fp16", "int8"], "max_workspace_size": 1 << 30}
    reference = material.engine("resnet", builder_config=int8)
    material.approval("resnet", ["FirstInt8"], "build-signer")
    engine = PolicyEvaluator(
        load_policy_set([material.policy(policy), keys]),
        LocalEvidence(material.attestations),
        clock=lambda: NOW,
    )
    decision = evaluate(engine, pod(engine=reference))
    assert [v.rule for v in decision.violations] == ["changeControl"]
    assert "FirstInt8 needs 1 more (approved by [platform/build-signer])" in decision.violations[0].message
    # The same approval statement, signed by gpg.
    [approval] = material.attestations.glob("approval-resnet-*.json")
    statement = Envelope.from_json(approval.read_bytes()).payload
    (material.attestations / "approval.gpg.json").write_bytes(statement)
    (material.attestations / "approval.gpg.json.asc").write_bytes(
        gnupg.sign(statement, fingerprint, at=T0 + timedelta(hours=1))
    )
    engine = PolicyEvaluator(
        load_policy_set([material.policy(policy), keys]),
        LocalEvidence(material.attestations),
        clock=lambda: NOW,
    )
    assert evaluate(engine, pod(engine=reference)).allowed


def _notation_entry(material: Material, level: str = "strict") -> str:
    (material.root / "ca.crt").write_bytes(make_pki().root.pem())
    return (
        "    - name: notary\n      notation:\n        trustStores: {ca: [ca.crt]}\n"
        '        trustedIdentities: ["*"]\n        registryScopes: ["*"]\n'
        f"        verificationLevel: {level}\n"
    )


@pytest.mark.parametrize(
    ("policy", "problem"),
    [
        (
            'images: [{name: r, match: ["*"], signatures: {keys: [platform/gpg-build]}}]',
            "platform/gpg-build is an OpenPGP key; OpenPGP signatures count for build manifests and change "
            "approvals only",
        ),
        (
            "models: {buildManifest: {keys: [platform/notary]}}",
            "platform/notary is a Notary Project signer; Notation signatures count for image signatures only",
        ),
        (
            "models: {verification: {keys: [platform/gpg-build]}}",
            "platform/gpg-build is an OpenPGP key",
        ),
        (
            "models: {buildManifest: {keys: [platform/gpg-build, platform/gpg-again], threshold: 2}}",
            "platform/gpg-again and platform/gpg-build are the same OpenPGP key",
        ),
    ],
)
def test_signers_are_checked_where_they_are_listed(
    material: Material, gnupg: GnuPG, policy: str, problem: str
) -> None:
    keys, _ = _keys(
        material,
        gnupg,
        extra=_notation_entry(material) + "    - name: gpg-again\n      openpgp: {file: build.asc}\n",
    )
    path = material.policy(
        "apiVersion: trtguard.dev/v1alpha1\nkind: InferencePolicy\nmetadata: {name: p}\n"
        f"spec:\n  {policy}\n"
    )
    assert any(problem in text for text in problems_of(path, keys)), problems_of(path, keys)


def test_a_notation_signer_at_level_skip_does_not_load(material: Material, gnupg: GnuPG) -> None:
    keys, _ = _keys(material, gnupg, extra=_notation_entry(material, "skip"))
    path = material.policy(
        "apiVersion: trtguard.dev/v1alpha1\nkind: InferencePolicy\nmetadata: {name: p}\nspec:\n"
        '  images: [{name: r, match: ["*"], signatures: {keys: [platform/notary]}}]\n'
    )
    problems = problems_of(path, keys)
    assert any("key platform/notary: verification level 'skip' verifies nothing" in p for p in problems), (
        problems
    )


@pytest.mark.parametrize(
    ("entry", "problem"),
    [
        (
            "    - name: both\n      openpgp: {file: build.asc}\n      file: build.pub\n",
            "give exactly one of",
        ),
        ("    - name: armor\n      openpgp: {armored: 'not a key'}\n", "not an OpenPGP public key"),
        (
            "    - name: with-rekor\n      openpgp: {file: build.asc}\n      rekorPublicKey: {file: r.pub}\n",
            "rekorPublicKey",
        ),
        (
            "    - name: dn\n      notation:\n        trustStores: {ca: [ca.crt]}\n"
            '        trustedIdentities: ["x509.subject: CN=only"]\n        registryScopes: ["*"]\n',
            "it lacks C, ST, O",
        ),
    ],
)
def test_malformed_entries_are_load_errors(
    material: Material, gnupg: GnuPG, entry: str, problem: str
) -> None:
    (material.root / "ca.crt").write_bytes(make_pki().root.pem())
    keys, _ = _keys(material, gnupg, extra=entry)
    problems = problems_of(material.policy(_policy("[platform/gpg-build]", 1)), keys)
    assert any(problem in text for text in problems), problems


def test_openpgp_signatures_are_judged_at_the_engines_clock(material: Material, gnupg: GnuPG) -> None:
    """Issue 25: ``check --now`` and ``policy test`` give the engine their clock; an OpenPGP signature is
    judged at it (it was the real clock): one made after it, or expired by then, does not count."""
    assert NOW + timedelta(days=2) < datetime.now(UTC)  # the dates below are all in the real past
    keys, fingerprint = _keys(material, gnupg)
    policy = _policy("[platform/gpg-build]", 1)
    engine, reference, statement = _engine(material, keys, policy)
    (material.attestations / "resnet.statement.json").write_bytes(statement)
    for signed, expires, counts, why in (
        (NOW - timedelta(hours=1), None, True, ""),
        (NOW + timedelta(days=1), None, False, "after the time judged at"),  # was accepted
        (T0 + timedelta(hours=1), "20y", True, ""),
    ):
        signature = gnupg.sign(statement, fingerprint, at=signed, expires=expires)
        (material.attestations / "resnet.statement.json.asc").write_bytes(signature)
        engine, reference, _ = _engine(material, keys, policy)
        decision = evaluate(engine, pod(engine=reference))
        assert decision.allowed == counts, (signed, decision.violations)
        if not counts:
            assert why in decision.violations[0].message

"""The public sigstore-conformance ``bundle-verify`` suite through ``trtguard verify-bundle``.

Every case folder of ``tests/data/sigstore-conformance/bundle-verify`` (SOURCES.md there: repository, commit,
licence) runs through the real command line (``trtguard.cli.main``, the ``trtguard`` entry point, same argv
parsing and error printing), with the arguments the suite's own harness builds (``test/client.py``
``build_verify_args``): ``--bundle``, then ``--key`` when the folder has ``key.pub``, else
``--certificate-identity``/``--certificate-oidc-issuer`` (the folder's ``identity``/``issuer`` files or the
suite's defaults), ``--trusted-root`` when the folder has one, and the artifact (the folder's ``artifact`` or
``a.txt``) once as a path and once as ``sha256:<digest>``, as the suite does. A folder whose name ends in
``_fail`` must fail (non-zero exit, the reason on standard error), any other must verify (exit 0).

Cases without ``trusted_root.json`` run against the production root the suite would fetch; trtguard reads the
snapshot sigstore-python ships (``TrustRoot.public_good``), which covers every such case here.

Expected failures follow sigstore-python's harness: a case that cannot get its upstream verdict is listed in
``EXPECTED_FAILURES`` with the reason, becomes a strict xfail (noticed when it starts passing), and is listed
in docs/signatures.md. There are none at the pinned commit.

Each failing case also names the reason trtguard gives (``FAIL_REASONS``): a verdict reached for the wrong
reason (a crash, an unrelated parse error) would pass the upstream check and still be a bug.
"""

from __future__ import annotations

import base64
import hashlib
import json
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes

from trtguard.cli import main
from verifier.crypto._keys import PublicKey

SUITE = Path(__file__).resolve().parents[2] / "data" / "sigstore-conformance" / "bundle-verify"
IDENTITY = (
    "https://github.com/sigstore-conformance/extremely-dangerous-public-oidc-beacon/.github/workflows/"
    "extremely-dangerous-oidc-beacon.yml@refs/heads/main"
)
ISSUER = "https://token.actions.githubusercontent.com"

#: Cases that cannot get their upstream verdict, with the reason (none at the pinned commit).
EXPECTED_FAILURES: dict[str, str] = {}

#: What trtguard says for each case the suite expects to fail.
FAIL_REASONS = {
    "bundle-empty-certificate-chain_fail": "x509CertificateChain.certificates empty",
    "bundle-from-wrong-instance_fail": "logged by an unknown log",
    "bundle-invalid-base64-signature_fail": "messageSignature.signature not valid base64",
    "bundle-malformed-json_fail": "the document is not JSON",
    "bundle-negative-log-index_fail": "log index -1 is negative",
    "bundle-unknown-version_fail": "is not a supported bundle version",
    # The chain carries the root CA (protobuf-specs' client policy forbids it). Its signature, by a P-384
    # certificate over a SHA-256 digest, verifies (test_a_p384_certificate_signs_sha256_digests).
    "bundle-with-root-cert_fail": "a root CA certificate, which a bundle's chain must not hold",
    "checkpoint-bad-keyhint_fail": "the checkpoint carries no signature by the log's key",
    "checkpoint-wrong-roothash_fail": "the checkpoint signs another tree head than the inclusion proof's",
    "dsse-invalid-sig_fail": "does not verify with the signing certificate's key",
    "dsse-mismatch-envelope_fail": "records a different DSSE payload hash",
    "dsse-mismatch-sig_fail": "does not record this signature by this signer",
    "inclusion-proof-corrupted-hash_fail": "the inclusion proof does not lead to the checkpoint's root hash",
    "incorrect-public-key_fail": "records a different signing key or certificate",
    "integrated-time-in-future_fail": "the signing certificate was not valid at 2026-05-07T15:34:11",
    "intoto-expired-certificate_fail": "the signing certificate was not valid at 2023-02-01T00:00:00",
    "intoto-log-entry-mismatch_fail": "does not record this signature by this signer",
    "intoto-missing-inclusion-proof_fail": "tlogEntries[0].inclusionProof missing (a v0.2 bundle must",
    "intoto-set-outside-signing-cert-validity_fail": "not valid at 2023-02-02T00:00:00",
    "intoto-tsa-timestamp-outside-cert-validity_fail": "not valid at 2023-02-02T00:00:00",
    "invalid-checkpoint-signature_fail": "the checkpoint's signature does not verify with the log key",
    "invalid-ct-key_fail": "no SCT in the signing certificate verifies with a trusted CT log key",
    "invalid-inclusion-proof_fail": "inclusionProof.checkpoint missing",
    "managed-key-no-key_fail": "the bundle is signed with a key, but the policy trusts only identities",
    "managed-key-wrong-key_fail": "the public key PEM block does not parse",
    "message-digest-mismatch_fail": "the bundle signs sha256:a1cfc712",
    "rekor2-checkpoint-missing-log-signature_fail": "the checkpoint's signature lines do not end",
    "rekor2-checkpoint-missing-origin_fail": "needs an origin, a tree size and a root hash",
    "rekor2-checkpoint-missing-root-hash_fail": "needs an origin, a tree size and a root hash",
    "rekor2-checkpoint-missing-size_fail": "needs an origin, a tree size and a root hash",
    "rekor2-checkpoint-no-matching-signature_fail": "the checkpoint is for log 'log2025-alpha1.rekor.github",
    "rekor2-dsse-invalid-sig_fail": "does not verify with the signing certificate's key",
    "rekor2-dsse-mismatch-envelope_fail": "records a different DSSE envelope (PAE digest)",
    "rekor2-dsse-mismatch-sig_fail": "records a different signature",
    "rekor2-no-inclusion-proof_fail": "inclusionProof missing (a v0.3 bundle must carry it)",
    "rekor2-no-timestamp_fail": "the signature has no signed time",
    "rekor2-timestamp-outside-trust-root-tsa-validity_fail": "timestamp 0 (2025-06-12T12:02:20+00:00) is not",
    "rekor2-timestamp-outside-tsa-cert-validity_fail": "timestamp 0 (2025-08-07T15:38:32+00:00) is not",
    "rekor2-timestamp-payload-mismatch_fail": "timestamp 0 (2025-07-15T10:12:52+00:00) is not signed",
    # rfc3161-client refuses the token's non-canonical DER (certificates out of SET order): no time either way
    "rekor2-timestamp-untrusted-tsa-with-embedded-cert_fail": "timestamp 0 does not decode",
    "rekor2-timestamp-untrusted-tsa-without-embedded-cert_fail": "timestamp 0 (2025-08-06T19:40:29+00:00)",
    "rekor2-timestamp-with-incorrect-time_fail": "the signing certificate was not valid at 2025-07-15T10:33",
    "set-invalid-signature_fail": "the Rekor signed entry timestamp (SET) does not verify",
    "signature-mismatch_fail": "does not verify with the signing certificate's key",
    "trust-root-tlog-missing-validity-start_fail": "tlogs[1].publicKey.validFor.start is unusable: missing",
    "wrong-hashedrekord-artifact_fail": "records a different artifact hash",
    "wrong-hashedrekord-cert-and-sig_fail": "records a different signature",
    "wrong-hashedrekord-entry_fail": "records a different artifact hash",
    "wrong-material_fail": "the bundle signs sha256:a0cfc712",
}

CASES = sorted(path.name for path in SUITE.iterdir() if path.is_dir())


def _argv(case: Path, *, digest: bool) -> list[str]:
    """The arguments sigstore-conformance's ``build_verify_args`` passes, in its order."""
    argv = ["verify-bundle", "--bundle", str(case / "bundle.sigstore.json")]
    if (case / "key.pub").exists():
        argv += ["--key", str(case / "key.pub")]
    else:
        identity = case / "identity"
        issuer = case / "issuer"
        argv += [
            "--certificate-identity",
            identity.read_text().strip() if identity.exists() else IDENTITY,
            "--certificate-oidc-issuer",
            issuer.read_text().strip() if issuer.exists() else ISSUER,
        ]
    if (case / "trusted_root.json").exists():
        argv += ["--trusted-root", str(case / "trusted_root.json")]
    artifact = case / "artifact" if (case / "artifact").exists() else SUITE / "a.txt"
    argv.append(f"sha256:{hashlib.sha256(artifact.read_bytes()).hexdigest()}" if digest else str(artifact))
    return argv


def _params() -> list[object]:
    params: list[object] = []
    for name in CASES:
        marks = (
            [pytest.mark.xfail(reason=EXPECTED_FAILURES[name], strict=True)]
            if name in EXPECTED_FAILURES
            else []
        )
        for form in ("path", "digest"):
            params.append(pytest.param(name, form, marks=marks, id=f"{name}[{form}]"))
    return params


def test_the_whole_suite_is_here() -> None:
    # 70 case folders at the pinned commit; a partial copy would quietly test less.
    assert len(CASES) == 70
    assert set(FAIL_REASONS) == {name for name in CASES if name.endswith("_fail")}
    assert set(EXPECTED_FAILURES) <= set(CASES)


@pytest.mark.parametrize(("name", "form"), _params())
def test_bundle_verify_case(name: str, form: str, capsys: pytest.CaptureFixture[str]) -> None:
    status = main(_argv(SUITE / name, digest=form == "digest"))
    out, err = capsys.readouterr()
    if name.endswith("_fail"):
        assert status in (1, 2), out
        assert err.startswith("trtguard: error: ")
        assert "Traceback" not in err
        assert FAIL_REASONS[name] in " ".join(err.split())
    else:
        assert status == 0, err
        assert out.startswith("Verified OK: ")
        assert "transparency log: verified" in out


def test_a_p384_certificate_signs_sha256_digests() -> None:
    # Issue 25: sigstore-python and sigstore-go verify a signing certificate's key over the bundle's SHA-256
    # digest whatever its curve; trtguard refused P-384 with SHA-256. The suite's one P-384 signature.
    case = SUITE / "bundle-with-root-cert_fail"
    bundle = json.loads((case / "bundle.sigstore.json").read_text())
    chain = bundle["verificationMaterial"]["x509CertificateChain"]["certificates"]
    key = PublicKey.from_certificate(x509.load_der_x509_certificate(base64.b64decode(chain[0]["rawBytes"])))
    signature = base64.b64decode(bundle["messageSignature"]["signature"])
    digest = hashlib.sha256((case / "artifact").read_bytes()).digest()
    assert key.algorithm == "ecdsa-secp384r1"
    assert key.verify_digest(signature, digest, hashes.SHA256())
    assert not key.verify_digest(signature, hashlib.sha256(b"other").digest(), hashes.SHA256())

"""Interop: the public cosign / Sigstore vectors in shared/fixtures/cosign (SOURCES.md §3.2) through
verifier.signatures, and altered copies of each (a flipped byte in payload, signature or digest), which must
be rejected for the right reason.

Notation envelopes (cosign/notation) are out of scope: trtguard does not verify Notation signatures.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pytest

from verifier import signatures
from verifier.errors import VerificationError
from verifier.keys import InvalidKey, PublicKey
from verifier.signatures import (
    CosignSignature,
    KeylessIdentity,
    NoSignatures,
    TrustPolicy,
    TrustRoot,
    VerificationResult,
)

COSIGN = Path("cosign")
CI = COSIGN / "containers-image"
CR = COSIGN / "connaisseur-registry"
CONF = COSIGN / "bundles" / "conformance"
GITHUB_OAUTH = "https://github.com/login/oauth"
BEACON = KeylessIdentity(
    issuer="https://token.actions.githubusercontent.com",
    subject="https://github.com/sigstore-conformance/extremely-dangerous-public-oidc-beacon/.github/workflows/"
    "extremely-dangerous-oidc-beacon.yml@refs/heads/main",
)


def _sha256(path: Path) -> str:
    return "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()


def _attachment(path: Path) -> CosignSignature:
    """containers/image `dir:` attachment: b"\\x00sigstore-json\\n" + {mimeType, payload, annotations}."""
    raw = path.read_bytes()
    prefix = b"\x00sigstore-json\n"
    assert raw.startswith(prefix)
    document = json.loads(raw[len(prefix) :])
    return CosignSignature.from_layer(
        base64.b64decode(document["payload"]), document["mimeType"], document["annotations"]
    )


def _sig_manifest(root: Path, name: str) -> list[CosignSignature]:
    """A `.sig` manifest and its blobs, checked the way the registry client checks them (digest and size)."""
    manifest = json.loads((root / CR / "manifests" / name).read_bytes())
    layers = []
    for layer in manifest["layers"]:
        blob = (root / CR / "blobs" / (layer["digest"].replace(":", "-") + ".json")).read_bytes()
        assert f"sha256:{hashlib.sha256(blob).hexdigest()}" == layer["digest"]
        assert len(blob) == layer["size"]
        layers.append(CosignSignature.from_layer(blob, layer["mediaType"], layer["annotations"]))
    return layers


@dataclass(frozen=True)
class Case:
    """One §3.2 row: how to build the inputs and the policy, and what verifies."""

    name: str
    signatures: Callable[[Path], list[CosignSignature]] = lambda root: []
    bundle: Path | None = None
    digest: Callable[[Path], str] = lambda root: ""
    keys: dict[str, Path] = field(default_factory=dict)
    identities: tuple[KeylessIdentity, ...] = ()
    trust_root: Path | None = None
    rekor_keys: tuple[Path, ...] = ()
    require_tlog: bool = False
    threshold: int = 1
    repository: str | None = None
    predicate_type: str | None = None
    expect_keys: tuple[str, ...] = ()
    expect_identities: tuple[str, ...] = ()

    def policy(self, root: Path, **changes: Any) -> TrustPolicy:
        values: dict[str, Any] = {
            "keys": {
                name: PublicKey.from_pem((root / path).read_bytes()) for name, path in self.keys.items()
            },
            "identities": self.identities,
            "trust_root": TrustRoot.from_file(root / self.trust_root) if self.trust_root else None,
            "rekor_keys": tuple(PublicKey.from_pem((root / p).read_bytes()) for p in self.rekor_keys),
            "require_tlog": self.require_tlog,
            "threshold": self.threshold,
        }
        values.update(changes)
        return TrustPolicy(**values)

    def verify(
        self,
        root: Path,
        *,
        policy: TrustPolicy | None = None,
        classic: list[CosignSignature] | None = None,
        bundle: bytes | None = None,
        digest: str | None = None,
    ) -> VerificationResult:
        policy = policy or self.policy(root)
        digest = digest or self.digest(root)
        if self.bundle is not None:
            raw = bundle if bundle is not None else (root / self.bundle).read_bytes()
            return signatures.verify_bundle(raw, policy, digest=digest, predicate_type=self.predicate_type)
        return signatures.verify_image_signatures(
            digest,
            policy,
            classic=classic if classic is not None else self.signatures(root),
            repository=self.repository,
        )


def _payload_digest(payload_path: Path) -> Callable[[Path], str]:
    def digest(root: Path) -> str:
        value: str = json.loads((root / payload_path).read_bytes())["critical"]["image"][
            "docker-manifest-digest"
        ]
        return value

    return digest


def _raw_rekor_signature(root: Path) -> list[CosignSignature]:
    # rekor-sig.b64 over rekor-payload.json, made by the key in rekor-cert.pem; the intermediate comes from
    # the fulcio-rekor-valid attachment's chain annotation (SOURCES.md §3.2).
    chain = _attachment(root / CI / "dir-img-cosign-fulcio-rekor-valid" / "signature-1").chain
    return [
        CosignSignature(
            payload=(root / CI / "raw" / "rekor-payload.json").read_bytes(),
            signature=(root / CI / "raw" / "rekor-sig.b64").read_text().strip(),
            certificate=(root / CI / "raw" / "rekor-cert.pem").read_text(),
            chain=chain,
            rekor_bundle=(root / CI / "raw" / "rekor-set.json").read_text(),
        )
    ]


CASES = [
    Case(
        "containers-image/dir-img-cosign-valid",
        signatures=lambda root: [_attachment(root / CI / "dir-img-cosign-valid" / "signature-1")],
        digest=lambda root: _sha256(root / CI / "dir-img-cosign-valid" / "manifest.json"),
        keys={"cosign": CI / "cosign.pub"},
        repository="192.168.64.2:5000/cosign-signed-single-sample",
        expect_keys=("cosign",),
    ),
    Case(
        "containers-image/dir-img-cosign-valid-with-tag",
        signatures=lambda root: [_attachment(root / CI / "dir-img-cosign-valid-with-tag" / "signature-1")],
        digest=lambda root: _sha256(root / CI / "dir-img-cosign-valid-with-tag" / "manifest.json"),
        keys={"cosign": CI / "cosign.pub", "cosign2": CI / "cosign2.pub"},
        repository="192.168.64.2:5000/skopeo-signed",
        expect_keys=("cosign",),
    ),
    Case(
        "containers-image/dir-img-cosign-key-rekor-valid",
        signatures=lambda root: [_attachment(root / CI / "dir-img-cosign-key-rekor-valid" / "signature-1")],
        digest=lambda root: _sha256(root / CI / "dir-img-cosign-key-rekor-valid" / "manifest.json"),
        keys={"cosign2": CI / "cosign2.pub"},
        rekor_keys=(CI / "rekor.pub",),
        require_tlog=True,
        expect_keys=("cosign2",),
    ),
    Case(
        "containers-image/dir-img-cosign-fulcio-rekor-valid",
        signatures=lambda root: [
            _attachment(root / CI / "dir-img-cosign-fulcio-rekor-valid" / "signature-1")
        ],
        digest=lambda root: _sha256(root / CI / "dir-img-cosign-fulcio-rekor-valid" / "manifest.json"),
        identities=(KeylessIdentity(issuer=GITHUB_OAUTH, subject="mitr@redhat.com"),),
        trust_root=COSIGN / "trust" / "prod-trusted_root.json",
        expect_identities=(f"mitr@redhat.com ({GITHUB_OAUTH})",),
    ),
    Case(
        "containers-image/raw/rekor-sig",
        signatures=_raw_rekor_signature,
        digest=_payload_digest(CI / "raw" / "rekor-payload.json"),
        identities=(KeylessIdentity(issuer=GITHUB_OAUTH, subject_regex=r"[a-z]+@redhat\.com"),),
        trust_root=COSIGN / "trust" / "prod-trusted_root.json",
        expect_identities=(f"mitr@redhat.com ({GITHUB_OAUTH})",),
    ),
    Case(
        "connaisseur/sha256-071bf7a9 (alice)",
        signatures=lambda root: _sig_manifest(
            root, "sha256-071bf7a986f1ca9cb2a1f0bc8392822a7777f90d58f2d2c6f271913e08de7c81.sig.json"
        ),
        digest=lambda root: "sha256:071bf7a986f1ca9cb2a1f0bc8392822a7777f90d58f2d2c6f271913e08de7c81",
        keys={"alice": CR / "keys" / "alice.pub", "default": CR / "keys" / "default.pub"},
        repository="docker.io/securesystemsengineering/testimage",
        expect_keys=("alice",),
    ),
    Case(
        "connaisseur/sha256-bfec161f (alice, bob, charlie)",
        signatures=lambda root: _sig_manifest(
            root, "sha256-bfec161fecb0a887df7cb85e4da327c65986ccda7060cf3cd92171c6c90d7533.sig.json"
        ),
        digest=lambda root: "sha256:bfec161fecb0a887df7cb85e4da327c65986ccda7060cf3cd92171c6c90d7533",
        keys={name: CR / "keys" / f"{name}.pub" for name in ("alice", "bob", "charlie")},
        threshold=3,
        repository="docker.io/securesystemsengineering/testimage",
        expect_keys=("alice", "bob", "charlie"),
    ),
    Case(
        "connaisseur/sha256-31dc72a1 (keyless)",
        signatures=lambda root: _sig_manifest(
            root, "sha256-31dc72a13a0c34b40eb95419d2b2fd67320c856baf3b72da518023ee8d370aee.sig.json"
        ),
        digest=lambda root: "sha256:31dc72a13a0c34b40eb95419d2b2fd67320c856baf3b72da518023ee8d370aee",
        identities=(KeylessIdentity(issuer=GITHUB_OAUTH, subject="philipp.belitz@securesystems.de"),),
        trust_root=COSIGN / "trust" / "prod-trusted_root.json",
        repository="docker.io/phbelitz/rekor-test",
        expect_identities=(f"philipp.belitz@securesystems.de ({GITHUB_OAUTH})",),
    ),
    Case(
        "conformance/managed-key-happy-path",
        bundle=CONF / "managed-key-happy-path" / "bundle.sigstore.json",
        digest=lambda root: _sha256(root / CONF / "a.txt"),
        keys={"key": CONF / "managed-key-happy-path" / "key.pub"},
        trust_root=COSIGN / "trust" / "prod-trusted_root.json",
        require_tlog=True,
        expect_keys=("key",),
    ),
    Case(
        "conformance/managed-key-and-trusted-root",
        bundle=CONF / "managed-key-and-trusted-root" / "bundle.sigstore.json",
        digest=lambda root: _sha256(root / CONF / "a.txt"),
        keys={"key": CONF / "managed-key-and-trusted-root" / "key.pub"},
        trust_root=CONF / "managed-key-and-trusted-root" / "trusted_root.json",
        require_tlog=True,
        expect_keys=("key",),
    ),
    Case(
        "conformance/happy-path-v0.3",
        bundle=CONF / "happy-path-v0.3" / "bundle.sigstore.json",
        digest=lambda root: _sha256(root / CONF / "a.txt"),
        identities=(BEACON,),
        trust_root=COSIGN / "trust" / "prod-trusted_root.json",
        expect_identities=(str(BEACON),),
    ),
    Case(
        "conformance/happy-path-intoto-in-dsse-v3",
        bundle=CONF / "happy-path-intoto-in-dsse-v3" / "bundle.sigstore.json",
        digest=lambda root: _sha256(root / CONF / "a.txt"),
        identities=(BEACON,),
        trust_root=COSIGN / "trust" / "prod-trusted_root.json",
        predicate_type="https://slsa.dev/provenance/v1",
        expect_identities=(str(BEACON),),
    ),
    Case(
        "cosign/oci-attestation",
        bundle=COSIGN / "bundles" / "cosign" / "oci-attestation.sigstore.json",
        digest=lambda root: "sha256:732112270d7e59418a8c080b134b24cabd67d250d0d0147a97ed95ba5c280aa4",
        identities=(KeylessIdentity(issuer_regex=r"https://.*", subject="cody@soyland.com"),),
        trust_root=COSIGN / "bundles" / "cosign" / "trusted_root_pgi.json",
        predicate_type="https://cosign.sigstore.dev/attestation/v1",
        expect_identities=(f"cody@soyland.com ({GITHUB_OAUTH})",),
    ),
    Case(
        "sigstore-python/bundle_v3",
        bundle=COSIGN / "bundles" / "sigstore-python" / "bundle_v3.txt.sigstore",
        digest=lambda root: _sha256(root / COSIGN / "bundles" / "sigstore-python" / "bundle_v3.txt"),
        identities=(KeylessIdentity(issuer=GITHUB_OAUTH, subject="william@yossarian.net"),),
        trust_root=COSIGN / "trust" / "staging-trusted_root.json",
        expect_identities=(f"william@yossarian.net ({GITHUB_OAUTH})",),
    ),
]
CLASSIC = [case for case in CASES if case.bundle is None]
BUNDLES = [case for case in CASES if case.bundle is not None]


def _ids(cases: list[Case]) -> list[str]:
    return [case.name for case in cases]


def _flip(data: bytes, index: int) -> bytes:
    return data[:index] + bytes([data[index] ^ 0x01]) + data[index + 1 :]


def _flip_b64(text: str) -> str:
    raw = base64.b64decode(text)
    return base64.b64encode(_flip(raw, len(raw) // 2)).decode()


def _flip_digest(digest: str) -> str:
    hex_part = digest.removeprefix("sha256:")
    return "sha256:" + ("0" if hex_part[0] != "0" else "1") + hex_part[1:]


@pytest.mark.parametrize("case", CASES, ids=_ids(CASES))
def test_published_vector_verifies(shared_fixtures: Path, case: Case) -> None:
    result = case.verify(shared_fixtures)
    assert result.keys == case.expect_keys
    assert result.identities == case.expect_identities
    assert result.verified == result.threshold == case.threshold
    assert result.tlog_verified == (case.require_tlog or bool(case.identities))
    if case.predicate_type is not None:
        assert result.statement is not None
        assert result.statement.predicate_type == case.predicate_type


@pytest.mark.parametrize("case", CLASSIC, ids=_ids(CLASSIC))
def test_classic_flipped_payload_byte_is_rejected(shared_fixtures: Path, case: Case) -> None:
    altered = [
        replace(s, payload=_flip(s.payload, len(s.payload) // 2)) for s in case.signatures(shared_fixtures)
    ]
    with pytest.raises(VerificationError) as raised:
        case.verify(shared_fixtures, classic=altered)
    message = raised.value.message
    assert "signature present but not made by any trusted key" in message or (
        "does not verify with its certificate's key" in message
    )


@pytest.mark.parametrize("case", CLASSIC, ids=_ids(CLASSIC))
def test_classic_flipped_signature_byte_is_rejected(shared_fixtures: Path, case: Case) -> None:
    altered = [replace(s, signature=_flip_b64(s.signature)) for s in case.signatures(shared_fixtures)]
    with pytest.raises(VerificationError, match=r"0 of \d required signatures") as raised:
        case.verify(shared_fixtures, classic=altered)
    assert (
        "signature present but not made" in raised.value.message
        or "certificate's key" in raised.value.message
    )


@pytest.mark.parametrize("case", CLASSIC, ids=_ids(CLASSIC))
def test_classic_other_image_digest_is_rejected(shared_fixtures: Path, case: Case) -> None:
    digest = _flip_digest(case.digest(shared_fixtures))
    with pytest.raises(VerificationError, match=f"not for the image digest {digest}"):
        case.verify(shared_fixtures, digest=digest)


@pytest.mark.parametrize("case", BUNDLES, ids=_ids(BUNDLES))
def test_bundle_flipped_signature_byte_is_rejected(shared_fixtures: Path, case: Case) -> None:
    assert case.bundle is not None
    document = json.loads((shared_fixtures / case.bundle).read_bytes())
    if "dsseEnvelope" in document:
        signature = document["dsseEnvelope"]["signatures"][0]
    else:
        signature = document["messageSignature"]
    signature["sig" if "sig" in signature else "signature"] = _flip_b64(
        signature["sig" if "sig" in signature else "signature"]
    )
    with pytest.raises(VerificationError):
        case.verify(shared_fixtures, bundle=json.dumps(document).encode())


@pytest.mark.parametrize("case", BUNDLES, ids=_ids(BUNDLES))
def test_bundle_flipped_payload_byte_is_rejected(shared_fixtures: Path, case: Case) -> None:
    assert case.bundle is not None
    document = json.loads((shared_fixtures / case.bundle).read_bytes())
    if "dsseEnvelope" in document:
        document["dsseEnvelope"]["payload"] = _flip_b64(document["dsseEnvelope"]["payload"])
    else:
        digest = document["messageSignature"]["messageDigest"]
        digest["digest"] = _flip_b64(digest["digest"])
    with pytest.raises(VerificationError):
        case.verify(shared_fixtures, bundle=json.dumps(document).encode())


@pytest.mark.parametrize("case", BUNDLES, ids=_ids(BUNDLES))
def test_bundle_for_another_digest_is_rejected(shared_fixtures: Path, case: Case) -> None:
    with pytest.raises(VerificationError, match=r"digest|signs sha256|invalid for input"):
        case.verify(shared_fixtures, digest=_flip_digest(case.digest(shared_fixtures)))


KEYED = [case for case in CASES if case.keys]


@pytest.mark.parametrize("case", KEYED, ids=_ids(KEYED))
def test_wrong_key_is_rejected(shared_fixtures: Path, case: Case) -> None:
    wrong = {"default": PublicKey.from_pem((shared_fixtures / CR / "keys" / "default.pub").read_bytes())}
    policy = case.policy(shared_fixtures, keys=wrong, threshold=1)
    with pytest.raises(
        VerificationError, match=r"signature present but not made by any trusted key"
    ) as raised:
        case.verify(shared_fixtures, policy=policy)
    assert not isinstance(raised.value, NoSignatures)


KEYLESS = [case for case in CASES if case.identities]


@pytest.mark.parametrize("case", KEYLESS, ids=_ids(KEYLESS))
def test_keyless_wrong_identity_is_rejected(shared_fixtures: Path, case: Case) -> None:
    stranger = KeylessIdentity(issuer=GITHUB_OAUTH, subject="mallory@example.com")
    with pytest.raises(VerificationError, match="not trusted"):
        case.verify(shared_fixtures, policy=case.policy(shared_fixtures, identities=(stranger,)))
    wrong_issuer = replace_issuer(case.identities[0], "https://accounts.google.com")
    with pytest.raises(VerificationError, match="not trusted"):
        case.verify(shared_fixtures, policy=case.policy(shared_fixtures, identities=(wrong_issuer,)))


def replace_issuer(identity: KeylessIdentity, issuer: str) -> KeylessIdentity:
    return KeylessIdentity(issuer=issuer, subject=identity.subject, subject_regex=identity.subject_regex)


@pytest.mark.parametrize("case", KEYLESS, ids=_ids(KEYLESS))
def test_keyless_against_another_trusted_root_is_rejected(shared_fixtures: Path, case: Case) -> None:
    # Production signatures under the staging root and vice versa: unknown log / CA, never a pass.
    other = "staging-trusted_root.json" if "staging" not in str(case.trust_root) else "prod-trusted_root.json"
    root = TrustRoot.from_file(shared_fixtures / COSIGN / "trust" / other)
    with pytest.raises(VerificationError):
        case.verify(shared_fixtures, policy=case.policy(shared_fixtures, trust_root=root))


@pytest.mark.parametrize("case", KEYLESS, ids=_ids(KEYLESS))
def test_keyless_signature_with_a_keys_only_policy_is_rejected(shared_fixtures: Path, case: Case) -> None:
    keys_only = TrustPolicy(
        keys={"cosign": PublicKey.from_pem((shared_fixtures / CI / "cosign.pub").read_bytes())}
    )
    with pytest.raises(VerificationError, match=r"not made by any trusted key|trusts only keys"):
        case.verify(shared_fixtures, policy=keys_only)


def test_keyless_classic_without_a_rekor_bundle_is_rejected(shared_fixtures: Path) -> None:
    case = next(c for c in CLASSIC if c.name == "containers-image/dir-img-cosign-fulcio-rekor-valid")
    stripped = [replace(s, rekor_bundle=None) for s in case.signatures(shared_fixtures)]
    with pytest.raises(VerificationError, match="no Rekor bundle, so its signing time cannot be established"):
        case.verify(shared_fixtures, classic=stripped)


def test_keyless_classic_chain_must_end_at_a_trusted_fulcio_ca(shared_fixtures: Path) -> None:
    # Swap the Fulcio leaf for one from another signature: the signature no longer matches its certificate.
    case = next(c for c in CLASSIC if c.name == "containers-image/dir-img-cosign-fulcio-rekor-valid")
    other = _sig_manifest(
        shared_fixtures, "sha256-31dc72a13a0c34b40eb95419d2b2fd67320c856baf3b72da518023ee8d370aee.sig.json"
    )[0]
    swapped = [replace(s, certificate=other.certificate) for s in case.signatures(shared_fixtures)]
    with pytest.raises(VerificationError, match="does not verify with its certificate's key"):
        case.verify(shared_fixtures, classic=swapped)


def test_keyless_classic_set_from_another_entry_is_rejected(shared_fixtures: Path) -> None:
    case = next(c for c in CLASSIC if c.name == "containers-image/dir-img-cosign-fulcio-rekor-valid")
    other = _attachment(shared_fixtures / CI / "dir-img-cosign-key-rekor-valid" / "signature-1")
    swapped = [replace(s, rekor_bundle=other.rekor_bundle) for s in case.signatures(shared_fixtures)]
    with pytest.raises(VerificationError, match="Rekor entry records a different"):
        case.verify(shared_fixtures, classic=swapped)


def test_connaisseur_default_key_verifies_nothing(shared_fixtures: Path) -> None:
    default = {"default": PublicKey.from_pem((shared_fixtures / CR / "keys" / "default.pub").read_bytes())}
    for case in (c for c in CLASSIC if c.name.startswith("connaisseur")):
        with pytest.raises(VerificationError, match="0 of 1 required signatures from keys \\[default\\]"):
            case.verify(shared_fixtures, policy=TrustPolicy(keys=default))


def test_negative_modified_manifest(shared_fixtures: Path) -> None:
    case = CASES[0]
    digest = _sha256(shared_fixtures / CI / "negative" / "modified-manifest.json")
    with pytest.raises(VerificationError, match="the signature is for sha256:634a8f35") as raised:
        case.verify(shared_fixtures, digest=digest)
    assert "sign" in (raised.value.hint or "")


def test_negative_unknown_cosign_key(shared_fixtures: Path) -> None:
    case = CASES[0]
    policy = case.policy(
        shared_fixtures,
        keys={
            "cosign": PublicKey.from_pem((shared_fixtures / CI / "cosign.pub").read_bytes()),
            "cosign2": PublicKey.from_pem((shared_fixtures / CI / "cosign2.pub").read_bytes()),
        },
    )
    unknown = [_attachment(shared_fixtures / CI / "negative" / "unknown-cosign-key.signature")]
    with pytest.raises(VerificationError, match="signature present but not made by any trusted key"):
        case.verify(shared_fixtures, policy=policy, classic=unknown)


def test_negative_other_attachment(shared_fixtures: Path) -> None:
    case = CASES[0]
    other = [_attachment(shared_fixtures / CI / "negative" / "other-attachment.signature-1")]
    with pytest.raises(VerificationError, match="'text/plain' is not a cosign simple-signing payload"):
        case.verify(shared_fixtures, classic=other)


def test_negative_signature_mismatch_bundle(shared_fixtures: Path) -> None:
    case = next(c for c in BUNDLES if c.name == "conformance/happy-path-v0.3")
    raw = (shared_fixtures / CONF / "signature-mismatch_fail" / "bundle.sigstore.json").read_bytes()
    with pytest.raises(VerificationError, match="keyless bundle does not verify: Signature is invalid"):
        case.verify(shared_fixtures, bundle=raw)


def test_negative_managed_key_wrong_key_is_a_key_parse_error(shared_fixtures: Path) -> None:
    folder = shared_fixtures / CONF / "managed-key-wrong-key_fail"
    assert (folder / "bundle.sigstore.json").read_bytes() == (
        shared_fixtures / CONF / "managed-key-happy-path" / "bundle.sigstore.json"
    ).read_bytes()
    with pytest.raises(InvalidKey, match="the public key PEM block does not parse"):
        PublicKey.from_pem((folder / "key.pub").read_bytes())


def test_managed_key_set_needs_the_matching_log(shared_fixtures: Path) -> None:
    # The production bundle's SET does not verify under the staging root: its log is unknown there.
    case = next(c for c in BUNDLES if c.name == "conformance/managed-key-happy-path")
    staging = TrustRoot.from_file(shared_fixtures / COSIGN / "trust" / "staging-trusted_root.json")
    with pytest.raises(VerificationError, match="unknown log"):
        case.verify(shared_fixtures, policy=case.policy(shared_fixtures, trust_root=staging))


def test_rekor_public_key_is_the_production_log(shared_fixtures: Path) -> None:
    rekor = PublicKey.from_pem((shared_fixtures / CI / "rekor.pub").read_bytes())
    root = TrustRoot.from_file(shared_fixtures / COSIGN / "trust" / "prod-trusted_root.json")
    assert rekor.key_id in {log.log_id.hex() for log in root.rekor_logs}


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        (
            lambda d: d["verificationMaterial"]["certificate"].update(
                rawBytes=base64.b64encode(b"junk").decode()
            ),
            "error parsing asn1",
        ),
        (
            lambda d: d["verificationMaterial"]["tlogEntries"][0].update(
                canonicalizedBody=base64.b64encode(b'{"kind": "x"}').decode()
            ),
            "invalid log entry",
        ),
        (
            lambda d: d["verificationMaterial"]["tlogEntries"][0]["inclusionProof"].update(hashes=[]),
            "wrong size",
        ),
        (
            lambda d: d["verificationMaterial"]["tlogEntries"][0]["inclusionProof"]["checkpoint"].update(
                envelope="junk"
            ),
            "invalid log entry",
        ),
        (lambda d: d["verificationMaterial"].update(tlogEntries=[]), "expected exactly one log entry"),
    ],
    ids=["certificate", "entry-body", "inclusion-proof", "checkpoint", "no-entry"],
)
def test_keyless_bundle_tampering_is_a_clean_failure(
    shared_fixtures: Path, change: Callable[[dict[str, Any]], None], reason: str
) -> None:
    case = next(c for c in BUNDLES if c.name == "conformance/happy-path-v0.3")
    assert case.bundle is not None
    document = json.loads((shared_fixtures / case.bundle).read_bytes())
    change(document)
    with pytest.raises(VerificationError, match=f"the keyless bundle does not verify: .*{reason}"):
        case.verify(shared_fixtures, bundle=json.dumps(document).encode())


def test_model_signing_p384_key_bundle(shared_fixtures: Path) -> None:
    # OpenSSF model signing v1.1.0 (SOURCES.md §3.2): a key-signed bundle, P-384 with SHA-384 over the PAE.
    # Its subject is the root digest: sha256 over the files' raw sha256 digests in name order.
    folder = shared_fixtures / "model-signing" / "v1.1.0-elliptic-key"
    root_digest = hashlib.sha256(
        b"".join(hashlib.sha256((folder / name).read_bytes()).digest() for name in ("signme-1", "signme-2"))
    ).hexdigest()
    key = PublicKey.from_pem(
        (shared_fixtures / "model-signing" / "keys" / "signing-key-pub.pem").read_bytes()
    )
    assert key.algorithm == "ecdsa-secp384r1"
    raw = (folder / "model.sig").read_bytes()
    result = signatures.verify_bundle(
        raw,
        TrustPolicy(keys={"model-signer": key}),
        digest=f"sha256:{root_digest}",
        predicate_type="https://model_signing/signature/v1.0",
    )
    assert result.keys == ("model-signer",)
    with pytest.raises(VerificationError, match="subject digest mismatch"):
        signatures.verify_bundle(
            raw, TrustPolicy(keys={"model-signer": key}), digest=_flip_digest(f"sha256:{root_digest}")
        )

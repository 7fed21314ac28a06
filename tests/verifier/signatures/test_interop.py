"""Interop: the public cosign / Sigstore vectors in shared/fixtures/cosign (SOURCES.md §3.2) through
verifier.signatures, and altered copies of each (a flipped byte in payload, signature or digest), which must
be rejected for the right reason.

The Notation envelopes (cosign/notation) are verified in ``notation/test_interop.py`` beside this file.
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
from verifier.base._errors import InputError, VerificationError
from verifier.crypto._dsse import Envelope
from verifier.crypto._keys import InvalidKey, PublicKey
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
    with pytest.raises(VerificationError, match="the signature does not verify with the signing certificate"):
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


def _entry(document: dict[str, Any]) -> dict[str, Any]:
    entry: dict[str, Any] = document["verificationMaterial"]["tlogEntries"][0]
    return entry


def _flip_checkpoint_signature(document: dict[str, Any]) -> None:
    proof = _entry(document)["inclusionProof"]
    note, signature_line = proof["checkpoint"]["envelope"].split("\n\n")
    dash, name, signature = signature_line.rstrip("\n").split(" ")
    proof["checkpoint"]["envelope"] = f"{note}\n\n{dash} {name} {_flip_b64(signature)}\n"


#: Mutations of every signed field of a bundle's log entry and signature, with the reason each must give.
LOG_MUTATIONS: list[tuple[str, Callable[[dict[str, Any]], None], str]] = [
    (
        "proof-hash",
        lambda d: _entry(d)["inclusionProof"]["hashes"].__setitem__(
            0, _flip_b64(_entry(d)["inclusionProof"]["hashes"][0])
        ),
        "the inclusion proof does not lead to the checkpoint's root hash",
    ),
    (
        "proof-hash-missing",
        lambda d: _entry(d)["inclusionProof"]["hashes"].pop(),
        "fewer hashes than the tree has levels",
    ),
    (
        "root-hash",
        lambda d: _entry(d)["inclusionProof"].update(
            rootHash=_flip_b64(_entry(d)["inclusionProof"]["rootHash"])
        ),
        "the checkpoint signs another tree head than the inclusion proof's",
    ),
    (
        "tree-size",
        lambda d: _entry(d)["inclusionProof"].update(
            treeSize=str(int(_entry(d)["inclusionProof"]["treeSize"]) + 1)
        ),
        "the checkpoint signs another tree head than the inclusion proof's",
    ),
    (
        "proof-log-index",
        lambda d: _entry(d)["inclusionProof"].update(
            logIndex=str(int(_entry(d)["inclusionProof"]["logIndex"]) - 1)
        ),
        "the inclusion proof (does not lead|has fewer hashes)",
    ),
    ("checkpoint-signature", _flip_checkpoint_signature, "the checkpoint's signature does not verify"),
    (
        "checkpoint-text",
        lambda d: _entry(d)["inclusionProof"]["checkpoint"].update(
            envelope=_entry(d)["inclusionProof"]["checkpoint"]["envelope"].replace("\n", "\nx", 1)
        ),
        "the checkpoint",
    ),
    (
        "set",
        lambda d: _entry(d)["inclusionPromise"].update(
            signedEntryTimestamp=_flip_b64(_entry(d)["inclusionPromise"]["signedEntryTimestamp"])
        ),
        r"the Rekor signed entry timestamp \(SET\) does not verify",
    ),
    (
        "integrated-time",
        lambda d: _entry(d).update(integratedTime=str(int(_entry(d)["integratedTime"]) - 1)),
        r"the Rekor signed entry timestamp \(SET\) does not verify",
    ),
    (
        "log-index",
        lambda d: _entry(d).update(logIndex=str(int(_entry(d)["logIndex"]) + 1)),
        r"the Rekor signed entry timestamp \(SET\) does not verify",
    ),
    (
        "log-id",
        lambda d: _entry(d)["logId"].update(keyId=_flip_b64(_entry(d)["logId"]["keyId"])),
        "unknown log",
    ),
    (
        "body",
        lambda d: _entry(d).update(
            canonicalizedBody=base64.b64encode(
                base64.b64decode(_entry(d)["canonicalizedBody"]).replace(b'"spec"', b'"spec" ')
            ).decode()
        ),
        "does not verify",
    ),
    (
        "signature",
        lambda d: d["messageSignature"].update(signature=_flip_b64(d["messageSignature"]["signature"])),
        "not made by any trusted key|does not verify with the signing certificate",
    ),
]


@pytest.mark.parametrize(
    ("change", "reason"), [pytest.param(change, reason, id=name) for name, change, reason in LOG_MUTATIONS]
)
@pytest.mark.parametrize("name", ["conformance/managed-key-happy-path", "conformance/happy-path-v0.3"])
def test_every_signed_field_of_a_bundle_is_checked(
    shared_fixtures: Path, name: str, change: Callable[[dict[str, Any]], None], reason: str
) -> None:
    # Key-signed and keyless bundles alike: one flipped bit anywhere the log or the signer signed fails.
    case = next(c for c in BUNDLES if c.name == name)
    assert case.bundle is not None
    assert case.verify(shared_fixtures).tlog_verified
    document = json.loads((shared_fixtures / case.bundle).read_bytes())
    change(document)
    with pytest.raises(VerificationError, match=reason):
        case.verify(shared_fixtures, bundle=json.dumps(document).encode())


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        (
            lambda d: d["verificationMaterial"]["certificate"].update(
                rawBytes=base64.b64encode(b"junk").decode()
            ),
            "field verificationMaterial.certificate.rawBytes not a DER certificate",
        ),
        (
            lambda d: _entry(d).update(canonicalizedBody=base64.b64encode(b'{"kind": "x"}').decode()),
            "the Rekor entry body names no kind and apiVersion",
        ),
        (lambda d: _entry(d)["inclusionProof"].update(hashes=[]), "fewer hashes than the tree has levels"),
        (
            lambda d: _entry(d)["inclusionProof"]["checkpoint"].update(envelope="junk"),
            "the checkpoint is not a signed note",
        ),
        (
            lambda d: d["verificationMaterial"].update(tlogEntries=[]),
            "the bundle has no transparency log entry",
        ),
        (lambda d: d["verificationMaterial"].pop("tlogEntries"), "the bundle has no transparency log entry"),
    ],
    ids=["certificate", "entry-body", "inclusion-proof", "checkpoint", "no-entry", "entries-omitted"],
)
def test_keyless_bundle_tampering_is_a_clean_failure(
    shared_fixtures: Path, change: Callable[[dict[str, Any]], None], reason: str
) -> None:
    case = next(c for c in BUNDLES if c.name == "conformance/happy-path-v0.3")
    assert case.bundle is not None
    document = json.loads((shared_fixtures / case.bundle).read_bytes())
    change(document)
    with pytest.raises(VerificationError, match=reason):
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


# --- trusted roots as private deployments write them -------------------------------------------------------


def _strip_optional(root: dict[str, Any]) -> dict[str, Any]:
    """What the schema leaves optional, left out: CA and TSA subjects and URIs, hash algorithms."""
    for authority in root.get("certificateAuthorities", []) + root.get("timestampAuthorities", []):
        authority.pop("uri", None)
        authority.get("subject", {}).pop("commonName", None)
    for log in root.get("tlogs", []) + root.get("ctlogs", []):
        log.pop("hashAlgorithm", None)
        log["publicKey"].pop("keyDetails", None)
    root["certificateAuthorities"][0].pop("subject", None)
    return root


def test_trusted_root_without_optional_fields(shared_fixtures: Path, tmp_path: Path) -> None:
    # sigstore/scaffolding writes CA subjects without commonName for private deployments.
    root = json.loads((shared_fixtures / COSIGN / "trust" / "prod-trusted_root.json").read_bytes())
    path = tmp_path / "trusted_root.json"
    path.write_text(json.dumps(_strip_optional(root)))
    case = next(c for c in BUNDLES if c.name == "conformance/happy-path-v0.3")
    result = case.verify(
        shared_fixtures, policy=case.policy(shared_fixtures, trust_root=TrustRoot.from_file(path))
    )
    assert result.identities == case.expect_identities


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (
            lambda r: r["tlogs"][0]["publicKey"]["validFor"].pop("start"),
            r"tlogs\[0\]\.publicKey\.validFor\.start",
        ),
        (lambda r: r["tlogs"][0]["publicKey"].pop("validFor"), r"tlogs\[0\]\.publicKey\.validFor is"),
        (lambda r: r["tlogs"][0].pop("logId"), r"tlogs\[0\]\.logId is unusable: missing"),
        (
            lambda r: r["tlogs"][0]["publicKey"].update(rawBytes=base64.b64encode(b"junk").decode()),
            r"tlogs\[0\]\.publicKey\.rawBytes is unusable: the public key DER does not parse",
        ),
        (
            lambda r: r["certificateAuthorities"][0]["certChain"].update(certificates=[]),
            r"certificateAuthorities\[0\]\.certChain\.certificates is unusable: empty",
        ),
        (
            lambda r: r["ctlogs"][0]["publicKey"]["validFor"].update(start="yesterday"),
            r"ctlogs\[0\]\.publicKey\.validFor\.start is unusable: expected an RFC 3339 time",
        ),
    ],
)
def test_trusted_root_fields_verification_needs_are_named(
    shared_fixtures: Path, tmp_path: Path, change: Callable[[dict[str, Any]], None], field: str
) -> None:
    root = json.loads((shared_fixtures / COSIGN / "trust" / "prod-trusted_root.json").read_bytes())
    change(root)
    path = tmp_path / "trusted_root.json"
    path.write_text(json.dumps(root))
    with pytest.raises(InputError, match=f"the trusted root field {field}"):
        TrustRoot.from_file(path)


# --- intoto entries (cosign v2 attest, npm provenance) -----------------------------------------------------

CUSTOM_ROOT = Path(__file__).resolve().parents[2] / "data" / "sigstore-conformance" / "bundle-verify"


def test_keyless_intoto_entry_with_its_statement() -> None:
    folder = CUSTOM_ROOT / "intoto-with-custom-trust-root"
    policy = TrustPolicy(identities=(BEACON,), trust_root=TrustRoot.from_file(folder / "trusted_root.json"))
    raw = (folder / "bundle.sigstore.json").read_bytes()
    result = signatures.verify_bundle(
        raw, policy, digest=_sha256(folder / "artifact"), predicate_type="https://slsa.dev/provenance/v1"
    )
    assert (result.identities, result.tlog_verified) == ((str(BEACON),), True)
    assert result.statement is not None
    # The entry records the envelope's payload hash and signature; another payload is refused.
    document = json.loads(raw)
    payload = base64.b64decode(document["dsseEnvelope"]["payload"]).replace(b"d.txt", b"e.txt")
    document["dsseEnvelope"]["payload"] = base64.b64encode(payload).decode()
    with pytest.raises(VerificationError, match="does not verify with the signing certificate's key"):
        signatures.verify_bundle(json.dumps(document), policy, digest=_sha256(folder / "artifact"))


# --- cosign's blob-attestation vectors (tests/data/cosign-test-vectors, SOURCES.md) -------------------------

BLOB_ATTESTATION = Path(__file__).resolve().parents[2] / "data" / "cosign-test-vectors" / "blob-attestation"


def _cosign_attestation(name: str) -> Envelope:
    return Envelope.from_json((BLOB_ATTESTATION / f"{name}.dsse.json").read_bytes())


@pytest.mark.parametrize(
    ("name", "blob", "reason"),
    [
        ("blobSLSAProvenanceSignature", "blob", None),
        ("dssePredicateMultipleSubjects", "blob", None),
        ("blobSLSAProvenanceSignature", "other-blob", "subject digest mismatch"),
        ("dssePredicateEmptySubject", "blob", "invalid in-toto statement"),
        ("dssePredicateMissingSha256", "blob", "invalid in-toto statement"),
        ("dssePredicateMultipleSubjectsInvalid", "blob", "subject digest mismatch"),
    ],
)
def test_cosign_blob_attestation_vectors(name: str, blob: str, reason: str | None) -> None:
    key = PublicKey.from_pem((BLOB_ATTESTATION / "cosign.pub").read_bytes())
    policy = TrustPolicy(keys={"cosign": key})
    digest = _sha256(BLOB_ATTESTATION / blob)

    def verify() -> VerificationResult:
        return signatures.verify_attestation(
            _cosign_attestation(name),
            policy,
            subject_digest=digest,
            predicate_type="https://slsa.dev/provenance/v0.2",
        )

    if reason is None:
        assert verify().keys == ("cosign",)
    else:
        with pytest.raises((VerificationError, InputError), match=reason):
            verify()


def test_cosign_blob_attestation_as_a_key_signed_bundle() -> None:
    # cosign's "verify new bundle with public key" case: the same envelope in a bundle without a log entry.
    envelope = _cosign_attestation("blobSLSAProvenanceSignature")
    bundle = json.dumps(
        {
            "mediaType": signatures.BUNDLE_MEDIA_TYPE,
            "verificationMaterial": {"publicKey": {"hint": ""}},
            "dsseEnvelope": envelope.to_dict(),
        }
    )
    key = PublicKey.from_pem((BLOB_ATTESTATION / "cosign.pub").read_bytes())
    digest = "sha256:658781cd4ed9bca60dacd09f7bb914bb51502e8b5d619f57f39a1d652596cc24"
    result = signatures.verify_bundle(
        bundle,
        TrustPolicy(keys={"cosign": key}),
        digest=digest,
        predicate_type="https://slsa.dev/provenance/v0.2",
    )
    assert (result.keys, result.tlog_verified) == (("cosign",), False)
    bad = json.loads(bundle)
    bad["dsseEnvelope"]["signatures"][0]["sig"] = base64.b64encode(b"something\n").decode()
    with pytest.raises(VerificationError, match="not made by any trusted key"):
        signatures.verify_bundle(json.dumps(bad), TrustPolicy(keys={"cosign": key}), digest=digest)

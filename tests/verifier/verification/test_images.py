"""verifier/verification/_images.py: a rule's signers become one signature policy, and an image's signatures
come back verified, each signer counted once.

Issue 25's review (overlapping identities): one keyless certificate that two identity entries of a rule both
admit must count once toward a threshold, however many copies of its signature are found. The signature is
containers/image's keyless test signature (Fulcio certificate for mitr@redhat.com, Rekor SET), checked
offline against Sigstore's production trusted root.
"""

from __future__ import annotations

import base64
import hashlib
import json
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pytest

from verifier.base import VerificationError
from verifier.evidence import ImageSignatures
from verifier.signatures import CosignSignature, KeylessIdentity, TrustRoot
from verifier.verification import image_trust, verify_image

SAMPLE = Path("cosign") / "containers-image" / "dir-img-cosign-fulcio-rekor-valid"
ISSUER = "https://github.com/login/oauth"


@dataclass(frozen=True)
class Signer:
    """A policy's keyless signer, as :func:`image_trust` reads one."""

    identity: KeylessIdentity
    trust_root: TrustRoot
    public_key: None = None
    notation: None = None
    rekor_key: None = None


def _material(shared_fixtures: Path, copies: int) -> ImageSignatures:
    raw = (shared_fixtures / SAMPLE / "signature-1").read_bytes()
    document = json.loads(raw.removeprefix(b"\x00sigstore-json\n"))
    signature = CosignSignature.from_layer(
        base64.b64decode(document["payload"]), document["mimeType"], document["annotations"]
    )
    digest = "sha256:" + hashlib.sha256((shared_fixtures / SAMPLE / "manifest.json").read_bytes()).hexdigest()
    return ImageSignatures(digest, classic=(signature,) * copies)


def _signers(shared_fixtures: Path) -> dict[str, Signer]:
    root = TrustRoot.from_file(shared_fixtures / "cosign" / "trust" / "prod-trusted_root.json")
    return {
        "platform/mitr": Signer(KeylessIdentity(issuer=ISSUER, subject="mitr@redhat.com"), root),
        "platform/redhat": Signer(KeylessIdentity(issuer=ISSUER, subject_regex=r"[a-z]+@redhat\.com"), root),
    }


def test_one_certificate_admitted_by_two_identities_counts_once(shared_fixtures: Path) -> None:
    signers = _signers(shared_fixtures)
    now = datetime.now(UTC)
    verified = verify_image(
        _material(shared_fixtures, 1), image_trust(signers, 1), repository=None, location=None, now=now
    )
    assert verified.identities == (f"mitr@redhat.com ({ISSUER})",)
    assert verified.verified == 1
    # Two copies of its signature, two identity entries that admit it: still one signer of the two required.
    with pytest.raises(VerificationError, match="1 of 2 required signatures"):
        verify_image(
            _material(shared_fixtures, 2), image_trust(signers, 2), repository=None, location=None, now=now
        )

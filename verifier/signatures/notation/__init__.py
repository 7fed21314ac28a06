"""Notary Project (Notation) signatures: verified offline against trust stores and trusted identities.

``verify_notation`` checks one JWS or COSE envelope found as an OCI referrer (artifact type
:data:`ARTIFACT_TYPE`) of an artifact against a :class:`NotationTrust` (trust stores, trusted identities,
registry scopes, verification level); ``sign_notation`` makes one (``trtguard sign --format notation``).
What is and is not supported: docs/signatures.md, "Notary Project signatures".
"""

from __future__ import annotations

from typing import Final

from verifier.signatures.notation._envelope import (
    COSE_MEDIA_TYPE,
    JWS_MEDIA_TYPE,
    MAX_ENVELOPE_BYTES,
    PAYLOAD_CONTENT_TYPE,
)
from verifier.signatures.notation._sign import sign_notation
from verifier.signatures.notation._trust import (
    Level,
    NotationTrust,
    StoreType,
    TrustedIdentity,
    load_certificates,
    parse_identities,
)
from verifier.signatures.notation._verify import (
    ArtifactDescriptor,
    NotationSignature,
    NotationVerified,
    TargetArtifact,
    read_signer,
    verify_notation,
)
from verifier.signatures.notation.config import NotationPolicy, load_notation_config

__all__ = [
    "ARTIFACT_TYPE",
    "COSE_MEDIA_TYPE",
    "JWS_MEDIA_TYPE",
    "MAX_ENVELOPE_BYTES",
    "MAX_NOTATION_SIGNATURES",
    "PAYLOAD_CONTENT_TYPE",
    "THUMBPRINT_ANNOTATION",
    "ArtifactDescriptor",
    "Level",
    "NotationPolicy",
    "NotationSignature",
    "NotationTrust",
    "NotationVerified",
    "StoreType",
    "TargetArtifact",
    "TrustedIdentity",
    "load_certificates",
    "load_notation_config",
    "parse_identities",
    "read_signer",
    "sign_notation",
    "verify_notation",
]

#: The OCI artifact type of a Notary Project signature manifest.
ARTIFACT_TYPE: Final = "application/vnd.cncf.notary.signature"
#: The signature manifest's annotation listing the chain's SHA-256 thumbprints (written by Notation).
THUMBPRINT_ANNOTATION: Final = "io.cncf.notary.x509chain.thumbprint#S256"
#: Notary Project signature manifests read for one artifact (Notation's own ``--max-signatures`` defaults to
#: 100; real artifacts have one to a few). More is refused before any is read.
MAX_NOTATION_SIGNATURES: Final = 32
